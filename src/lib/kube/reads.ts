// Generic read-only reads shared by probes and status commands: a workload's rollout, the API
// groups served, a ConfigMap key. Nothing here writes; each read is one GET.
import type {Kube} from './client.js'
import {getObject, type KubeObject} from './objects.js'
import {daemonSetRolloutState, deploymentRolloutState} from './wait.js'

export interface WorkloadRollout {
  desired: number
  ready: number
  /** `kubectl rollout status` would say it is rolled out at its current generation. */
  rolledOut: boolean
  /** What the rollout rule saw, in words. */
  state: string
}

/** A Deployment's or DaemonSet's rollout, read once; undefined when it does not exist. */
export async function readWorkloadRollout(kube: Kube, kind: 'Deployment' | 'DaemonSet', namespace: string, name: string): Promise<WorkloadRollout | undefined> {
  type W = Parameters<typeof deploymentRolloutState>[0] & {
    spec?: {replicas?: number}
    status?: {replicas?: number; readyReplicas?: number; numberReady?: number; desiredNumberScheduled?: number}
  }
  const w = await getObject<W>(kube, {apiVersion: 'apps/v1', kind, name, namespace})
  if (!w) return undefined
  let observation
  try {
    observation = kind === 'Deployment' ? deploymentRolloutState(w) : daemonSetRolloutState(w)
  } catch (error) {
    observation = {done: false, state: error instanceof Error ? error.message : String(error)}
  }
  const desired = kind === 'Deployment' ? (w.spec?.replicas ?? 1) : (w.status?.desiredNumberScheduled ?? 0)
  const ready = kind === 'Deployment' ? (w.status?.readyReplicas ?? 0) : (w.status?.numberReady ?? 0)
  return {desired, ready, rolledOut: observation.done && desired > 0, state: observation.state}
}

/** The API groups the server serves (one discovery GET), e.g. gateway.networking.k8s.io. */
export async function readServedApiGroups(kube: Kube): Promise<Set<string>> {
  const list = await kube.request<{groups?: {name: string}[]}>('GET', '/apis')
  return new Set((list.groups ?? []).map((g) => g.name))
}

/** One key of a ConfigMap; undefined when the ConfigMap or the key is absent. */
export async function readConfigMapKey(kube: Kube, namespace: string, name: string, key: string): Promise<string | undefined> {
  const cm = await getObject<KubeObject & {data?: Record<string, string>}>(kube, {apiVersion: 'v1', kind: 'ConfigMap', name, namespace})
  return cm?.data?.[key]
}
