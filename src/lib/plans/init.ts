// `ichor init` as one plan (DESIGN.md "The flow of ichor init"): the steps in order, top to
// bottom, each made by the factory of its concern. Every step has a read-only probe beside
// its action, so a rerun after a crash, from another machine or in a script converges to
// the same end state without regenerating what must not change.
import type {Reporter} from '../log/reporter.js'
import {forgetOldNodesTask, recordRestoreTask, type RestoreSource} from '../backup/restore.js'
import {rerenderTask} from '../stack/sync-tasks.js'
import {onCluster, validateInitTask} from './steps/init.js'
import {existsSync} from 'node:fs'
import {installedArtifact} from '../assets/pinning.js'
import {adoptCiliumTask, ciliumReleaseDrift, ciliumReleaseView, waitCiliumTask} from '../cilium/tasks.js'
import {ValidationError, type Issue} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import type {InitInputs} from '../init/inputs.js'
import type {InitRender} from '../init/render.js'
import type {InitResult} from '../init/summary.js'
import {openSession, type Session} from '../session/session.js'
import {closeRegistryTunnelTask, leaseTask} from '../session/tasks.js'
import {STACK_COMPONENTS, type GeneratedStackSecrets, type MachineConfigInputs, type PromotionMode} from '../state/installation-types.js'
import {
  firstApplyTask,
  ordersTask,
  policiesTask,
  promoteFirstInstallTask,
  publishBundlesTask,
  showKokumiPasswordOnceTask,
  stackSecretsTask,
  waitApplicationsTask,
  waitApplicationsTitle,
  type StackSecretsOutcome,
} from '../stack/install-tasks.js'
import type {InstallationSpec, InstallationStatus} from '../state/installation.js'
import type {TalosBundle} from '../state/sealed-bundle.js'
import type {StateKey} from '../state/state-key.js'
import {prepareStateDir, readStateFile, type LocalState} from '../state/local.js'
import {lockStateDir} from '../state/lock.js'
import {recordStatusTask, storeDesiredStateTask} from './steps/state.js'
import {inlineManifestForms} from '../talos/handover.js'
import {chooseInstallDisk, describeSelector, installDiskRefusal} from '../talos/disk-selector.js'
import {installDiskFlag, installDiskFor, storedMachineConfig} from '../talos/machine-config.js'
import {nodeConfigChangesTask} from '../talos/apply-config.js'
import {listDisks, type Reachability} from '../talos/talosctl.js'
import {TalosNodeReads} from '../talos/node-reads.js'
import {applyConfigsTask, bootstrapTask, machineConfigsTask, talosHandoverTask, talosSecretsTask} from '../talos/tasks.js'
import type {RunResult} from '../tasks/types.js'
import type {Later, Task} from '../tasks/types.js'
import {withoutOwnedKeys} from '../values/engine.js'
import type {Values} from '../values/path.js'
import {CILIUM_OWNED_KEYS} from '../cilium/defaults.js'
import {ARGOCD_OWNED_KEYS} from '../stack/argocd.js'
import {withLease} from './run.js'
import {holds} from '../tasks/probe.js'

/** What init's steps are built from: the checked inputs and what the run read before them. */
export interface InitStepsInput {
  session: Session
  /** The run's node reads (ctx.talos.reads): what the pre-check read serves the later probes. */
  reads: TalosNodeReads
  inputs: InitInputs
  /** May still be rendering: the nodes are probed meanwhile (read-only). */
  render: Later<InitRender>
  /** Every node's answer, checked by the validate step. */
  nodes: Later<Reachability[]>
  state: LocalState
  /** The key the Talos bundle is sealed with in the cluster (absent only in a dry run without one). */
  stateKey?: StateKey
  /** The bundle the cluster already keeps, opened with stateKey before the plan (another machine continues with it). */
  clusterBundle?: TalosBundle
  userValues: {cilium: Values; argocd: Values; kokumi: Values}
  /** Fresh values, used only where the cluster holds none yet. */
  generated: GeneratedStackSecrets
  /** Notes for the operator. */
  report?: Reporter
  /** The machine-config inputs the cluster stores (its nodes run them); a changed one is applied to the nodes. */
  previousMachineConfig?: MachineConfigInputs
  allowReboot: boolean
  confirmReboot?: (question: string) => Promise<boolean>
  timeoutMs: number
  /** Filled by the stack-secrets step: the Kokumi password to show once. */
  secrets: StackSecretsOutcome
  /** `ichor restore`: etcd bootstraps from the backup's snapshot, and the cluster records which backup. */
  restore?: RestoreSource
}

/**
 * There is no API server before Talos bootstrap: the runner puts the Lease step right after
 * it, or takes the Lease before the first step when the cluster already answers (a rerun),
 * so on an existing cluster every step, node steps included, runs under the Lease.
 */
export const INIT_LEASE = {after: 'bootstrap-etcd'}

/** The steps of `ichor init`, in order (the runner adds the Lease step, INIT_LEASE). */
export function initSteps(d: InitStepsInput): Task[] {
  const {session, render, state, inputs, timeoutMs} = d
  const stack = async () => (await render()).stack
  const release = ciliumReleaseView(session)
  const cluster = (task: Task) => onCluster(session, task)
  return [
    validateInitTask(d),
    talosSecretsTask({state, clusterBundle: d.clusterBundle}),
    machineConfigsTask({state, inputs, render}),
    applyConfigsTask({state, inputs, seen: d.nodes, timeoutMs, reads: d.reads}),
    bootstrapTask({state, inputs, session, timeoutMs, recoverFrom: d.restore?.snapshot}),
    ...(d.restore
      ? [cluster(recordRestoreTask({session, source: d.restore})), cluster(forgetOldNodesTask({session, nodes: [...inputs.controlPlanes, ...inputs.workers]}))]
      : []),
    nodeConfigChangesTask({
      state,
      inputs,
      previous: d.previousMachineConfig,
      render,
      allowReboot: d.allowReboot,
      confirmReboot: d.confirmReboot,
      guard: () => session.guard(),
      kube: () => session.kube(),
      report: d.report,
      timeoutMs,
      reads: d.reads,
    }),
    cluster(
      storeDesiredStateTask({
        session,
        state,
        timeoutMs,
        stateKey: d.stateKey,
        clusterBundle: d.clusterBundle,
        spec: async () => desiredSpec(d, await render()),
      }),
    ),
    cluster(waitCiliumTask({session, timeoutMs})),
    cluster(
      adoptCiliumTask({
        session,
        release,
        timeoutMs,
        chartPath: async () => (await render()).assets.cilium.path,
        values: async () => (await render()).cilium.effective,
      }),
    ),
    cluster(talosHandoverTask({session, state, controlPlanes: inputs.controlPlanes, reads: d.reads})),
    cluster(stackSecretsTask({session, stack, generated: d.generated})),
    cluster(firstApplyTask({session, component: 'kokumi', stack, timeoutMs})),
    cluster(firstApplyTask({session, component: 'argocd', stack, timeoutMs})),
    cluster(publishBundlesTask({session, stack})),
    // A restore: the registry (an emptyDir) lost what Kokumi rendered from the bundles too.
    ...(d.restore ? [cluster(rerenderTask({session, components: STACK_COMPONENTS, timeoutMs}))] : []),
    closeRegistryTunnelTask({session}),
    cluster(ordersTask({session, stack})),
    // Automatic promotion approves nothing: a dry run before bootstrap says so rather than "would run".
    onCluster(session, promoteFirstInstallTask({session, stack, timeoutMs}), {
      holdsWithout: async () => ((await stack()).promotion === 'Automatic' ? holds('promotion Automatic: Kokumi serves each bundle') : undefined),
    }),
    cluster(policiesTask({session, stack})),
    cluster(waitApplicationsTask({session, stack, timeoutMs})),
    cluster(recordStatusTask({session, release, stack, artifacts: async () => installedArtifacts((await render()).assets)})),
    cluster(showKokumiPasswordOnceTask({session, outcome: d.secrets})),
  ]
}

/**
 * Before the steps of a real run: the state folder made private (or refused, exit 2) before
 * anything is written into it, and locked, since two runs on one folder would both generate
 * Talos secrets before the cluster (and its Lease) exists. A dry run creates nothing but
 * still closes a folder others can read. Returns the lock's release.
 */
export function claimStateDir(state: LocalState, o: {dryRun: boolean; report?: Reporter}): (() => void) | undefined {
  if (!o.dryRun || existsSync(state.dir)) for (const line of prepareStateDir(state).fixed) o.report?.note(line)
  if (o.dryRun) return undefined
  const lock = lockStateDir(state.dir, 'init')
  return () => lock.release()
}

/** The result of a run: what was published, the drift said on every run, where the kubeconfig is. */
export async function initResult(
  run: RunResult,
  d: {session: Session; state: LocalState; render: InitRender; secrets: StackSecretsOutcome},
): Promise<InitResult> {
  const {stack, cilium} = d.render
  const drift = (await d.session.clusterAnswers()) ? await ciliumReleaseDrift(await d.session.kube(), cilium.effective) : []
  return {
    ...run,
    kokumiAdminPassword: d.secrets.kokumiAdminPassword,
    kubeconfig: d.session.kubeconfigPath ?? d.state.kubeconfig,
    bundles: Object.values(stack.components).map((c) => ({
      component: c.component,
      repository: c.bundle.repository,
      tag: c.bundle.tag,
      digest: c.bundle.artifact.manifestDigest,
    })),
    drift,
    promotion: stack.promotion,
    controlPlaneConfig: {path: d.state.controlPlaneConfig, inlineManifest: localConfigCarriesInline(d.state)},
  }
}

/**
 * The steps of a real run, for the offline dry run's plan: built on a session that contacts
 * nothing (any use is refused), never run; the Lease where the runner puts it.
 */
export function initPlanSteps(
  d: Omit<InitStepsInput, 'session' | 'render' | 'nodes' | 'secrets' | 'reads'> & {promotion?: PromotionMode},
): {id: string; title: string}[] {
  const session = openSession({command: 'init', offline: true})
  try {
    const never = () => Promise.reject(new Error('the offline plan is never run'))
    const steps = initSteps({...d, session, render: never, nodes: never, secrets: {}, reads: new TalosNodeReads()})
    return withLease(steps, leaseTask({session}), INIT_LEASE)
      .filter((s) => appliesOffline(s.id, d))
      .map(({id, title}) => ({id, title: id === 'wait-applications' && d.promotion ? waitApplicationsTitle(d.promotion) : title}))
  } finally {
    void session.close()
  }
}

/**
 * Whether a step can do anything in this run, judged from the inputs alone: the plan a reviewer
 * reads leaves out what would only be skipped. Automatic promotion approves nothing, and the
 * running nodes' machine-config change needs stored inputs to differ from (offline: none).
 */
function appliesOffline(id: string, d: {promotion?: PromotionMode; previousMachineConfig?: MachineConfigInputs}): boolean {
  if (id === 'promote-first-install') return d.promotion !== 'Automatic'
  if (id === 'node-config-changes') return d.previousMachineConfig !== undefined
  return true
}

/** Every node must answer (maintenance or configured) before any is touched. */
export async function checkNodesReachable(
  inputs: InitInputs,
  state: LocalState,
  reads: TalosNodeReads,
  note?: (line: string) => void,
): Promise<Reachability[]> {
  const talosconfig = readStateFile(state, 'talosconfig').status === 'ok' ? state.talosconfig : undefined
  const nodes = [...inputs.controlPlanes.map((n) => ['--control-plane', n] as const), ...inputs.workers.map((n) => ['--worker', n] as const)]
  // With this state folder's talosconfig (a rerun), each configured node answers with its machine
  // config, which the later steps' probes reuse: one talosctl call per node in a no-op rerun.
  const answers = await Promise.all(nodes.map(async ([flag, node]) => ({flag, r: await reads.reachable(node, {talosconfig, timeoutMs: 10_000})})))
  const issues: Issue[] = answers
    .filter(({r}) => r.state === 'unreachable')
    .map(({flag, r}) => ({
      path: flag,
      message: `${r.node} does not answer as a Talos node (${r.message ?? 'no answer'}); check the address and that it booted Talos`,
    }))
  // Exit 1 as an API server that does not answer: the addresses may be right and the machines off.
  if (issues.length > 0) throw new ValidationError('ichor init: nodes unreachable, nothing was changed', issues, {exitCode: EXIT.failed})
  // A config Talos refuses for its install disk (machine.install beside v1.14's
  // UnattendedInstallConfig) is refused for every node; a machine in maintenance mode takes any
  // config, then installs onto the disk its config names or selects, or waits forever for one
  // (Talos v1.14.1 unattended_install.go, v1alpha1_sequencer_tasks.go Install): its disks are read first.
  const diskIssues = await Promise.all(
    answers.map(async ({flag, r}) => {
      const target = installDiskFor(inputs.machineConfig, r.node, flag === '--worker' ? 'worker' : 'controlplane', inputs.talosVersion)
      const path = installDiskFlag(target.from)
      if (target.problem) return {path, message: target.problem}
      if (r.state !== 'maintenance') return undefined
      const disks = await listDisks({node: r.node})
      const message = installDiskRefusal(target, r.node, disks)
      if (message) return {path, message}
      // A selector's choice is named: the disk it erases is known only now.
      const choice = target.selector && !target.disk ? chooseInstallDisk(target, disks) : undefined
      if (choice?.chosen)
        note?.(
          `${describeSelector(target.selector!)} (from ${target.from}) selects ${choice.chosen.dev_path} of ${r.node}${choice.matched.length > 1 ? ` (it matches ${choice.matched.map((d) => d.dev_path).join(', ')}; Talos takes the first)` : ''}; its contents are erased`,
        )
      else if (choice?.unsupported)
        note?.(`${describeSelector(target.selector!)} (from ${target.from}): ichor cannot evaluate ${choice.unsupported}; Talos matches it on ${r.node}`)
      return undefined
    }),
  )
  const missingDisks = diskIssues.filter((i): i is Issue => i !== undefined)
  if (missingDisks.length > 0) throw new ValidationError('ichor init: install disk not found, nothing was changed', missingDisks)
  return answers.map(({r}) => r)
}

function localConfigCarriesInline(state: LocalState): boolean {
  const read = readStateFile(state, 'controlPlaneConfig')
  return read.status === 'ok' && inlineManifestForms(read.text).length > 0
}

function desiredSpec(o: InitStepsInput, render: InitRender): InstallationSpec {
  const i = o.inputs
  return {
    talos: {
      clusterName: i.clusterName,
      endpoint: i.endpoint,
      talosVersion: i.talosVersion.tag,
      kubernetesVersion: i.kubernetesVersion.version,
      controlPlanes: i.controlPlanes,
      workers: i.workers,
      ...withMachineConfig(i),
    },
    // Validated by now: an owned key left in a layer holds ichor's own value, and is not stored.
    cni: {kubeProxy: i.kubeProxy, tunnel: i.tunnel, cilium: {values: withoutOwnedKeys(CILIUM_OWNED_KEYS, o.userValues.cilium)}},
    stack: {
      promotion: render.stack.promotion,
      argocd: {values: withoutOwnedKeys(ARGOCD_OWNED_KEYS, o.userValues.argocd)},
      kokumi: {values: o.userValues.kokumi},
    },
  }
}

function withMachineConfig(i: InitInputs): {machineConfig?: Partial<InitInputs['machineConfig']>} {
  const stored = storedMachineConfig(i.machineConfig)
  return stored ? {machineConfig: stored} : {}
}

/** What the IchorInstallation records about the artifacts this run installs. */
function installedArtifacts(assets: InitRender['assets']): NonNullable<InstallationStatus['artifacts']> {
  return {cilium: installedArtifact(assets.cilium), argocd: installedArtifact(assets.argocd), kokumi: installedArtifact(assets.kokumi)}
}
