// `ichor init` from parsed flags to its typed result: inputs checked (or asked for on a
// terminal), values read, rendering started, then either the offline dry run's folder or
// the plan against the nodes and the cluster.
import type {Reporter} from '../log/reporter.js'
import {kubernetesCompatibilityWarning} from '../cilium/compatibility.js'
import {IchorError, ValidationError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import {checkNodesReachable, claimStateDir, INIT_LEASE, initPlanSteps, initResult, initSteps} from './init.js'
import {runOptions, runPlan, type Plan} from './run.js'
import {outputModeFor} from '../tasks/engine.js'
import type {PlanOptions} from './options.js'
import type {GeneratedStackSecrets, MachineConfigInputs, PromotionMode} from '../state/installation-types.js'
import {generateStackSecrets} from '../stack/prepare.js'
import type {StackSecretsOutcome} from '../stack/install-tasks.js'
import type {Kube} from '../kube/client.js'
import type {Reachability} from '../talos/talosctl.js'
import {readServedApiGroups} from '../kube/reads.js'
import {readInstallation, readTalosBundleSecret} from '../state/installation.js'
import {bundleOfSecret, storedFormatOf, TALOS_SECRET_NAME, type SecretWithData, type TalosBundle} from '../state/sealed-bundle.js'
import {givenStateKey, missingStateKeyError, promptStateKey, requireNewStateKey, type StateKey} from '../state/state-key.js'
import {localState, type LocalState} from '../state/local.js'
import {heedSignals} from '../session/interrupt.js'
import {checkArtifactFlags, checkCiliumValuesInput, ciliumChartVersionInUse} from './local-input.js'
import type {Values} from '../values/path.js'
import {readValuesFile} from '../values/input.js'
import {givenValues, type ValuesInput} from '../values/layer.js'
import {writeInitDryRun} from '../init/dry-run.js'
import {renderNodeConfigViews} from '../init/node-configs.js'
import {talosctlPath} from '../talos/talosctl.js'
import {checkInitInputs, initInputWarnings, installDiskLines, installDiskProblems, type InitFlags, type InitInputs} from '../init/inputs.js'
import {keepStoredLayers, keepStoredSettings} from '../init/stored-settings.js'
import {confirm, consentNeeded} from './consent.js'
import {checkInitPrerequisites, promptMissingInitFlags} from '../init/prompts.js'
import {renderInit, type InitRender} from '../init/render.js'
import type {InitResult} from '../init/summary.js'
import {checkRestoreTarget, markRestoreStarted, type RestoreSource} from '../backup/restore.js'

/** init's flags; kubeconfig, context, --timeout, --dry-run, --break-lock, --yes and the output as every plan takes them (planOptions). */
export interface InitRequest extends PlanOptions {
  flags: InitFlags
  /** -f/--set… for Cilium (read here, before anything is contacted); a file each for the stack. */
  values: {cilium?: ValuesInput; argocd?: string; kokumi?: string}
  sources: {ciliumChart?: string; argocdChart?: string; kokumiManifest?: string; mirror?: string; assetsDir?: string}
  /** --promotion; omitted: what the cluster stores, Automatic on a new one. */
  promotion?: PromotionMode
  /** --allow-unpinned: a real run may install artifacts that are not the pinned ones (recorded as such in the CR). */
  allowUnpinned?: boolean
  /** With dryRun: render offline into this folder, contact nothing. */
  outputDir?: string
  stateDir?: string
  /** --state-passphrase-file: the key of the Talos bundle kept in the cluster (else the environment, else a prompt). */
  statePassphraseFile?: string
  /** The key, already read (`ichor restore` opened the backup with it). */
  stateKey?: StateKey
  registryEndpoint?: string
  yes: boolean
  /** --allow-reboot: a node Talos must reboot to take a changed machine config is rebooted without asking. */
  allowReboot?: boolean
  /** --json: never prompt, events as JSON. */
  json: boolean
  /** Where notes for the operator go (which artifact was used, what a dry run would do). */
  report: Reporter
  /**
   * `ichor restore`: the backup the cluster comes back from. Until etcd is recovered its spec and
   * sealed bundle are the cluster's stored state; the first control plane bootstraps from its
   * snapshot.
   */
  restore?: RestoreSource
}

export interface OfflineDryRunResult {
  dryRun: true
  output: string
  files: string[]
  plan: {id: string; title: string}[]
  /** Secret values left out of the written files (where, what). */
  redacted: string[]
  /** Files an earlier dry run wrote into the folder and this one does not: removed. */
  removed: string[]
  /** What the folder holds that ichor did not write (a folder as `name/`): left as it is. */
  foreign: string[]
  bundles: {component: string; repository: string; tag: string; manifestDigest: string}[]
  assets: {id: string; path: string; version: string; sha256: string; matchesPin: boolean}[]
  /** Accepted but unwise inputs (initInputWarnings) and the Cilium/Kubernetes compatibility warning, also said on stderr. */
  warnings: string[]
}

export type InitOutcome =
  | {kind: 'offline'; result: OfflineDryRunResult}
  | {kind: 'plan'; result: InitResult & {warnings: string[]}; render: InitRender; inputs: ReturnType<typeof checkInitInputs>}

export async function init(req: InitRequest): Promise<InitOutcome> {
  if (req.outputDir && !req.dryRun) throw new IchorError('--output-dir is only used with --dry-run', {exitCode: EXIT.usage})
  // The confirmation rule (consent.ts): a real run asks on a terminal; without one (or with --json) it needs --yes.
  const interactive = consentNeeded({command: 'init', yes: req.yes, dryRun: req.dryRun, json: req.json}) === 'ask'
  // Prerequisites before questions: what `ichor doctor` checks, before the first prompt.
  if (interactive) await checkInitPrerequisites({talosVersion: req.flags.talosVersion, sources: req.sources})
  const flags = interactive ? await promptMissingInitFlags(req.flags) : req.flags
  const ciliumVersion = ciliumChartVersionInUse(req.sources)
  // Only a live dry run may leave the nodes out before the cluster's stored spec is read (decide).
  const checked = checkInitInputs(flags, {requireNodes: !req.dryRun || (req.outputDir !== undefined && !req.restore), ciliumVersion})
  // Reading the patches is synchronous work: a Ctrl-C during it ends the run here (exit 130).
  await heedSignals()
  // The key of the Talos bundle kept in the cluster: checked (or found missing) before
  // anything reaches a node or the cluster; a prompt comes after the confirmation.
  const givenKey = req.stateKey ?? (await givenStateKey(req.statePassphraseFile))
  if (!req.dryRun && !givenKey && !interactive) throw missingStateKeyError('ichor init')
  const given = {
    // Read, and an owned key at another value than ichor's refused, before any cluster is read.
    cilium: req.values.cilium ? givenValues(checkCiliumValuesInput(req.values.cilium)) : undefined,
    argocd: req.values.argocd ? readValuesFile(req.values.argocd, '--argocd-values') : undefined,
    kokumi: req.values.kokumi ? readValuesFile(req.values.kokumi, '--kokumi-values') : undefined,
  }
  checkArtifactFlags(req.sources) // a bad file is named before the cluster is asked anything
  const state = localState(checked.clusterName, req.stateDir)
  const local: LocalInit = {req, flags, checked, given, state, ciliumVersion}
  if (req.dryRun && req.outputDir !== undefined) return {kind: 'offline', result: await offlineDryRun(local, await decide(local, undefined))}
  return runPlan(initPlan(local, {givenKey, interactive}), liveRunOptions(req))
}

/**
 * A live dry run's result is what a real run would change (the command prints it on stdout);
 * probing the steps one by one is progress, on stderr, as kubectl and helm keep stdout for
 * the result. A real run's steps are its output and stay where they are.
 */
function liveRunOptions(req: InitRequest): ReturnType<typeof runOptions> {
  const o = runOptions(req)
  if (!req.dryRun || o.json) return o
  const stream = req.stream ?? process.stderr
  return {...o, stream, output: o.output === 'json' ? 'json' : outputModeFor({stream})}
}

/** What init checked on this machine before any connection. */
interface LocalInit {
  req: InitRequest
  flags: InitFlags
  checked: InitInputs
  given: {cilium?: Values; argocd?: Values; kokumi?: Values}
  state: LocalState
  /** The Cilium chart's version this run installs, when it can be found: the default Kubernetes follows it. */
  ciliumVersion?: string
}

/** The chart's tested Kubernetes range, said on stderr and kept in the --json result's warnings. */
function compatibilityWarnings(r: InitRender, inputs: InitInputs): string[] {
  const warning = kubernetesCompatibilityWarning(r.assets.cilium.version, inputs.kubernetesVersion, inputs.talosVersion)
  return warning ? [warning] : []
}

/** The inputs a run uses once the cluster's stored state (if any) is read, and the render started with them. */
interface Decided {
  inputs: InitInputs
  userValues: {cilium: Values; argocd: Values; kokumi: Values}
  previousMachineConfig?: MachineConfigInputs
  storedBundle?: SecretWithData
  warnings: string[]
  generated: GeneratedStackSecrets
  rendering: Promise<InitRender>
}

/**
 * An existing cluster's stored settings and user layers are the run's: a day-2 change made
 * with `cni values set` or `stack values set` is never undone by a rerun of init.
 */
async function decide(l: LocalInit, live: Kube | undefined): Promise<Decided> {
  const {req} = l
  const stored = (live ? (await readInstallation(live))?.spec : undefined) ?? req.restore?.spec
  // One rule for every stored setting: an omitted flag keeps it, a different one is refused.
  const settings = keepStoredSettings({flags: l.flags, promotion: req.promotion}, l.checked, stored)
  const userValues = keepStoredLayers(l.given, stored, settings.issues)
  // With the stored nodes in: a cluster needs a control plane, in a dry run as in a real one.
  const inputs = {...checkInitInputs(settings.flags, {requireNodes: true, ciliumVersion: l.ciliumVersion}), machineConfig: settings.machineConfig}
  const servedApiGroups = live ? await readServedApiGroups(live) : undefined
  const storedBundle = (live ? await readTalosBundleSecret(live) : undefined) ?? req.restore?.bundle
  if (storedBundle && storedFormatOf(storedBundle) === 'plaintext') {
    req.report.note(
      `${TALOS_SECRET_NAME} was stored in plaintext by an older ichor: ${req.dryRun ? 'a real run re-writes' : 'this run re-writes'} it encrypted with age`,
    )
  }
  // Warnings (not errors) about the inputs the run uses, said before any step.
  const warnings = initInputWarnings(inputs)
  for (const warning of warnings) req.report.note(`warning: ${warning}`)
  const generated = generateStackSecrets()
  const s = req.sources
  const rendering = renderInit(inputs, {
    sources: {
      cilium: {override: s.ciliumChart, mirror: s.mirror, assetsDir: s.assetsDir},
      argocd: {override: s.argocdChart, mirror: s.mirror, assetsDir: s.assetsDir},
      kokumi: {override: s.kokumiManifest, mirror: s.mirror, assetsDir: s.assetsDir},
    },
    userCiliumValues: userValues.cilium,
    argocdValues: userValues.argocd,
    kokumiValues: userValues.kokumi,
    promotion: settings.promotion,
    generated,
    report: req.report,
    servedApiGroups,
    pinning: {dryRun: req.dryRun, allowUnpinned: req.allowUnpinned ?? false},
  })
  rendering.catch(() => undefined) // awaited below or by the plan's validate step
  // Said as soon as the chart is known, before any step runs (the plan awaits the same render).
  rendering.then(
    (r) => {
      for (const warning of compatibilityWarnings(r, inputs)) req.report.note(`warning: ${warning}`)
      for (const note of r.cilium.report.ownedNotes) req.report.note(`Cilium values: ${note}`)
    },
    () => undefined,
  )
  if (inputs.workers.length === 0) {
    req.report.note('no worker: the control planes run workloads too (their NoSchedule taint is not set), or Kokumi and Argo CD would never be scheduled')
  }
  return {inputs, userValues, previousMachineConfig: settings.previousMachineConfig, storedBundle, warnings, generated, rendering}
}

/** --dry-run --output-dir: everything rendered into a folder; nothing is contacted. */
async function offlineDryRun(l: LocalInit, d: Decided): Promise<OfflineDryRunResult> {
  const {req} = l
  const render = await d.rendering
  const nodes = await renderNodeConfigViews(d.inputs, render, talosctlFound())
  if (nodes.some((n) => n.config === undefined))
    req.report.note("talosctl was not found: the dry run writes each node's summary, not its full machine config (install talosctl or set ICHOR_TALOSCTL)")
  const plan = initPlanSteps({...d, state: l.state, allowReboot: false, timeoutMs: req.timeoutMs, promotion: render.stack.promotion})
  // Nothing is written after a Ctrl-C, however long the render's synchronous parts ran.
  await heedSignals()
  const out = writeInitDryRun(req.outputDir!, d.inputs, render, plan, nodes, [...d.warnings, ...compatibilityWarnings(render, d.inputs)])
  if (out.removed.length > 0) req.report.note(`removed from ${out.dir}, written by an earlier dry run and not by this one: ${out.removed.join(', ')}`)
  if (out.foreign.length > 0) req.report.note(`warning: ${out.dir} also holds what ichor did not write (left as it is): ${out.foreign.join(', ')}`)
  const bundles = Object.values(render.stack.components).map((c) => ({
    component: c.component,
    repository: c.bundle.repository,
    tag: c.bundle.tag,
    manifestDigest: c.bundle.artifact.manifestDigest,
  }))
  const assets = Object.values(render.assets).map(({id, path, version, sha256, matchesPin}) => ({id, path, version, sha256, matchesPin}))
  return {
    dryRun: true,
    output: out.dir,
    files: out.files,
    plan,
    redacted: out.redacted,
    removed: out.removed,
    foreign: out.foreign,
    bundles,
    assets,
    warnings: [...d.warnings, ...compatibilityWarnings(render, d.inputs)],
  }
}

type InitPrepared = Decided & {stateKey?: StateKey; clusterBundle?: TalosBundle; nodes?: Promise<Reachability[]>; secrets: StackSecretsOutcome}

/** `ichor init` on the plan runner: the session on ichor's own kubeconfig (or --kubeconfig), the Lease after bootstrap. */
function initPlan(l: LocalInit, o: {givenKey?: StateKey; interactive: boolean}): Plan<InitPrepared, InitOutcome> {
  const {req, state} = l
  return {
    command: req.restore ? 'restore' : 'init',
    session: {kubeconfig: req.kubeconfig, context: req.context, ownKubeconfig: state.kubeconfig, registryEndpoint: req.registryEndpoint},
    lease: INIT_LEASE,
    async prepare({session}) {
      const source = req.restore
      if (source) await checkRestoreTarget({session, source, state, nodes: [...l.checked.controlPlanes, ...l.checked.workers], endpoint: l.checked.endpoint})
      const live = (await session.clusterAnswers()) ? await session.kube() : undefined
      const decided = await decide(l, live)
      const diskProblems = installDiskProblems(decided.inputs)
      if (diskProblems.length > 0) throw new ValidationError('ichor init: invalid input', diskProblems)
      // A live dry run names each node's install disk too (the plan then checks it exists on the node).
      if (req.dryRun) for (const line of installDiskLines(decided.inputs)) req.report.note(line)
      return {...decided, secrets: {}}
    },
    async consent(p) {
      req.report.note('rendering and checking Cilium, Argo CD and Kokumi before asking to go ahead...')
      await p.rendering // a confirmation is asked only for inputs that render
      const nodes = [...p.inputs.controlPlanes, ...p.inputs.workers].join(', ')
      // Installing erases the disk: each node's is named before the operator agrees.
      for (const line of installDiskLines(p.inputs)) req.report.note(line)
      const from = req.restore
      if (from)
        return `Restore cluster "${p.inputs.clusterName}" (${p.inputs.endpoint}) from ${from.file} (taken ${from.manifest.createdAt}, etcd revision ${from.manifest.etcd.revision}) onto ${nodes}?`
      return `Configure ${nodes} as cluster "${p.inputs.clusterName}" (${p.inputs.endpoint})?`
    },
    async afterConsent(p, ctx) {
      Object.assign(p, await unlockStoredBundle(p.storedBundle, o.givenKey, {prompt: !req.dryRun, report: req.report}))
      // Rendering is CPU and helm; probing the nodes waits on talosctl: both at once.
      p.nodes = checkNodesReachable(p.inputs, state, ctx.talos.reads, (line) => req.report.note(line))
      p.nodes.catch(() => undefined) // awaited by the validate step
      const release = claimStateDir(state, {dryRun: req.dryRun, report: req.report})
      if (release) ctx.onClose(release)
      if (req.restore && !req.dryRun) markRestoreStarted(state, req.restore)
    },
    steps: (p, {session, talos}) =>
      initSteps({
        ...p,
        session,
        reads: talos.reads,
        state,
        render: () => p.rendering,
        nodes: () => p.nodes!,
        allowReboot: req.allowReboot ?? false,
        // On a terminal, a reboot Talos needs for a changed config is asked for (--allow-reboot skips the question).
        confirmReboot: o.interactive ? (question) => confirm(question, {default: false}) : undefined, // a reboot is never the default answer
        report: req.report,
        timeoutMs: req.timeoutMs,
        restore: req.restore,
      }),
    async result(run, p, {session}) {
      const render = await p.rendering
      const result = await initResult(run, {session, state, render, secrets: p.secrets})
      return {kind: 'plan', result: {...result, warnings: [...p.warnings, ...compatibilityWarnings(render, p.inputs)]}, render, inputs: p.inputs}
    },
  }
}

/**
 * The key (given, or asked: twice for a new bundle, once for a sealed one) and the bundle
 * the cluster keeps, opened now: a wrong key is exit 2 before any step. A dry run asks
 * nothing and opens the bundle only when a key was given.
 */
async function unlockStoredBundle(
  stored: SecretWithData | undefined,
  given: StateKey | undefined,
  o: {prompt: boolean; report: Reporter},
): Promise<{stateKey?: StateKey; clusterBundle?: TalosBundle}> {
  const sealed = stored !== undefined && storedFormatOf(stored) === 'sealed'
  const stateKey = given ?? (o.prompt ? await promptStateKey({confirm: !sealed}) : undefined)
  // A key that seals a new bundle must be long enough (refused before any step, a dry run
  // too); one that opens a sealed bundle cannot be changed here: bundleOfSecret warns.
  if (stateKey && !sealed) requireNewStateKey(stateKey)
  if (!stored || (sealed && !stateKey)) return {stateKey}
  const opened = await bundleOfSecret(
    stored,
    async () => stateKey!,
    (w) => o.report.note(`warning: ${w}`),
  )
  return {stateKey, clusterBundle: opened?.bundle}
}

function talosctlFound(): boolean {
  try {
    talosctlPath()
    return true
  } catch {
    return false
  }
}
