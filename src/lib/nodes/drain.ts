// Cordon and drain a Node as `kubectl drain --ignore-daemonsets --delete-emptydir-data` does:
// every pod but a DaemonSet's and a mirror pod is evicted through the Eviction API, so
// PodDisruptionBudgets hold (a refused eviction, 429, is asked again until the deadline), then
// the evicted pods are waited for until they are gone.
import {IchorError} from '../errors/errors.js'
import {KubeApiError, type Kube} from '../kube/client.js'
import {formatDuration, waitFor} from '../kube/wait.js'
import {podsOnNode, type PodObject} from './kube-nodes.js'

type DrainPod = PodObject & {
  metadata: {ownerReferences?: {kind: string; controller?: boolean}[]}
  spec?: {volumes?: {name: string; emptyDir?: unknown}[]}
}

const RETRY_MS = 5_000

/** The pods a drain evicts: not a DaemonSet's, not a mirror pod, not already going. */
export async function podsToEvict(kube: Kube, nodeName: string): Promise<DrainPod[]> {
  return (await podsOnNode<DrainPod>(kube, nodeName)).filter(
    (p) =>
      !p.metadata.deletionTimestamp &&
      !p.metadata.annotations?.['kubernetes.io/config.mirror'] &&
      !(p.metadata.ownerReferences ?? []).some((o) => o.controller && o.kind === 'DaemonSet'),
  )
}

/** Pods whose emptyDir data the drain throws away (kubectl asks for --delete-emptydir-data). */
export function withEmptyDir(pods: DrainPod[]): string[] {
  return pods.filter((p) => p.spec?.volumes?.some((v) => v.emptyDir !== undefined)).map((p) => `${p.metadata.namespace}/${p.metadata.name}`)
}

export async function cordon(kube: Kube, nodeName: string): Promise<void> {
  await kube.request('PATCH', `/api/v1/nodes/${nodeName}`, {body: {spec: {unschedulable: true}}, contentType: 'application/merge-patch+json'})
}

/** Cordons the Node, evicts its pods (PodDisruptionBudgets honoured) and waits until they are gone, all within timeoutMs. */
export async function drainNode(kube: Kube, nodeName: string, o: {timeoutMs: number; onProgress?: (s: string) => void}): Promise<void> {
  const deadline = Date.now() + o.timeoutMs
  await cordon(kube, nodeName)
  o.onProgress?.(`${nodeName} cordoned`)
  let pending = await podsToEvict(kube, nodeName)
  const evicted = new Set<string>()
  for (;;) {
    const refused: string[] = []
    for (const pod of pending) {
      const {name, namespace} = pod.metadata
      try {
        await kube.request('POST', `/api/v1/namespaces/${namespace}/pods/${name}/eviction`, {
          body: {apiVersion: 'policy/v1', kind: 'Eviction', metadata: {name, namespace}},
        })
        evicted.add(pod.metadata.uid!)
        o.onProgress?.(`evicted ${namespace}/${name}`)
      } catch (error) {
        if (error instanceof KubeApiError && error.code === 404) continue
        if (!(error instanceof KubeApiError && error.code === 429)) throw error
        const why = error.status.details?.causes?.map((c) => c.message).find(Boolean) ?? error.status.message ?? 'refused'
        refused.push(`${namespace}/${name} (${why})`)
      }
    }
    if (refused.length === 0) break
    if (Date.now() + RETRY_MS > deadline)
      throw new IchorError(
        `the drain of ${nodeName} did not finish within ${formatDuration(o.timeoutMs)}: ${refused.length} pod(s) cannot be evicted: ${refused.join('; ')}`,
        {
          hint: 'make room for them (more replicas elsewhere, or a PodDisruptionBudget that allows it), or give the drain longer with --timeout, then rerun',
        },
      )
    o.onProgress?.(`waiting to evict ${refused.join('; ')}`)
    await new Promise((r) => setTimeout(r, RETRY_MS))
    pending = (await podsToEvict(kube, nodeName)).filter((p) => !evicted.has(p.metadata.uid!))
  }
  await waitFor(
    `the pods evicted from ${nodeName} to be gone`,
    async () => {
      const left = (await podsOnNode(kube, nodeName)).filter((p) => evicted.has(p.metadata.uid!))
      return {done: left.length === 0, state: `${left.length} still terminating`}
    },
    {timeoutMs: Math.max(1_000, deadline - Date.now()), intervalMs: 500, onProgress: o.onProgress},
  )
}
