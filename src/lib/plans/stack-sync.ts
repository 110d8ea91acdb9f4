// `ichor stack sync` as one plan: after the registry lost its content (an emptyDir of a
// restarted pod), put back the bundles ichor published, with the same digests, and have
// Kokumi render again the Preparations Argo CD pulls (promotion Manual: approve a render of the
// content already served, which is no change); have Argo CD sync again the objects
// changed out of band. Every step probes first, so with everything present the run changes
// nothing (`changed: false`).
import type {Session} from '../session/session.js'
import {closeRegistryTunnelTask} from '../session/tasks.js'
import {renderStackFromInstallation, type StackArtifactSources} from '../stack/from-installation.js'
import {STACK_COMPONENTS, type StackComponent} from '../state/installation-types.js'
import {approveRerendersTask, republishTask, rerenderTask, resyncDriftedTask, type PublishedBundles} from '../stack/sync-tasks.js'
import {waitApplicationsTask} from '../stack/install-tasks.js'
import {readInstallation} from '../state/installation.js'
import type {RunResult} from '../tasks/types.js'
import type {Task} from '../tasks/types.js'
import type {PlanOptions} from './options.js'
import {runOptions, runPlan, type Plan} from './run.js'
import {once} from '../tasks/memo.js'

export interface StackSyncOptions extends PlanOptions {
  registryEndpoint?: string
  /** The artifacts the cluster was installed with (flags or mirror), for a re-render. */
  sources: StackArtifactSources
  yes: boolean
  json: boolean
}

export interface StackSyncResult extends RunResult {
  /** Promotion Manual: what waits for `ichor stack promote`, one line per component. */
  awaitingApproval: string[]
}

/** The steps of `ichor stack sync` after the Lease, in order. */
function stackSyncSteps(session: Session, o: StackSyncOptions, awaiting: Map<StackComponent, string>): Task[] {
  const published = once(() => readPublished(session))
  const stack = once(() => renderStackFromInstallation(session, o.sources))
  return [
    republishTask({session, published, stack}),
    rerenderTask({session, components: STACK_COMPONENTS, timeoutMs: o.timeoutMs}),
    approveRerendersTask({session, components: STACK_COMPONENTS}),
    resyncDriftedTask({session, components: STACK_COMPONENTS, timeoutMs: o.timeoutMs}),
    closeRegistryTunnelTask({session}),
    waitApplicationsTask({session, components: STACK_COMPONENTS, timeoutMs: o.timeoutMs, awaiting}),
  ]
}

export function stackSyncPlan(o: StackSyncOptions): Plan<void, StackSyncResult> {
  const awaiting = new Map<StackComponent, string>()
  return {
    command: 'stack sync',
    session: {kubeconfig: o.kubeconfig, context: o.context, registryEndpoint: o.registryEndpoint},
    consent: () => 'Republish the bundles the registry lost, have Kokumi render them again and Argo CD sync what drifted?',
    steps: (_, {session}) => stackSyncSteps(session, o, awaiting),
    result: (run) => ({...run, awaitingApproval: [...awaiting.values()]}),
  }
}

export function runStackSyncPlan(o: StackSyncOptions): Promise<StackSyncResult> {
  return runPlan(stackSyncPlan(o), runOptions(o))
}

async function readPublished(session: Session): Promise<PublishedBundles> {
  const cr = await readInstallation(await session.kube())
  const out: PublishedBundles = {}
  for (const [c, s] of Object.entries(cr?.status?.stack ?? {})) if (s) out[c as keyof PublishedBundles] = {tag: s.publishedTag, digest: s.digest}
  return out
}
