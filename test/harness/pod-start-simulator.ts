// Pod-start SIMULATOR: the part of a kubelet that kwok does not play. When the real scheduler has
// bound a pod to a node, a kubelet reads what the pod mounts and starts its containers; a Cilium
// agent or operator therefore runs with the `cilium-config` it read at that moment, and keeps
// running with it until its pod is replaced (the agent reads /tmp/cilium/config-map once at start:
// cilium/cilium daemon/cmd/daemon_main.go initConfig → option.Config.Populate from the mounted
// ConfigMap directory, v1.18). So this watches pods and, for each new one:
// - stamps the hash of the `cilium-config` it mounts, as it is now (CILIUM_CONFIG_ANNOTATION), so
//   a test can ask what every running agent runs;
// - labels it with the fault a test asked for (`hold()`), which kwok's fault Stages turn into an
//   unready, crash-looping or image-pull-failing pod (./kwok.ts);
// - marks it admitted, after which kwok starts it.
// Pods that already ran are never re-stamped: a kubelet does not restart a container because a
// ConfigMap changed.
import {CoreV1Api, PatchStrategy, Watch, setHeaderOptions, type KubeConfig, type V1ConfigMap, type V1Pod} from '@kubernetes/client-node'
import {createHash} from 'node:crypto'
import {ADMITTED_ANNOTATION, FAULT_LABEL, type PodFault} from './kwok.js'

export const CILIUM_CONFIG_ANNOTATION = 'harness.ichor.test/cilium-config'

export type FaultPredicate = (pod: V1Pod) => boolean

export interface PodStartSimulator {
  /**
   * Pods created from now on that match `predicate` start with `fault` (default `unready`): the
   * pods of a rollout that crashes. Returns the function that lifts it: held pods then start
   * normally, as after a fixed image.
   */
  hold(predicate: FaultPredicate, fault?: PodFault): () => Promise<void>
  /** Every pod admitted so far, as `namespace/name` with its controller, e.g. `DaemonSet/cilium`. */
  readonly admitted: {pod: string; owner?: string}[]
  /** The hash of kube-system/cilium-config's data as it is now (what a new agent would read). */
  ciliumConfigHash(): Promise<string | undefined>
  stop(): Promise<void>
}

/** The owner kind and name of a pod (a DaemonSet's pods, a Deployment's ReplicaSet's pods). */
export function ownedBy(pod: V1Pod, kind: string, name: string | RegExp): boolean {
  return (pod.metadata?.ownerReferences ?? []).some((o) => o.kind === kind && (typeof name === 'string' ? o.name === name : name.test(o.name)))
}

export function hashConfigData(cm: V1ConfigMap | undefined): string | undefined {
  if (!cm) return undefined
  const data = Object.fromEntries(Object.entries(cm.data ?? {}).sort(([a], [b]) => a.localeCompare(b)))
  return createHash('sha256').update(JSON.stringify(data)).digest('hex').slice(0, 16)
}

function mountsConfigMap(pod: V1Pod, name: string): boolean {
  const spec = pod.spec
  if (!spec) return false
  if ((spec.volumes ?? []).some((v) => v.configMap?.name === name || v.projected?.sources?.some((s) => s.configMap?.name === name))) return true
  return [...(spec.containers ?? []), ...(spec.initContainers ?? [])].some(
    (c) => (c.env ?? []).some((e) => e.valueFrom?.configMapKeyRef?.name === name) || (c.envFrom ?? []).some((e) => e.configMapRef?.name === name),
  )
}

export function startPodStartSimulator(kc: KubeConfig): PodStartSimulator {
  const core = kc.makeApiClient(CoreV1Api)
  const holds = new Map<FaultPredicate, PodFault>()
  // The pods each hold labelled (a predicate may change its mind later: lifting goes by what it held).
  const held = new Map<FaultPredicate, Set<string>>()
  const seen = new Set<string>()
  const admitted: {pod: string; owner?: string}[] = []
  let stopped = false
  let abort: (() => void) | undefined
  let queue: Promise<void> = Promise.resolve()

  const readCiliumConfig = async (): Promise<V1ConfigMap | undefined> => {
    try {
      return await core.readNamespacedConfigMap({namespace: 'kube-system', name: 'cilium-config'})
    } catch (err) {
      if ((err as {code?: number}).code === 404) return undefined
      throw err
    }
  }

  const admit = async (pod: V1Pod): Promise<void> => {
    const m = pod.metadata!
    if (m.annotations?.[ADMITTED_ANNOTATION] || m.deletionTimestamp) return
    const annotations: Record<string, string> = {[ADMITTED_ANNOTATION]: 'true'}
    if (m.namespace === 'kube-system' && mountsConfigMap(pod, 'cilium-config')) {
      annotations[CILIUM_CONFIG_ANNOTATION] = hashConfigData(await readCiliumConfig()) ?? 'absent'
    }
    const hold = [...holds].find(([predicate]) => predicate(pod))
    const fault = hold?.[1]
    if (hold) held.get(hold[0])?.add(`${m.namespace}/${m.name}`)
    const patch = {metadata: {annotations, ...(fault ? {labels: {[FAULT_LABEL]: fault}} : {})}}
    try {
      await core.patchNamespacedPod({name: m.name!, namespace: m.namespace!, body: patch}, mergePatch)
      const owner = m.ownerReferences?.find((o) => o.controller)
      admitted.push({pod: `${m.namespace}/${m.name}`, owner: owner && `${owner.kind}/${owner.name}`})
    } catch (err) {
      const code = (err as {code?: number}).code
      if (code !== 404 && code !== 409) throw err
    }
  }

  const onEvent = (type: string, pod: V1Pod): void => {
    const uid = pod.metadata?.uid
    if (type === 'DELETED' || !uid) {
      if (uid) seen.delete(uid)
      return
    }
    if (seen.has(uid) || pod.metadata?.annotations?.[ADMITTED_ANNOTATION]) return
    seen.add(uid)
    queue = queue
      .then(() => admit(pod))
      .catch((err: unknown) => {
        seen.delete(uid)
        if (!stopped) console.error(`pod-start simulator: ${(err as Error).message}`)
      })
  }

  // A watch that resumes where it stopped (a dropped watch must not leave a pod unadmitted).
  const watchPods = async (): Promise<void> => {
    while (!stopped) {
      try {
        const list = await core.listPodForAllNamespaces()
        for (const pod of list.items) onEvent('ADDED', pod)
        await new Promise<void>((resolve) => {
          void new Watch(kc)
            .watch(
              '/api/v1/pods',
              {resourceVersion: list.metadata?.resourceVersion, allowWatchBookmarks: true},
              (type, pod: V1Pod) => onEvent(type, pod),
              () => resolve(),
            )
            .then((req) => (abort = () => req.abort()))
            .catch(() => resolve())
        })
      } catch {
        // The API server restarting or stopping: list and watch again shortly (or end, when stopped).
        if (!stopped) await new Promise((r) => setTimeout(r, 200))
      }
    }
  }
  const watching = watchPods()

  return {
    admitted,
    hold(predicate, fault = 'unready') {
      holds.set(predicate, fault)
      held.set(predicate, new Set())
      return async () => {
        holds.delete(predicate)
        const mine = held.get(predicate) ?? new Set()
        held.delete(predicate)
        // Held pods start now: the fault label goes, and kwok's ready Stage takes them.
        const pods = await core.listPodForAllNamespaces({labelSelector: FAULT_LABEL})
        for (const pod of pods.items) {
          if (
            !mine.has(`${pod.metadata!.namespace}/${pod.metadata!.name}`) ||
            [...held.values()].some((other) => other.has(`${pod.metadata!.namespace}/${pod.metadata!.name}`))
          )
            continue
          try {
            await core.patchNamespacedPod(
              {name: pod.metadata!.name!, namespace: pod.metadata!.namespace!, body: {metadata: {labels: {[FAULT_LABEL]: null}}}},
              mergePatch,
            )
          } catch (err) {
            if ((err as {code?: number}).code !== 404) throw err
          }
        }
      }
    },
    async ciliumConfigHash() {
      return hashConfigData(await readCiliumConfig())
    },
    async stop() {
      stopped = true
      abort?.()
      await watching
      await queue
    },
  }
}

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch)
