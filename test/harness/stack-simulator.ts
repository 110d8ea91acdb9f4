// Kokumi/Argo CD status simulator. Neither Kokumi's controller nor Argo CD can run on the
// harness (no kubelet, no pods), so this small loop plays both, from the outside, following
// kokumi-dev/kokumi at the version the installed manifest names (the image tag of the
// Deployment kokumi/kokumi-controller-manager):
//
// - Kokumi's Order controller (internal/controller/order_controller.go, 0.14.0 and main): an
//   Order renders only when the hash of its render inputs (renderer/hash.go
//   CalculateSpecHash: source oci + version, menuRef, render, patches, edits; not autoDeploy,
//   not annotations) differs from `status.latestConfigHash`. A render pulls the source with
//   that version's puller (./kokumi-puller.ts decides what Kokumi "sees"), pushes the
//   Preparation artifact to `<namespace>/<order>` in the registry (service.DefaultDestination),
//   creates the Preparation `<order>-<digest12>` and writes the Order status (OrderUpdater:
//   Ready, or ProcessingFailed with latestConfigHash cleared, so the next round retries).
// - Promotion: `spec.autoDeploy: Enabled` (0.14.0, main) or `spec.promotion.mode: Automatic`
//   (the 0.17 fixture) serves each new Preparation through the Serving named after the Order
//   (preparation_controller.go reconcileServing); otherwise `promote()`, the person in the UI.
// - The Serving's Application (serving_controller.go reconcileArgoApplication): repoURL the
//   Preparation's repository, targetRevision its digest, taken over only with the
//   allowed-order annotation.
// - Argo CD: the Application's sync and status are ./argocd-simulator.ts.
//
// Simplifications, on purpose: the Preparation artifact is the pulled manifest.yaml published
// deterministically (real Kokumi's oras push may give another digest on a re-render: then a
// new Preparation is served, which converges the same way); no finalizer on the Order.
import {AppsV1Api, CustomObjectsApi, KubeConfig} from '@kubernetes/client-node'
import {createHash} from 'node:crypto'
import {isDeepStrictEqual} from 'node:util'
import {buildBundle} from '../../src/lib/oci/bundle.js'
import {OciClient} from '../../src/lib/oci/client.js'
import {publishBundle} from '../../src/lib/oci/publish.js'
import {APPLICATIONS, ARGOCD_NAMESPACE, createArgoCdSimulator} from './argocd-simulator.js'
import {pullerFor, pullManifest, type PulledManifest, type PullerName} from './kokumi-puller.js'

/** Kokumi's in-cluster registry (kokumi-dev/kokumi internal/service/defaults.go DefaultRegistryHost). */
export const KOKUMI_REGISTRY_HOST = 'kokumi-registry.kokumi.svc.cluster.local:5000'
export const ALLOWED_ORDER_ANNOTATION = 'delivery.kokumi.dev/allowed-order'
export const ORDER_LABEL = 'delivery.kokumi.dev/order'
export const SERVING_LABEL = 'delivery.kokumi.dev/serving'
export const SERVING_NAMESPACE_LABEL = 'delivery.kokumi.dev/serving-namespace'

const ORDERS = {group: 'delivery.kokumi.dev', version: 'v1alpha1', plural: 'orders'}
const PREPARATIONS = {group: 'delivery.kokumi.dev', version: 'v1alpha1', plural: 'preparations'}
const SERVINGS = {group: 'delivery.kokumi.dev', version: 'v1alpha1', plural: 'servings'}
/** The Deployment whose image tag names the installed Kokumi version (config/manager in Kokumi's repo). */
export const KOKUMI_CONTROLLER = {namespace: 'kokumi', name: 'kokumi-controller-manager'}
export {ARGOCD_SSA_MANAGER} from './argocd-simulator.js'

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
  const apps = kc.makeApiClient(AppsV1Api)
  const registry = opts.registryEndpoint.replace(/\/+$/, '')
  const oci = new OciClient(registry, {retry: {attempts: 1, baseDelayMs: 0, maxDelayMs: 0}})
  const events: string[] = []
  // Order `ns/name` -> digest a person promoted (Manual mode).
  const promoted = new Map<string, string>()
  const argocd = createArgoCdSimulator({kubeconfigPath: opts.kubeconfigPath, kubeConfig: kc, oci, headManifest, events})
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
    if (orders.length === 0) return
    const version = await installedKokumiVersion()
    if (!version) return // Kokumi's controller is not installed: nobody reconciles Orders.
    for (const order of orders) await reconcileOrder(order, pullerFor(version))
  }

  /** The tag of the installed controller image, e.g. `0.14.0`. */
  async function installedKokumiVersion(): Promise<string | undefined> {
    try {
      const d = await apps.readNamespacedDeployment({...KOKUMI_CONTROLLER})
      const image = d.spec?.template.spec?.containers.find((c) => c.name === 'manager')?.image ?? d.spec?.template.spec?.containers[0]?.image ?? ''
      return /:([^:/@]+)(@.*)?$/.exec(image)?.[1]
    } catch (err) {
      if (isCode(err, 404)) return undefined
      throw err
    }
  }

  async function reconcileOrder(order: Obj, puller: PullerName): Promise<void> {
    const ns = order.metadata.namespace!
    const name = order.metadata.name
    const specHash = configHash(order.spec ?? {})
    // order_controller.go reconcileRender: nothing to do while the render inputs are unchanged.
    if (order.status?.latestConfigHash !== specHash) await render(order, specHash, puller)
    const current = (await getOrder(ns, name)) ?? order
    const latest = current.status?.latestArtifactDigest as string | undefined
    if (promotionOf(current.spec) === 'Manual' && latest && (await approved(ns, current.status?.latestPreparationName))) promoted.set(`${ns}/${name}`, latest)
    const served = promotionOf(current.spec) === 'Automatic' ? latest : promoted.get(`${ns}/${name}`)
    if (served) await reconcileServing(current, served)
    await reconcileApplication(current, served)
  }

  async function render(order: Obj, specHash: string, puller: PullerName): Promise<void> {
    const ns = order.metadata.namespace!
    const name = order.metadata.name
    const source = order.spec?.source as {oci?: string; version?: string} | undefined
    const pulled = source?.oci && source.version ? await pull(source.oci, source.version, puller) : {error: 'the simulator handles only spec.source.oci'}
    if ('error' in pulled) {
      await writeOrderStatus(order, {ready: 'False', reason: 'ProcessingFailed', message: pulled.error})
      return
    }
    // Push the Preparation artifact to the Order's default destination.
    const repository = `${ns}/${name}`
    const bundle = buildBundle([{path: 'manifest.yaml', content: pulled.manifest}])
    const pushed = await publishBundle(oci, {repository, tag: source!.version!, layer: bundle.layer, layerDigest: bundle.layerDigest, annotations: {source: source!.oci!, version: source!.version!}})
    const digest = pushed.manifestDigest
    const preparation = `${name}-${digest.slice('sha256:'.length, 'sha256:'.length + 12)}`
    await createPreparation(order, preparation, digest, specHash, pulled.sourceDigest)
    await writeOrderStatus(order, {
      ready: 'True',
      reason: 'Ready',
      message: `Successfully pushed to ${KOKUMI_REGISTRY_HOST}/${repository}`,
      digest,
      preparation,
      configHash: specHash,
    })
  }

  /** preparation_controller.go: a Preparation labelled approve-deploy=true is served although autoDeploy is off. */
  async function approved(namespace: string, preparation: string | undefined): Promise<boolean> {
    if (!preparation) return false
    try {
      const p = (await custom.getNamespacedCustomObject({...PREPARATIONS, namespace, name: preparation})) as Obj
      return p.metadata.labels?.['delivery.kokumi.dev/approve-deploy'] === 'true'
    } catch (err) {
      if (isCode(err, 404)) return false
      throw err
    }
  }

  /** What Kokumi's puller of this version leaves of `oci:version`, or why it fails. */
  async function pull(url: string, version: string, puller: PullerName): Promise<{manifest: string; sourceDigest: string} | {error: string}> {
    const ref = parseOci(url)
    if (!ref) return {error: `${url} is not oci://host/repository`}
    if (ref.host !== KOKUMI_REGISTRY_HOST && `http://${ref.host}` !== registry) {
      return {error: `the simulator only knows the registry ${KOKUMI_REGISTRY_HOST}, not ${ref.host}`}
    }
    const digest = await headManifest(ref.repository, version)
    if (!digest) return {error: `failed to pull artifact: resolve ${ref.host}/${ref.repository}:${version}: not found`}
    const fetched = await oci.getManifest(ref.repository, digest)
    const outcome = await pullManifest(puller, fetched.manifest as PulledManifest, (d) => oci.getBlob(ref.repository, d))
    return 'error' in outcome ? {error: `${puller}: ${outcome.error}`} : {manifest: outcome.manifest, sourceDigest: digest}
  }

  async function createPreparation(order: Obj, name: string, digest: string, specHash: string, sourceDigest: string): Promise<void> {
    const ns = order.metadata.namespace!
    const source = order.spec!.source as {oci: string; version: string}
    const body = {
      apiVersion: 'delivery.kokumi.dev/v1alpha1',
      kind: 'Preparation',
      metadata: {
        name,
        namespace: ns,
        labels: {[ORDER_LABEL]: order.metadata.name, 'delivery.kokumi.dev/version': source.version, 'delivery.kokumi.dev/auto-deploy': String(order.spec?.autoDeploy ?? '')},
      },
      spec: {
        orderName: order.metadata.name,
        source: {oci: source.oci, baseDigest: sourceDigest},
        renderer: {version: 'v1.0.0', digest, renderType: 'Manifest'},
        configHash: specHash,
        artifact: {ociRef: `oci://${KOKUMI_REGISTRY_HOST}/${ns}/${order.metadata.name}@${digest}`, digest, signed: false},
      },
    }
    try {
      await custom.createNamespacedCustomObject({...PREPARATIONS, namespace: ns, body})
      events.push(`Preparation ${ns}/${name} created`)
    } catch (err) {
      // Exists already (createPreparation returns it unchanged), or no Preparation CRD (the 0.17 fixture test).
      if (!isCode(err, 409) && !isCode(err, 404)) throw err
    }
  }

  /** The Serving named after the Order points at the served Preparation (preparation_controller.go reconcileServing). */
  async function reconcileServing(order: Obj, digest: string): Promise<void> {
    const ns = order.metadata.namespace!
    const name = order.metadata.name
    const preparationName = `${name}-${digest.slice('sha256:'.length, 'sha256:'.length + 12)}`
    const type = promotionOf(order.spec) === 'Automatic' ? 'Automatic' : 'Manual'
    try {
      const existing = (await custom.getNamespacedCustomObject({...SERVINGS, namespace: ns, name})) as Obj
      if (existing.spec?.preparationName === preparationName && existing.spec?.preparationPolicy?.type === type) return
      await custom.replaceNamespacedCustomObject({...SERVINGS, namespace: ns, name, body: {...existing, spec: {...existing.spec, preparationName, preparationPolicy: {type}}}})
      events.push(`Serving ${ns}/${name} moved to ${preparationName}`)
    } catch (err) {
      if (isCode(err, 409)) return
      if (!isCode(err, 404)) throw err
      const body = {
        apiVersion: 'delivery.kokumi.dev/v1alpha1',
        kind: 'Serving',
        metadata: {name, namespace: ns, labels: {[ORDER_LABEL]: name, 'delivery.kokumi.dev/auto-deploy': String(type === 'Automatic')}},
        spec: {orderName: name, preparationName, preparationPolicy: {type}},
      }
      try {
        await custom.createNamespacedCustomObject({...SERVINGS, namespace: ns, body})
        events.push(`Serving ${ns}/${name} created at ${preparationName}`)
      } catch (e) {
        if (!isCode(e, 404) && !isCode(e, 409)) throw e // no Serving CRD (the 0.17 fixture test) or a race
      }
    }
  }

  async function getOrder(namespace: string, name: string): Promise<Obj | undefined> {
    try {
      return (await custom.getNamespacedCustomObject({...ORDERS, namespace, name})) as Obj
    } catch (err) {
      if (isCode(err, 404)) return undefined
      throw err
    }
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
    want: {ready: 'True' | 'False'; reason: string; message: string; digest?: string; preparation?: string; configHash?: string},
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
      status.latestPreparationName = want.preparation
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

  async function reconcileApplication(order: Obj, served: string | undefined): Promise<void> {
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
    await argocd.syncApplication(existing, ns, `${ns}/${name}`)
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
      source: {repoURL: `oci://${KOKUMI_REGISTRY_HOST}/${ns}/${name}`, targetRevision: digest, path: '.'},
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

/** Automatic or Manual, from whichever field the installed Order CRD has. */
export function promotionOf(spec: Record<string, any> | undefined): 'Automatic' | 'Manual' {
  if (spec?.promotion?.mode) return spec.promotion.mode === 'Automatic' ? 'Automatic' : 'Manual'
  return spec?.autoDeploy === 'Enabled' ? 'Automatic' : 'Manual' // 0.14.0: default Disabled
}

/** renderer/hash.go CalculateSpecHash's inputs (not its YAML bytes: only equality matters here). */
export function configHash(spec: Record<string, any>): string {
  const inputs = {oci: spec.source?.oci, version: spec.source?.version, menuRef: spec.menuRef?.name, render: spec.render, patches: spec.patches, edits: spec.edits}
  return `sha256:${createHash('sha256').update(JSON.stringify(inputs)).digest('hex')}`
}

function isCode(err: unknown, code: number): boolean {
  return (err as {code?: number}).code === code
}
