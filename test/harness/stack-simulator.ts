// Kokumi/Argo CD status simulator. Neither Kokumi's controller nor Argo CD can run on the
// harness (no kubelet, no pods), so this small loop plays both, from the outside:
//
// - Kokumi: for every Order it resolves `spec.source.oci` + `spec.source.version` in the
//   harness registry (the in-cluster registry host is mapped to `registryEndpoint`) and
//   writes the Order status Kokumi's OrderUpdater writes (Ready condition, latest digest and
//   Preparation name). With a resolvable source and promotion `Automatic` it creates or
//   updates the Argo CD Application Kokumi's ArgoCD deployer creates (ADR-0099 "The
//   Application Kokumi creates"; kokumi-dev/kokumi internal/deployer/argocd.go). `Manual`
//   (Kokumi's default when unset) waits for `promote()`, the person in Kokumi's UI.
// - Argo CD: an Application whose revision changed first reads OutOfSync/Progressing, then
//   Synced/Healthy at that digest once the digest can be pulled from the registry; if it
//   cannot, OutOfSync/Missing.
//
// Simplifications, on purpose: the Application's targetRevision is the digest of the bundle
// ichor pushed (real Kokumi re-pushes a rendered Preparation under `preparation/<name>` and
// serves that digest); no Preparation or Serving objects, no finalizer on the Order; the
// manifests in the bundle are never applied to the cluster.
import {ApiextensionsV1Api, CustomObjectsApi, KubeConfig} from '@kubernetes/client-node'
import {createHash} from 'node:crypto'
import {isDeepStrictEqual} from 'node:util'

/** Kokumi's in-cluster registry (kokumi-dev/kokumi internal/service/defaults.go DefaultRegistryHost). */
export const KOKUMI_REGISTRY_HOST = 'kokumi-registry.kokumi.svc.cluster.local:5000'
export const ALLOWED_ORDER_ANNOTATION = 'delivery.kokumi.dev/allowed-order'
export const ORDER_LABEL = 'delivery.kokumi.dev/order'
export const SERVING_LABEL = 'delivery.kokumi.dev/serving'
export const SERVING_NAMESPACE_LABEL = 'delivery.kokumi.dev/serving-namespace'

const ORDERS = {group: 'delivery.kokumi.dev', version: 'v1alpha1', plural: 'orders'}
const APPLICATIONS = {group: 'argoproj.io', version: 'v1alpha1', plural: 'applications'}
const ARGOCD_NAMESPACE = 'argocd'
const FIXED_TIME = new Date(0).toISOString().replace('.000Z', 'Z')
const MANIFEST_ACCEPT = [
  'application/vnd.oci.image.manifest.v1+json',
  'application/vnd.oci.image.index.v1+json',
  'application/vnd.docker.distribution.manifest.v2+json',
].join(', ')

export interface StackSimulatorOptions {
  kubeconfigPath: string
  /** The harness registry, `http://127.0.0.1:<port>`; stands in for Kokumi's in-cluster registry. */
  registryEndpoint: string
  /** Poll interval (default 300 ms). */
  intervalMs?: number
}

export interface StackSimulator {
  /** Stops polling and waits for an in-flight round to finish. */
  stop(): Promise<void>
  /** Runs one round now (tests use it instead of waiting for the timer). */
  tick(): Promise<void>
  /**
   * What a person does in Kokumi's UI for a `Manual` Order: serve its newest Ready
   * Preparation (here: the digest in the Order's status). Takes effect on the next round.
   */
  promote(namespace: string, name: string): Promise<void>
  /** What the simulator did, in order: `Application argocd/x created at sha256:...`, ... */
  readonly events: string[]
}

export type Obj = {
  apiVersion?: string
  kind?: string
  metadata: {name: string; namespace?: string; generation?: number; resourceVersion?: string; annotations?: Record<string, string>; labels?: Record<string, string>}
  spec?: Record<string, any>
  status?: Record<string, any>
}

export function startStackSimulator(opts: StackSimulatorOptions): StackSimulator {
  const kc = new KubeConfig()
  kc.loadFromFile(opts.kubeconfigPath)
  const custom = kc.makeApiClient(CustomObjectsApi)
  const ext = kc.makeApiClient(ApiextensionsV1Api)
  const registry = opts.registryEndpoint.replace(/\/+$/, '')
  const events: string[] = []
  // Order `ns/name` -> digest a person promoted (Manual mode).
  const promoted = new Map<string, string>()
  let applicationStatusSubresource: boolean | undefined
  let stopped = false
  let inFlight: Promise<void> = Promise.resolve()

  const round = async (): Promise<void> => {
    let orders: Obj[]
    try {
      orders = ((await custom.listClusterCustomObject(ORDERS)) as {items: Obj[]}).items
    } catch (err) {
      if (isCode(err, 404)) return // The Order CRD is not there yet.
      throw err
    }
    for (const order of orders) await reconcileOrder(order)
  }

  async function reconcileOrder(order: Obj): Promise<void> {
    const ns = order.metadata.namespace!
    const name = order.metadata.name
    const source = order.spec?.source as {oci?: string; version?: string} | undefined
    const resolved = source?.oci && source.version ? await resolveSource(source.oci, source.version) : {error: 'the simulator handles only spec.source.oci'}

    if ('error' in resolved) {
      await writeOrderStatus(order, {ready: 'False', reason: 'ProcessingFailed', message: resolved.error})
    } else {
      await writeOrderStatus(order, {
        ready: 'True',
        reason: 'Ready',
        message: `Successfully pushed to ${KOKUMI_REGISTRY_HOST}/preparation/${name}`,
        digest: resolved.digest,
        configHash: sha256(`${source!.oci}\n${source!.version}`),
      })
    }

    const mode = (order.spec?.promotion as {mode?: string} | undefined)?.mode ?? 'Manual'
    const served = mode === 'Automatic' ? ('digest' in resolved ? resolved.digest : undefined) : promoted.get(`${ns}/${name}`)
    const repository = 'repository' in resolved ? resolved.repository : undefined
    await reconcileApplication(order, served, repository)
  }

  /** Tag -> manifest digest in the harness registry, or why it cannot be resolved. */
  async function resolveSource(oci: string, version: string): Promise<{digest: string; repository: string} | {error: string; repository?: string}> {
    const ref = parseOci(oci)
    if (!ref) return {error: `${oci} is not oci://host/repository`}
    if (ref.host !== KOKUMI_REGISTRY_HOST && `http://${ref.host}` !== registry) {
      return {error: `the simulator only knows the registry ${KOKUMI_REGISTRY_HOST}, not ${ref.host}`}
    }
    const digest = await headManifest(ref.repository, version)
    if (!digest) return {error: `failed to resolve ${oci}:${version}: not found`, repository: ref.repository}
    return {digest, repository: ref.repository}
  }

  async function headManifest(repository: string, reference: string): Promise<string | undefined> {
    const res = await fetch(`${registry}/v2/${repository}/manifests/${reference}`, {
      method: 'HEAD',
      headers: {Accept: MANIFEST_ACCEPT},
      signal: AbortSignal.timeout(5000),
    })
    if (res.status === 404) return undefined
    if (res.status !== 200) throw new Error(`registry answered ${res.status} for HEAD ${repository}:${reference}`)
    return res.headers.get('docker-content-digest') ?? undefined
  }

  async function writeOrderStatus(
    order: Obj,
    want: {ready: 'True' | 'False'; reason: string; message: string; digest?: string; configHash?: string},
  ): Promise<void> {
    const generation = order.metadata.generation
    const current = (order.status ?? {}) as Record<string, any>
    const previous = (current.conditions as any[] | undefined)?.find((c) => c.type === 'Ready')
    const condition = {
      type: 'Ready',
      status: want.ready,
      reason: want.reason,
      message: want.message,
      observedGeneration: generation,
      // A fixed time (as the readiness simulator's) keeps end-state dumps of two runs comparable.
      lastTransitionTime: previous?.status === want.ready ? previous.lastTransitionTime : FIXED_TIME,
    }
    const status: Record<string, any> = {...current, observedGeneration: generation, conditions: [condition]}
    if (want.digest) {
      status.latestArtifactDigest = want.digest
      status.latestPreparationName = `${order.metadata.name}-${want.digest.slice('sha256:'.length, 'sha256:'.length + 12)}`
      status.latestConfigHash = want.configHash
    } else {
      // As Kokumi's OrderUpdater.Failed: the config hash is cleared, the last good digest kept.
      delete status.latestConfigHash
    }
    if (isDeepStrictEqual(status, current)) return
    try {
      await custom.replaceNamespacedCustomObjectStatus({
        ...ORDERS,
        namespace: order.metadata.namespace!,
        name: order.metadata.name,
        body: {...order, status},
      })
      events.push(`Order ${order.metadata.namespace}/${order.metadata.name} Ready=${want.ready} ${want.reason}`)
    } catch (err) {
      if (!isCode(err, 409) && !isCode(err, 404)) throw err // Changed or deleted meanwhile: next round.
    }
  }

  async function reconcileApplication(order: Obj, served: string | undefined, repository: string | undefined): Promise<void> {
    const ns = order.metadata.namespace!
    const name = order.metadata.name
    let existing: Obj | undefined
    try {
      existing = (await custom.getNamespacedCustomObject({...APPLICATIONS, namespace: ARGOCD_NAMESPACE, name})) as Obj
    } catch (err) {
      if (!isCode(err, 404)) throw err
    }

    if (served) {
      const desired = desiredApplication(order, served)
      if (!existing) {
        try {
          existing = (await custom.createNamespacedCustomObject({...APPLICATIONS, namespace: ARGOCD_NAMESPACE, body: desired})) as Obj
          events.push(`Application ${ARGOCD_NAMESPACE}/${name} created at ${served}`)
        } catch (err) {
          // No Application CRD or no argocd namespace yet (404), or a race (409): next round.
          if (isCode(err, 404) || isCode(err, 409)) return
          throw err
        }
      } else if (existing.metadata.annotations?.[ALLOWED_ORDER_ANNOTATION] !== name) {
        // Kokumi refuses to take over an Application it did not create (opt-in annotation).
        const note = `Application ${ARGOCD_NAMESPACE}/${name} not updated: it lacks ${ALLOWED_ORDER_ANNOTATION}=${name}`
        if (events[events.length - 1] !== note) events.push(note)
        return
      } else if (!applicationMatches(existing, desired)) {
        try {
          existing = (await custom.replaceNamespacedCustomObject({
            ...APPLICATIONS,
            namespace: ARGOCD_NAMESPACE,
            name,
            body: {...desired, metadata: {...desired.metadata, resourceVersion: existing.metadata.resourceVersion}, status: existing.status},
          })) as Obj
          events.push(`Application ${ARGOCD_NAMESPACE}/${name} updated to ${served}`)
        } catch (err) {
          if (isCode(err, 409) || isCode(err, 404)) return
          throw err
        }
      }
    }
    if (!existing || existing.metadata.annotations?.[ALLOWED_ORDER_ANNOTATION] !== name) return
    await reportSync(existing, ns, repository)
  }

  /** Argo CD's side: OutOfSync/Progressing on a new revision, then Synced/Healthy if it can be pulled. */
  async function reportSync(app: Obj, orderNamespace: string, repository: string | undefined): Promise<void> {
    const target = app.spec?.source?.targetRevision as string
    const current = (app.status ?? {}) as Record<string, any>
    let sync: string
    let health: string
    let revision: string | undefined = current.sync?.revision
    if (current.sync?.revision !== target && !['Progressing', 'Missing'].includes(current.health?.status)) {
      // First sight of this revision: Argo CD compares before it syncs.
      sync = 'OutOfSync'
      health = 'Progressing'
    } else if (repository && (await headManifest(repository, target))) {
      sync = 'Synced'
      health = 'Healthy'
      revision = target
    } else {
      sync = 'OutOfSync'
      health = 'Missing'
    }
    const status = {
      ...current,
      sync: {status: sync, ...(revision ? {revision} : {}), comparedTo: {source: app.spec?.source, destination: app.spec?.destination}},
      health: {status: health},
      sourceType: 'Directory',
    }
    if (isDeepStrictEqual(JSON.parse(JSON.stringify(status)), current)) return
    const body = {...app, status}
    try {
      if (await hasApplicationStatusSubresource()) {
        await custom.replaceNamespacedCustomObjectStatus({...APPLICATIONS, namespace: ARGOCD_NAMESPACE, name: app.metadata.name, body})
      } else {
        // Argo CD's Application CRD has no status subresource: status is written with the object.
        await custom.replaceNamespacedCustomObject({...APPLICATIONS, namespace: ARGOCD_NAMESPACE, name: app.metadata.name, body})
      }
      events.push(`Application ${ARGOCD_NAMESPACE}/${app.metadata.name} (Order ${orderNamespace}/${app.metadata.name}) ${sync}/${health}${revision ? ` at ${revision}` : ''}`)
    } catch (err) {
      if (!isCode(err, 409) && !isCode(err, 404)) throw err
    }
  }

  async function hasApplicationStatusSubresource(): Promise<boolean> {
    if (applicationStatusSubresource === undefined) {
      const crd = await ext.readCustomResourceDefinition({name: 'applications.argoproj.io'})
      const version = crd.spec.versions.find((v) => v.name === APPLICATIONS.version)
      applicationStatusSubresource = Boolean(version?.subresources?.status)
    }
    return applicationStatusSubresource
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
        // The apiserver or registry may be stopping under us at the end of a test, and a
        // fresh CRD answers 429 while its storage initializes: both pass by the next round.
        if (!stopped && !isCode(err, 429)) console.error(`stack simulator: ${(err as Error).message}`)
      }
      await new Promise((r) => setTimeout(r, opts.intervalMs ?? 300))
    }
  }
  const looping = loop()

  return {
    events,
    tick,
    async promote(namespace, name) {
      const order = (await custom.getNamespacedCustomObject({...ORDERS, namespace, name})) as Obj
      const digest = order.status?.latestArtifactDigest as string | undefined
      if (!digest) throw new Error(`stack simulator: Order ${namespace}/${name} has no Ready Preparation to promote`)
      promoted.set(`${namespace}/${name}`, digest)
    },
    async stop() {
      stopped = true
      await looping
    },
  }
}

/** The Application as Kokumi's ArgoCD deployer builds it for the Serving of `order`. */
export function desiredApplication(order: Obj, digest: string): Obj & {apiVersion: string; kind: string} {
  const name = order.metadata.name
  const ns = order.metadata.namespace!
  return {
    apiVersion: 'argoproj.io/v1alpha1',
    kind: 'Application',
    metadata: {
      name,
      namespace: ARGOCD_NAMESPACE,
      // Kokumi names the Serving after the Order, in the Order's namespace.
      labels: {[ORDER_LABEL]: name, [SERVING_LABEL]: name, [SERVING_NAMESPACE_LABEL]: ns},
      // The value is the Order's name (kokumi-dev/kokumi api/v1alpha1: "the name of the Order").
      annotations: {[ALLOWED_ORDER_ANNOTATION]: name},
    },
    spec: {
      project: 'default',
      source: {repoURL: `oci://${KOKUMI_REGISTRY_HOST}/preparation/${name}`, targetRevision: digest, path: '.'},
      destination: {server: 'https://kubernetes.default.svc', namespace: ns},
      syncPolicy: {automated: {prune: true, selfHeal: true}, syncOptions: ['ServerSideApply=true']},
    },
  }
}

// As Kokumi's applicationMatches: spec, annotations and labels equal means no update.
function applicationMatches(existing: Obj, desired: Obj): boolean {
  return (
    isDeepStrictEqual(existing.spec, desired.spec) &&
    isDeepStrictEqual(existing.metadata.annotations ?? {}, desired.metadata.annotations ?? {}) &&
    isDeepStrictEqual(existing.metadata.labels ?? {}, desired.metadata.labels ?? {})
  )
}

/** `oci://host[:port]/repo/path` -> host and repository. */
export function parseOci(url: string): {host: string; repository: string} | undefined {
  const m = /^oci:\/\/([^/]+)\/(.+?)\/*$/.exec(url)
  return m?.[1] && m[2] ? {host: m[1], repository: m[2]} : undefined
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex')
}

function isCode(err: unknown, code: number): boolean {
  return (err as {code?: number}).code === code
}
