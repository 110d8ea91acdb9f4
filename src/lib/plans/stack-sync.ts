// `ichor stack sync` as one plan: after the registry lost its content (an emptyDir of a
// restarted pod), put back the bundles ichor published, with the same digests, and have
// Kokumi render again the Preparations Argo CD pulls; have Argo CD sync again the objects
// changed out of band. Every step probes first, so with everything present the run changes
// nothing (`changed: false`).
import {openSession, type Session} from '../session/session.js'
import {closeRegistryTunnelTask, leaseTask} from '../session/tasks.js'
import {renderStackFromInstallation, type StackArtifactSources} from '../stack/from-installation.js'
import type {StackComponent} from '../stack/policies.js'
import {STACK_COMPONENTS} from '../stack/status.js'
import {republishTask, rerenderTask, resyncDriftedTask, waitApplicationsTask, type PublishedBundles} from '../stack/tasks.js'
import {readInstallation} from '../state/installation.js'
import {runTasks, type OutputMode, type RunResult} from '../tasks/engine.js'
import type {Task} from '../tasks/types.js'
import type {PlanOptions} from './options.js'

export interface StackSyncOptions extends PlanOptions {
  registryEndpoint?: string
  /** The artifacts the cluster was installed with (flags or mirror), for a re-render. */
  sources: StackArtifactSources
  stream?: NodeJS.WritableStream
}

export interface StackSyncResult extends RunResult {
  /** Promotion Manual: what waits for `ichor stack promote`, one line per component. */
  awaitingApproval: string[]
}

/** The steps of `ichor stack sync`, in order. */
function stackSyncSteps(session: Session, o: StackSyncOptions, awaiting: Map<StackComponent, string>): Task[] {
  const published = once(() => readPublished(session))
  const stack = once(() => renderStackFromInstallation(session, o.sources))
  return [
    leaseTask({session, breakLock: o.breakLock}),
    republishTask({session, published, stack}),
    rerenderTask({session, components: STACK_COMPONENTS, timeoutMs: o.timeoutMs}),
    resyncDriftedTask({session, components: STACK_COMPONENTS, timeoutMs: o.timeoutMs}),
    closeRegistryTunnelTask({session}),
    waitApplicationsTask({session, components: STACK_COMPONENTS, timeoutMs: o.timeoutMs, awaiting}),
  ]
}

export async function runStackSyncPlan(o: StackSyncOptions): Promise<StackSyncResult> {
  const session = openSession({command: 'stack sync', kubeconfig: o.kubeconfig, context: o.context, registryEndpoint: o.registryEndpoint})
  try {
    await session.clusterAnswers()
    const awaiting = new Map<StackComponent, string>()
    const result = await runTasks(stackSyncSteps(session, o, awaiting), {output: o.output, dryRun: o.dryRun, stream: o.stream, guard: () => session.guard()})
    return {...result, awaitingApproval: [...awaiting.values()]}
  } finally {
    await session.close()
  }
}

async function readPublished(session: Session): Promise<PublishedBundles> {
  const cr = await readInstallation(await session.kube())
  const out: PublishedBundles = {}
  for (const [c, s] of Object.entries(cr?.status?.stack ?? {})) if (s) out[c as keyof PublishedBundles] = {tag: s.publishedTag, digest: s.digest}
  return out
}

function once<T>(f: () => Promise<T>): () => Promise<T> {
  let p: Promise<T> | undefined
  return () => {
    p ??= f()
    p.catch(() => (p = undefined))
    return p
  }
}
