// Kokumi/Argo CD status simulator. Neither Kokumi's controller nor Argo CD can run on the
// harness (no kubelet, no pods), so this small loop plays both, from the outside, following
// kokumi-dev/kokumi at the version the installed manifest names (the image tag of the
// Deployment kokumi/kokumi-controller-manager):
//
// - Kokumi's Order, Preparation and Serving controllers: ./kokumi-simulator.ts (0.14.0, cited
//   there), which turns an Order into a Preparation pushed to `<namespace>/<order>`, a Serving
//   and the Argo CD Application. A change of the controller Deployment's pod template (a
//   roll-out) restarts them.
// - Argo CD: an Application whose revision changed first reads OutOfSync/Progressing, then
//   the sync: the Preparation's manifest.yaml is pulled from the registry and every object in
//   it is applied server-side as field manager `argocd-controller` with force, as Argo CD does
//   with `ServerSideApply=true` (argoproj/argo-cd common/common.go `ArgoCDSSAManager =
//   "argocd-controller"`, passed by controller/sync.go `sync.WithServerSideApplyManager`;
//   argoproj/gitops-engine pkg/utils/kube/resource_ops.go sets ForceConflicts for every
//   server-side apply). So a field a new bundle drops is removed only when no other manager
//   still owns it, exactly as in a real cluster. Then Synced/Healthy; if the digest cannot be
//   pulled, OutOfSync/Missing; if the apply fails, OutOfSync/Degraded with the error.
//
// Simplifications, on purpose: Argo CD's tracking annotation and pruning (objects a bundle no
// longer holds) are not reproduced.
import {ApiextensionsV1Api, AppsV1Api, CustomObjectsApi, KubeConfig} from '@kubernetes/client-node'
import {isDeepStrictEqual} from 'node:util'
import {untarSync} from '../../src/lib/chart/archive.js'
import {serverSideApply} from '../../src/lib/kube/apply.js'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {OciClient} from '../../src/lib/oci/client.js'
import {parseObjects} from '../../src/lib/stack/objects.js'
import {ALLOWED_ORDER_ANNOTATION, createKokumiSimulator, FIXED_TIME, isCode, KOKUMI_CONTROLLER, type Obj} from './kokumi-simulator.js'
import type {PulledManifest} from './kokumi-puller.js'

export {ALLOWED_ORDER_ANNOTATION, KOKUMI_CONTROLLER, KOKUMI_REGISTRY_HOST, ORDER_LABEL, SERVING_LABEL, configHash, desiredApplication, normalizeYaml, type Obj} from './kokumi-simulator.js'

const ORDERS = {group: 'delivery.kokumi.dev', version: 'v1alpha1', plural: 'orders'}
const APPLICATIONS = {group: 'argoproj.io', version: 'v1alpha1', plural: 'applications'}
/** argoproj/argo-cd common/common.go ArgoCDSSAManager: the field manager of Argo CD's server-side syncs. */
export const ARGOCD_SSA_MANAGER = 'argocd-controller'

/** Kinds the bundles hold that are cluster-scoped (everything else is namespaced). */
const CLUSTER_SCOPED = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding', 'CustomResourceDefinition', 'PriorityClass', 'StorageClass', 'ValidatingWebhookConfiguration', 'MutatingWebhookConfiguration', 'CiliumClusterwideNetworkPolicy'])
const ARGOCD_NAMESPACE = 'argocd'
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
  /** Kokumi's clock (oras stamps each push with it); tests set it. */
  now?: () => Date
}

export interface StackSimulator {
  /** Stops polling and waits for an in-flight round to finish. */
  stop(): Promise<void>
  /** Runs one round now (tests use it instead of waiting for the timer). */
  tick(): Promise<void>
  /**
   * What a person does for a `Manual` Order: label its newest Preparation approve-deploy=true.
   * Takes effect on the next round.
   */
  promote(namespace: string, name: string): Promise<void>
  /**
   * Kokumi's controller starts again (a roll-out of its Deployment does this by itself; so does
   * a resync): every Order, Preparation and Serving is reconciled on the next round.
   */
  restart(): Promise<void>
  /** What the simulator did, in order: `Application argocd/x created at sha256:...`, ... */
  readonly events: string[]
}

export function startStackSimulator(opts: StackSimulatorOptions): StackSimulator {
  const kc = new KubeConfig()
  kc.loadFromFile(opts.kubeconfigPath)
  const custom = kc.makeApiClient(CustomObjectsApi)
  const ext = kc.makeApiClient(ApiextensionsV1Api)
  const apps = kc.makeApiClient(AppsV1Api)
  const registry = opts.registryEndpoint.replace(/\/+$/, '')
  const oci = new OciClient(registry, {retry: {attempts: 1, baseDelayMs: 0, maxDelayMs: 0}})
  const events: string[] = []
  const kokumi = createKokumiSimulator({custom, apps, oci, registry, events, now: opts.now ?? (() => new Date())})
  let applicationStatusSubresource: boolean | undefined
  let kube: Promise<Kube> | undefined
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
    const installed = await installedKokumi()
    if (!installed) return // Kokumi's controller is not installed: nobody reconciles Orders.
    await kokumi.round(orders, installed.version, installed.podTemplate)
    // Argo CD's side, for the Applications of these Orders.
    for (const order of orders) {
      const current = (await getOrder(order.metadata.namespace!, order.metadata.name)) ?? order
      await reconcileApplication(current)
    }
  }

  /** The tag of the installed controller image, e.g. `0.14.0`, and its pod template (a change is a roll-out). */
  async function installedKokumi(): Promise<{version: string; podTemplate: string} | undefined> {
    try {
      const d = await apps.readNamespacedDeployment({...KOKUMI_CONTROLLER})
      const image = d.spec?.template.spec?.containers.find((c) => c.name === 'manager')?.image ?? d.spec?.template.spec?.containers[0]?.image ?? ''
      const version = /:([^:/@]+)(@.*)?$/.exec(image)?.[1]
      return version ? {version, podTemplate: JSON.stringify(d.spec?.template ?? {})} : undefined
    } catch (err) {
      if (isCode(err, 404)) return undefined
      throw err
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

  async function reconcileApplication(order: Obj): Promise<void> {
    const ns = order.metadata.namespace!
    const name = order.metadata.name
    let existing: Obj | undefined
    try {
      existing = (await custom.getNamespacedCustomObject({...APPLICATIONS, namespace: ARGOCD_NAMESPACE, name})) as Obj
    } catch (err) {
      if (!isCode(err, 404)) throw err
    }
    if (!existing || existing.metadata.annotations?.[ALLOWED_ORDER_ANNOTATION] !== name) return
    await reportSync(existing, ns, `${ns}/${name}`)
  }

  /** Argo CD's side: OutOfSync/Progressing on a new revision, then Synced/Healthy if it can be pulled. */
  async function reportSync(app: Obj, orderNamespace: string, repository: string | undefined): Promise<void> {
    const target = app.spec?.source?.targetRevision as string
    const current = (app.status ?? {}) as Record<string, any>
    let sync: string
    let health: string
    let revision: string | undefined = current.sync?.revision
    const operation = (app as Obj & {operation?: {sync?: unknown}}).operation
    let operationState: Record<string, unknown> | undefined
    if (current.sync?.revision !== target && !['Progressing', 'Missing'].includes(current.health?.status)) {
      // First sight of this revision: Argo CD compares before it syncs.
      sync = 'OutOfSync'
      health = 'Progressing'
    } else if (repository && (await headManifest(repository, target))) {
      sync = 'Synced'
      health = 'Healthy'
      revision = target
      // A sync runs whenever the Application is not Synced at this revision (a new one, or after
      // the registry came back), or a sync operation was requested (`argocd app sync` sets the
      // Application's `operation`; controller/appcontroller.go processRequestedAppOperations runs
      // it, records status.operationState and clears the field): Argo CD applies the whole revision again.
      if (current.sync?.status !== 'Synced' || current.sync?.revision !== target || operation) {
        const failed = await syncRevision(repository, target, app.spec?.destination?.namespace).then(() => undefined, (err: Error) => err.message.split('\n')[0])
        if (operation) operationState = {operation, phase: failed ? 'Failed' : 'Succeeded', message: failed ?? 'successfully synced (all tasks run)', syncResult: {revision: target}, startedAt: FIXED_TIME, finishedAt: FIXED_TIME}
        if (failed) {
          sync = 'OutOfSync'
          health = 'Degraded'
          revision = current.sync?.revision
          events.push(`Application ${ARGOCD_NAMESPACE}/${app.metadata.name} sync failed: ${failed}`)
        }
      }
    } else {
      sync = 'OutOfSync'
      health = 'Missing'
    }
    const status = {
      ...current,
      sync: {status: sync, ...(revision ? {revision} : {}), comparedTo: {source: app.spec?.source, destination: app.spec?.destination}},
      health: {status: health},
      sourceType: 'Directory',
      ...(operationState ? {operationState} : {}),
    }
    if (!operationState && isDeepStrictEqual(JSON.parse(JSON.stringify(status)), current)) return
    const {operation: _done, ...rest} = app as Obj & {operation?: unknown}
    const body = {...(operationState ? rest : app), status}
    try {
      if (await hasApplicationStatusSubresource()) {
        // The operation lives in the main resource: cleared there first, then the status.
        const cleared = operationState ? ((await custom.replaceNamespacedCustomObject({...APPLICATIONS, namespace: ARGOCD_NAMESPACE, name: app.metadata.name, body: rest})) as Obj) : app
        await custom.replaceNamespacedCustomObjectStatus({...APPLICATIONS, namespace: ARGOCD_NAMESPACE, name: app.metadata.name, body: {...cleared, status}})
      } else {
        // Argo CD's Application CRD has no status subresource: status is written with the object.
        await custom.replaceNamespacedCustomObject({...APPLICATIONS, namespace: ARGOCD_NAMESPACE, name: app.metadata.name, body})
      }
      events.push(`Application ${ARGOCD_NAMESPACE}/${app.metadata.name} (Order ${orderNamespace}/${app.metadata.name}) ${sync}/${health}${revision ? ` at ${revision}` : ''}`)
    } catch (err) {
      if (!isCode(err, 409) && !isCode(err, 404)) throw err
    }
  }

  /** Argo CD's sync of one revision: every object of its manifest.yaml, server-side, as argocd-controller, forced. */
  async function syncRevision(repository: string, digest: string, destinationNamespace?: string): Promise<void> {
    const fetched = await oci.getManifest(repository, digest)
    const layers = (fetched.manifest as PulledManifest).layers
    let text: string | undefined
    for (const layer of layers) text ??= untarSync(await oci.getBlob(repository, layer.digest), `${repository}@${digest}`).get('manifest.yaml')?.toString('utf8')
    if (text === undefined) throw new Error(`${repository}@${digest} holds no manifest.yaml`)
    kube ??= connectKube({kubeconfig: opts.kubeconfigPath})
    kube.catch(() => (kube = undefined))
    // A namespaced object with no namespace goes to the Application's destination namespace,
    // as Argo CD's sync does (gitops-engine pkg/sync/sync_context.go: the target namespace is
    // set on namespaced resources that carry none).
    const objects = parseObjects(text, `${repository}@${digest}`).map((o) =>
      o.metadata.namespace || !destinationNamespace || CLUSTER_SCOPED.has(o.kind) ? o : {...o, metadata: {...o.metadata, namespace: destinationNamespace}},
    )
    const results = await serverSideApply(await kube, objects, {fieldManager: ARGOCD_SSA_MANAGER, force: true})
    events.push(`synced ${repository}@${digest}: ${results.filter((r) => r.result !== 'unchanged').length} of ${results.length} objects changed`)
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
    promote: (namespace, name) => kokumi.promote(namespace, name),
    async restart() {
      await inFlight.catch(() => undefined)
      kokumi.restart()
    },
    async stop() {
      stopped = true
      await looping
    },
  }
}

/** `oci://host[:port]/repo/path` -> host and repository. */
export function parseOci(url: string): {host: string; repository: string} | undefined {
  const m = /^oci:\/\/([^/]+)\/(.+?)\/*$/.exec(url)
  return m?.[1] && m[2] ? {host: m[1], repository: m[2]} : undefined
}
