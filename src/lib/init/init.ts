// `ichor init` from parsed flags to its typed result: inputs checked (or asked for on a
// terminal), values read, rendering started, then either the offline dry run's folder or
// the plan against the nodes and the cluster.
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import {runInitPlan, type InitResult} from '../plans/init.js'
import {generateStackSecrets} from '../stack/prepare.js'
import type {PromotionMode} from '../stack/orders.js'
import {localState} from '../state/local.js'
import type {OutputMode} from '../tasks/engine.js'
import {readValuesFile} from '../values/input.js'
import {writeInitDryRun} from './dry-run.js'
import {checkInitInputs, type InitFlags} from './inputs.js'
import {canPrompt, confirm, promptMissingInitFlags, requireConsent} from './prompts.js'
import {renderInit, type InitRender} from './render.js'

export interface InitRequest {
  flags: InitFlags
  values: {cilium?: string; argocd?: string; kokumi?: string}
  sources: {ciliumChart?: string; argocdChart?: string; kokumiManifest?: string; mirror?: string; assetsDir?: string}
  promotion: PromotionMode
  dryRun: boolean
  /** With dryRun: render offline into this folder, contact nothing. */
  outputDir?: string
  stateDir?: string
  kubeconfig?: string
  context?: string
  registryEndpoint?: string
  breakLock: boolean
  yes: boolean
  timeoutMs: number
  /** --json: never prompt, events as JSON. */
  json: boolean
  output: OutputMode
  /** Notes for the operator (which artifact was used). */
  note: (line: string) => void
}

export interface OfflineDryRunResult {
  dryRun: true
  output: string
  files: string[]
  plan: {id: string; title: string}[]
  /** Secret values left out of the written files (where, what). */
  redacted: string[]
  bundles: {component: string; repository: string; tag: string; manifestDigest: string}[]
  assets: {id: string; path: string; version: string; sha256: string; matchesPin: boolean}[]
}

export type InitOutcome = {kind: 'offline'; result: OfflineDryRunResult} | {kind: 'plan'; result: InitResult; render: InitRender; inputs: ReturnType<typeof checkInitInputs>}

export async function init(req: InitRequest): Promise<InitOutcome> {
  if (req.outputDir && !req.dryRun) throw new IchorError('--output-dir is only used with --dry-run', {exitCode: EXIT.usage})
  // A real run changes nodes: on a terminal it asks, without one (or with --json) it needs --yes.
  if (!req.dryRun) requireConsent({yes: req.yes, tty: !req.json && canPrompt()})
  const interactive = !req.dryRun && !req.json && !req.yes && canPrompt()
  const flags = interactive ? await promptMissingInitFlags(req.flags) : req.flags
  const inputs = checkInitInputs(flags, {requireNodes: !req.dryRun})
  const userValues = {
    cilium: req.values.cilium ? readValuesFile(req.values.cilium, '--cilium-values') : {},
    argocd: req.values.argocd ? readValuesFile(req.values.argocd, '--argocd-values') : {},
    kokumi: req.values.kokumi ? readValuesFile(req.values.kokumi, '--kokumi-values') : {},
  }
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
    promotion: req.promotion,
    generated,
    onAsset: req.note,
  })
  rendering.catch(() => undefined) // awaited below or by the plan's validate step

  if (req.dryRun && req.outputDir) {
    const render = await rendering
    const out = writeInitDryRun(req.outputDir, inputs, render)
    const bundles = Object.values(render.stack.components).map((c) => ({component: c.component, repository: c.bundle.repository, tag: c.bundle.tag, manifestDigest: c.bundle.artifact.manifestDigest}))
    const assets = Object.values(render.assets).map(({id, path, version, sha256, matchesPin}) => ({id, path, version, sha256, matchesPin}))
    return {kind: 'offline', result: {dryRun: true, output: out.dir, files: out.files, plan: out.plan, redacted: out.redacted, bundles, assets}}
  }

  if (interactive) {
    req.note('rendering and checking Cilium, Argo CD and Kokumi before asking to go ahead...')
    await rendering // a confirmation is asked only for inputs that render
    const nodes = [...inputs.controlPlanes, ...inputs.workers].join(', ')
    if (!(await confirm(`Configure ${nodes} as cluster "${inputs.clusterName}" (${inputs.endpoint})?`))) {
      throw new IchorError('aborted: nothing was changed', {exitCode: EXIT.failed})
    }
  }
  const result = await runInitPlan({
    inputs,
    render: rendering,
    state: localState(inputs.clusterName, req.stateDir),
    generated,
    userValues,
    registryEndpoint: req.registryEndpoint,
    breakLock: req.breakLock,
    kubeconfig: req.kubeconfig,
    context: req.context,
    timeoutMs: req.timeoutMs,
    output: req.output,
    dryRun: req.dryRun,
    note: req.note,
  })
  return {kind: 'plan', result, render: await rendering, inputs}
}
