// Polling waits with a deadline. Every wait says what it waits for and, on timeout,
// what it saw last, so a stuck bootstrap points at the object that is stuck.
// Rollout rules follow `kubectl rollout status`
// (k8s.io/kubectl/pkg/polymorphichelpers/rollout_status.go).
import {setTimeout as sleep} from 'node:timers/promises'
import {IchorError} from '../errors/errors.js'
import {KubeApiError, type Kube, KubeUnreachableError} from './client.js'
import {getObject, type KubeObject} from './objects.js'

export interface Observation<T = void> {
  done: boolean
  /** What was seen, in words: shown as progress and in the timeout message. */
  state: string
  value?: T
}

export interface WaitOptions {
  /** Default 5 minutes. */
  timeoutMs?: number
  /** Default 1 s. */
  intervalMs?: number
  /** Called with the observed state whenever it changes. */
  onProgress?: (state: string) => void
  signal?: AbortSignal
}

export class WaitTimeoutError extends IchorError {
  readonly description: string
  readonly lastState: string
  constructor(description: string, lastState: string, timeoutMs: number) {
    super(`timed out after ${formatDuration(timeoutMs)} waiting for ${description}; last seen: ${lastState}`)
    this.name = 'WaitTimeoutError'
    this.description = description
    this.lastState = lastState
  }
}

export function formatDuration(ms: number): string {
  const s = Math.round(ms / 1000)
  if (s < 60) return `${s} s`
  return `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ''}`
}

/**
 * Polls `check` until it reports done, and returns its value. An unreachable or
 * unavailable API server (connection errors, HTTP 5xx) counts as "not yet" rather
 * than failure, since waits often span an API server restart; other errors end the wait.
 */
export async function waitFor<T = void>(description: string, check: () => Promise<Observation<T>>, options: WaitOptions = {}): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 300_000
  const intervalMs = options.intervalMs ?? 1000
  const deadline = Date.now() + timeoutMs
  let lastState = 'nothing observed yet'
  for (;;) {
    options.signal?.throwIfAborted()
    let observation: Observation<T>
    try {
      observation = await check()
    } catch (error) {
      if (!isTransient(error)) throw error
      observation = {done: false, state: (error as Error).message}
    }
    if (observation.state !== lastState) {
      lastState = observation.state
      options.onProgress?.(lastState)
    }
    if (observation.done) return observation.value as T
    const remaining = deadline - Date.now()
    if (remaining <= 0) throw new WaitTimeoutError(description, lastState, timeoutMs)
    await sleep(Math.min(intervalMs, remaining), undefined, {signal: options.signal})
  }
}

function isTransient(error: unknown): boolean {
  return error instanceof KubeUnreachableError || (error instanceof KubeApiError && error.code >= 500)
}

/** Waits until /readyz answers ok, e.g. right after bootstrap. */
export function waitForApiServer(kube: Kube, options: WaitOptions = {}): Promise<void> {
  return waitFor(
    `the Kubernetes API server ${kube.server} to be ready`,
    async () => {
      const res = await kube.requestRaw<string>('GET', '/readyz')
      return {done: res.status === 200, state: `readyz answered ${res.status}`}
    },
    options,
  )
}

interface Condition {
  type: string
  status: string
  reason?: string
  message?: string
}

function condition(object: {status?: {conditions?: Condition[]}}, type: string): Condition | undefined {
  return object.status?.conditions?.find((c) => c.type === type)
}

/** Waits until a CRD is Established, so objects of its kind can be created. */
export function waitForCrdEstablished(kube: Kube, name: string, options: WaitOptions = {}): Promise<void> {
  return waitFor(
    `CustomResourceDefinition ${name} to be Established`,
    async () => {
      const crd = await getObject<KubeObject & {status?: {conditions?: Condition[]}}>(kube, {
        apiVersion: 'apiextensions.k8s.io/v1',
        kind: 'CustomResourceDefinition',
        name,
      })
      if (!crd) return {done: false, state: 'not found'}
      const names = condition(crd, 'NamesAccepted')
      if (names?.status === 'False') {
        throw new IchorError(`CustomResourceDefinition ${name} was refused: ${names.reason}: ${names.message}`)
      }
      const established = condition(crd, 'Established')
      if (established?.status === 'True') {
        // Discovery lists the kind a moment after Established: apiextensions-apiserver's
        // DiscoveryController (pkg/apiserver/customresource_discovery_controller.go) syncs on its
        // own queue. Objects of the kind are resolved through discovery, so wait for it too.
        const spec = crd.spec as {group?: string; names?: {kind?: string}; versions?: Array<{name: string; served?: boolean}>} | undefined
        for (const v of spec?.versions ?? []) {
          if (v.served === false || !spec?.group || !spec.names?.kind) continue
          if (!(await kube.resourceFor(`${spec.group}/${v.name}`, spec.names.kind)))
            return {done: false, state: `Established; ${spec.group}/${v.name} not yet in discovery`}
        }
        return {done: true, state: 'Established'}
      }
      return {done: false, state: established ? `Established=${established.status} (${established.reason ?? ''})` : 'no Established condition yet'}
    },
    {intervalMs: 250, timeoutMs: 60_000, ...options},
  )
}

interface WorkloadStatus {
  observedGeneration?: number
  replicas?: number
  updatedReplicas?: number
  readyReplicas?: number
  availableReplicas?: number
  currentReplicas?: number
  currentRevision?: string
  updateRevision?: string
  desiredNumberScheduled?: number
  updatedNumberScheduled?: number
  numberAvailable?: number
  numberReady?: number
  conditions?: Condition[]
}

type Workload = KubeObject & {
  spec?: {
    replicas?: number
    updateStrategy?: {type?: string; rollingUpdate?: {partition?: number}}
  }
  status?: WorkloadStatus
}

/** One step of `kubectl rollout status` for a Deployment. */
export function deploymentRolloutState(d: Workload): Observation {
  const s = d.status ?? {}
  if ((d.metadata.generation ?? 0) > (s.observedGeneration ?? 0)) return {done: false, state: 'spec update not yet observed'}
  const progressing = condition(d, 'Progressing')
  if (progressing?.reason === 'ProgressDeadlineExceeded') {
    throw new IchorError(`Deployment ${d.metadata.namespace}/${d.metadata.name} exceeded its progress deadline: ${progressing.message ?? ''}`)
  }
  const want = d.spec?.replicas
  const updated = s.updatedReplicas ?? 0
  if (want !== undefined && updated < want) return {done: false, state: `${updated} of ${want} new replicas updated`}
  if ((s.replicas ?? 0) > updated) return {done: false, state: `${(s.replicas ?? 0) - updated} old replicas pending termination`}
  if ((s.availableReplicas ?? 0) < updated) return {done: false, state: `${s.availableReplicas ?? 0} of ${updated} updated replicas available`}
  return {done: true, state: 'rolled out'}
}

/** One step of `kubectl rollout status` for a DaemonSet; OnDelete sets are ready when all their pods are available. */
export function daemonSetRolloutState(ds: Workload): Observation {
  const s = ds.status ?? {}
  if ((ds.metadata.generation ?? 0) > (s.observedGeneration ?? 0)) return {done: false, state: 'spec update not yet observed'}
  const desired = s.desiredNumberScheduled ?? 0
  const rolling = (ds.spec?.updateStrategy?.type ?? 'RollingUpdate') === 'RollingUpdate'
  if (rolling && (s.updatedNumberScheduled ?? 0) < desired) {
    return {done: false, state: `${s.updatedNumberScheduled ?? 0} of ${desired} new pods updated`}
  }
  if ((s.numberAvailable ?? 0) < desired) return {done: false, state: `${s.numberAvailable ?? 0} of ${desired} pods available`}
  return {done: true, state: `rolled out (${desired} pods)`}
}

/** One step of `kubectl rollout status` for a StatefulSet; OnDelete sets are ready when all replicas are. */
export function statefulSetRolloutState(sts: Workload): Observation {
  const s = sts.status ?? {}
  if (!s.observedGeneration || (sts.metadata.generation ?? 0) > s.observedGeneration) {
    return {done: false, state: 'spec update not yet observed'}
  }
  const want = sts.spec?.replicas
  if (want !== undefined && (s.readyReplicas ?? 0) < want) return {done: false, state: `${s.readyReplicas ?? 0} of ${want} pods ready`}
  const strategy = sts.spec?.updateStrategy
  if ((strategy?.type ?? 'RollingUpdate') !== 'RollingUpdate') return {done: true, state: 'all replicas ready'}
  const partition = strategy?.rollingUpdate?.partition
  if (partition !== undefined && want !== undefined) {
    if ((s.updatedReplicas ?? 0) < want - partition) {
      return {done: false, state: `partitioned roll out: ${s.updatedReplicas ?? 0} of ${want - partition} new pods updated`}
    }
    return {done: true, state: 'partitioned roll out complete'}
  }
  if (s.updateRevision !== s.currentRevision) {
    return {done: false, state: `${s.updatedReplicas ?? 0} pods at revision ${s.updateRevision}, rolling update in progress`}
  }
  return {done: true, state: `rolled out at revision ${s.currentRevision}`}
}

function waitForWorkload(
  kube: Kube,
  kind: 'Deployment' | 'DaemonSet' | 'StatefulSet',
  namespace: string,
  name: string,
  rule: (w: Workload) => Observation,
  options: WaitOptions,
): Promise<void> {
  return waitFor(
    `${kind} ${namespace}/${name} to roll out`,
    async () => {
      const workload = await getObject<Workload>(kube, {apiVersion: 'apps/v1', kind, namespace, name})
      return workload ? rule(workload) : {done: false, state: 'not found'}
    },
    options,
  )
}

export function waitForDeploymentRollout(kube: Kube, namespace: string, name: string, options: WaitOptions = {}): Promise<void> {
  return waitForWorkload(kube, 'Deployment', namespace, name, deploymentRolloutState, options)
}

export function waitForDaemonSetReady(kube: Kube, namespace: string, name: string, options: WaitOptions = {}): Promise<void> {
  return waitForWorkload(kube, 'DaemonSet', namespace, name, daemonSetRolloutState, options)
}

export function waitForStatefulSetReady(kube: Kube, namespace: string, name: string, options: WaitOptions = {}): Promise<void> {
  return waitForWorkload(kube, 'StatefulSet', namespace, name, statefulSetRolloutState, options)
}
