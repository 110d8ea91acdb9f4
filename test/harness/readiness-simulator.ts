// Readiness simulator: the harness has no kubelets and no workload controllers, so
// nothing would ever mark a Deployment, StatefulSet or DaemonSet rolled out. This
// polls them and writes, through the status subresource, the status the real
// controllers would report once every pod is ready on `nodes` nodes. That is enough
// for kstatus (helm 4 `--wait`), helm 3's legacy waiter and `kubectl rollout status`.
// Helm 3's waiter (helm.sh/helm/v3 v3.18.6 pkg/kube/ready.go, IsReady → deploymentReady)
// also reads the Deployment's newest ReplicaSet (internal/third_party/.../deploymentutil.go
// GetNewReplicaSet: listed by the Deployment's selector, controlled by it, with a template
// equal to the Deployment's ignoring `pod-template-hash`) and wants its observedGeneration
// current and its readyReplicas at least replicas - maxUnavailable. So for every Deployment
// the simulator also creates that ReplicaSet, as the deployment controller would, and
// reports it ready. It says nothing about whether the pods would actually run.
import {AppsV1Api, BatchV1Api, KubeConfig, type V1DaemonSet, type V1Deployment, type V1Job, type V1ReplicaSet, type V1StatefulSet} from '@kubernetes/client-node'
import {createHash} from 'node:crypto'
import {isDeepStrictEqual} from 'node:util'

export interface ReadinessSimulatorOptions {
  kubeconfigPath: string
  /** Node count: each DaemonSet is reported as scheduled and ready on this many nodes. */
  nodes: number
  /** Namespaces to watch; all when absent. */
  namespaces?: string[]
  /** Poll interval (default 200 ms). */
  intervalMs?: number
}

export interface ReadinessSimulator {
  /** Stops polling and waits for an in-flight round to finish. */
  stop(): Promise<void>
  /** Runs one round now (tests use it to avoid waiting for the timer). */
  tick(): Promise<void>
  /** Objects marked ready so far, as `Kind/namespace/name@generation`. */
  readonly marked: string[]
  /**
   * Test control: objects matching `predicate` are left as they are (never marked ready),
   * as a kubelet would leave pods that crash. Returns the function that lifts the hold.
   */
  holdUnready(predicate: HoldPredicate): () => void
}

export type HoldPredicate = (kind: 'Deployment' | 'StatefulSet' | 'DaemonSet' | 'Job', obj: V1Deployment | V1StatefulSet | V1DaemonSet | V1Job) => boolean

const FIXED_TIME = new Date(0)

export function startReadinessSimulator(opts: ReadinessSimulatorOptions): ReadinessSimulator {
  const kc = new KubeConfig()
  kc.loadFromFile(opts.kubeconfigPath)
  const apps = kc.makeApiClient(AppsV1Api)
  const batch = kc.makeApiClient(BatchV1Api)
  const marked: string[] = []
  const holds = new Set<HoldPredicate>()
  let stopped = false
  let inFlight: Promise<void> = Promise.resolve()

  const round = async (): Promise<void> => {
    for (const ns of opts.namespaces ?? [undefined]) {
      const [deployments, statefulSets, daemonSets] = await Promise.all([
        ns ? apps.listNamespacedDeployment({namespace: ns}) : apps.listDeploymentForAllNamespaces(),
        ns ? apps.listNamespacedStatefulSet({namespace: ns}) : apps.listStatefulSetForAllNamespaces(),
        ns ? apps.listNamespacedDaemonSet({namespace: ns}) : apps.listDaemonSetForAllNamespaces(),
      ])
      for (const d of deployments.items) {
        if ([...holds].some((held) => held('Deployment', d))) continue
        await ensureReadyReplicaSet(d)
        await markReady('Deployment', d, deploymentStatus(d), (body) =>
          apps.replaceNamespacedDeploymentStatus({name: body.metadata!.name!, namespace: body.metadata!.namespace!, body}),
        )
      }
      for (const s of statefulSets.items) {
        await markReady('StatefulSet', s, statefulSetStatus(s), (body) =>
          apps.replaceNamespacedStatefulSetStatus({name: body.metadata!.name!, namespace: body.metadata!.namespace!, body}),
        )
      }
      // Jobs (e.g. Cilium's hubble-generate-certs) run to completion, as the job controller would report.
      const jobs = ns ? await batch.listNamespacedJob({namespace: ns}) : await batch.listJobForAllNamespaces()
      for (const j of jobs.items) {
        if (j.status?.conditions?.some((c) => c.type === 'Complete' && c.status === 'True')) continue
        await markReady('Job', j, jobStatus(j), (body) => batch.replaceNamespacedJobStatus({name: body.metadata!.name!, namespace: body.metadata!.namespace!, body}))
      }
      for (const d of daemonSets.items) {
        await markReady('DaemonSet', d, daemonSetStatus(d, opts.nodes), (body) =>
          apps.replaceNamespacedDaemonSetStatus({name: body.metadata!.name!, namespace: body.metadata!.namespace!, body}),
        )
      }
    }
  }

  async function markReady<T extends V1Deployment | V1StatefulSet | V1DaemonSet | V1Job>(
    kind: string,
    obj: T,
    status: NonNullable<T['status']>,
    replace: (body: T) => Promise<unknown>,
  ): Promise<void> {
    if (isDeepStrictEqual(normalize(obj.status), normalize(status))) return
    if ([...holds].some((held) => held(kind as Parameters<HoldPredicate>[0], obj))) return
    try {
      await replace({...obj, status})
      const m = obj.metadata!
      marked.push(`${kind}/${m.namespace}/${m.name}@${m.generation}`)
    } catch (err) {
      // A conflict (the object changed meanwhile) or a deletion: the next round sees the new state.
      if (!isTransient(err)) throw err
    }
  }

  // The ReplicaSet the deployment controller would make for the Deployment's current
  // template (named and labelled by a hash of it), created once and reported ready.
  async function ensureReadyReplicaSet(d: V1Deployment): Promise<void> {
    const m = d.metadata!
    const template = d.spec!.template
    const hash = createHash('sha256').update(JSON.stringify(template)).digest('hex').slice(0, 10)
    const name = `${m.name}-${hash}`.slice(0, 253)
    const replicas = d.spec?.replicas ?? 1
    try {
      let rs: V1ReplicaSet
      try {
        rs = await apps.readNamespacedReplicaSet({name, namespace: m.namespace!})
      } catch (err) {
        if (statusCode(err) !== 404) throw err
        const labels = {...template.metadata?.labels, 'pod-template-hash': hash}
        rs = await apps.createNamespacedReplicaSet({
          namespace: m.namespace!,
          body: {
            metadata: {name, namespace: m.namespace, labels, ownerReferences: [{apiVersion: 'apps/v1', kind: 'Deployment', name: m.name!, uid: m.uid!, controller: true, blockOwnerDeletion: true}]},
            spec: {
              replicas,
              selector: {...d.spec!.selector, matchLabels: {...d.spec!.selector.matchLabels, 'pod-template-hash': hash}},
              template: {...template, metadata: {...template.metadata, labels}},
            },
          },
        })
      }
      const status = {replicas, readyReplicas: replicas, availableReplicas: replicas, fullyLabeledReplicas: replicas, observedGeneration: rs.metadata?.generation}
      if (isDeepStrictEqual(normalize(rs.status), normalize(status))) return
      await apps.replaceNamespacedReplicaSetStatus({name, namespace: m.namespace!, body: {...rs, status}})
    } catch (err) {
      if (!isTransient(err)) throw err
    }
  }

  const tick = (): Promise<void> => {
    inFlight = inFlight.then(round, round)
    return inFlight
  }

  const loop = async (): Promise<void> => {
    while (!stopped) {
      try {
        await tick()
      } catch (err) {
        // The apiserver may be stopping under us at the end of a test; keep quiet then.
        if (!stopped) console.error(`readiness simulator: ${(err as Error).message}`)
      }
      await new Promise((r) => setTimeout(r, opts.intervalMs ?? 200))
    }
  }
  const looping = loop()

  return {
    marked,
    tick,
    holdUnready(predicate) {
      holds.add(predicate)
      return () => holds.delete(predicate)
    },
    async stop() {
      stopped = true
      await looping
    },
  }
}

function deploymentStatus(d: V1Deployment): NonNullable<V1Deployment['status']> {
  const replicas = d.spec?.replicas ?? 1
  return {
    observedGeneration: d.metadata?.generation,
    replicas,
    updatedReplicas: replicas,
    readyReplicas: replicas,
    availableReplicas: replicas,
    // kstatus requires Progressing=True/NewReplicaSetAvailable as well as Available=True.
    conditions: [
      condition('Available', 'MinimumReplicasAvailable', 'Deployment has minimum availability.'),
      condition('Progressing', 'NewReplicaSetAvailable', 'ReplicaSet has successfully progressed.'),
    ],
  }
}

function statefulSetStatus(s: V1StatefulSet): NonNullable<V1StatefulSet['status']> {
  const replicas = s.spec?.replicas ?? 1
  // Rollout waits compare the two revisions; equal means the update finished.
  const revision = `${s.metadata?.name}-simulated-${s.metadata?.generation}`
  return {
    observedGeneration: s.metadata?.generation,
    replicas,
    readyReplicas: replicas,
    currentReplicas: replicas,
    updatedReplicas: replicas,
    availableReplicas: replicas,
    currentRevision: revision,
    updateRevision: revision,
  }
}

function jobStatus(j: V1Job): NonNullable<V1Job['status']> {
  const completions = j.spec?.completions ?? 1
  const time = j.metadata?.creationTimestamp ?? FIXED_TIME
  // The apiserver requires SuccessCriteriaMet before Complete, and both times set.
  return {
    startTime: time,
    completionTime: time,
    succeeded: completions,
    active: 0,
    ready: 0,
    terminating: 0,
    uncountedTerminatedPods: {},
    conditions: [
      {type: 'SuccessCriteriaMet', status: 'True', reason: 'CompletionsReached', message: 'Reached expected number of succeeded pods', lastTransitionTime: time, lastProbeTime: time},
      {type: 'Complete', status: 'True', reason: 'CompletionsReached', message: 'Reached expected number of succeeded pods', lastTransitionTime: time, lastProbeTime: time},
    ],
  }
}

function daemonSetStatus(d: V1DaemonSet, nodes: number): NonNullable<V1DaemonSet['status']> {
  return {
    observedGeneration: d.metadata?.generation,
    desiredNumberScheduled: nodes,
    currentNumberScheduled: nodes,
    updatedNumberScheduled: nodes,
    numberReady: nodes,
    numberAvailable: nodes,
    numberMisscheduled: 0,
  }
}

function condition(type: string, reason: string, message: string) {
  return {type, status: 'True', reason, message, lastTransitionTime: FIXED_TIME, lastUpdateTime: FIXED_TIME}
}

// Compares what matters, ignoring how the client deserialized dates and absent zeros.
function normalize(status: unknown): unknown {
  return JSON.parse(JSON.stringify(status ?? {}), (_k, v: unknown) => (v === 0 || v === null ? undefined : v))
}

function isTransient(err: unknown): boolean {
  const code = (err as {code?: number}).code
  return code === 409 || code === 404
}

function statusCode(err: unknown): number | undefined {
  return (err as {code?: number}).code
}
