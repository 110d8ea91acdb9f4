// Kokumi/Argo CD simulator. Neither Kokumi's controller nor Argo CD can run on the harness
// (kwok only pretends their pods run), so this small loop plays both, from the outside, following
// kokumi-dev/kokumi at the version the installed manifest names (the image tag of the
// Deployment kokumi/kokumi-controller-manager):
//
// - Kokumi's Order, Preparation and Serving controllers: ./kokumi-simulator.ts (0.14.0, cited
//   there), which turns an Order into a Preparation pushed to `<namespace>/<order>`, a Serving
//   and the Argo CD Application. A change of the controller Deployment's pod template (a
//   roll-out) restarts them.
// - Argo CD: the Application's sync, health, prune and self-heal are ./argocd-simulator.ts,
//   which acts only while Argo CD's application controller has a Ready pod.
import {AppsV1Api, CustomObjectsApi} from '@kubernetes/client-node'
import {loadKubeConfig} from './kube.js'
import {OciClient} from '../../src/lib/oci/client.js'
import {wakeOnWatch} from './wake-on-watch.js'
import {APPLICATIONS, ARGOCD_NAMESPACE, createArgoCdSimulator} from './argocd-simulator.js'
import {ALLOWED_ORDER_ANNOTATION, createKokumiSimulator, isCode, KOKUMI_CONTROLLER, type Obj} from './kokumi-simulator.js'

export {
  ALLOWED_ORDER_ANNOTATION,
  KOKUMI_CONTROLLER,
  KOKUMI_REGISTRY_HOST,
  ORDER_LABEL,
  SERVING_LABEL,
  configHash,
  desiredApplication,
  normalizeYaml,
  type Obj,
} from './kokumi-simulator.js'

const ORDERS = {group: 'delivery.kokumi.dev', version: 'v1alpha1', plural: 'orders'}
export {ARGOCD_SSA_MANAGER} from './argocd-simulator.js'
const MANIFEST_ACCEPT = [
  'application/vnd.oci.image.manifest.v1+json',
  'application/vnd.oci.image.index.v1+json',
  'application/vnd.docker.distribution.manifest.v2+json',
].join(', ')

export interface StackSimulatorOptions {
  kubeconfigPath: string
  /** The harness registry, `http://127.0.0.1:<port>`; stands in for Kokumi's in-cluster registry. */
  registryEndpoint: string
  /**
   * Resync period (default 2000 ms): a round runs at once on a watch event of the kinds the
   * controllers watch (wake-on-watch.ts), every 300 ms for 3 s after one, and at least this often
   * for what no event announces (a requeue, a managed object's drift, self-heal's backoff).
   */
  intervalMs?: number
  /** Kokumi's clock (oras stamps each push with it); tests set it. */
  now?: () => Date
  /** Whether Argo CD acts only while its application controller has a Ready pod (default) or is assumed running: ./argocd-simulator.ts. */
  applicationController?: 'required' | 'assumed'
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
  const kc = loadKubeConfig(opts.kubeconfigPath)
  const custom = kc.makeApiClient(CustomObjectsApi)
  const apps = kc.makeApiClient(AppsV1Api)
  const registry = opts.registryEndpoint.replace(/\/+$/, '')
  const oci = new OciClient(registry, {retry: {attempts: 1, baseDelayMs: 0, maxDelayMs: 0}})
  const events: string[] = []
  const kokumi = createKokumiSimulator({custom, apps, oci, registry, events, now: opts.now ?? (() => new Date())})
  const argocd = createArgoCdSimulator({
    kubeconfigPath: opts.kubeconfigPath,
    kubeConfig: kc,
    oci,
    headManifest,
    events,
    applicationController: opts.applicationController,
  })
  let stopped = false
  let inFlight: Promise<void> = Promise.resolve()
  // What Kokumi's informers (Orders, Preparations, Servings, its Deployment) and Argo CD's (its
  // Applications, its controller's pods, and the workloads whose health it reports) would see.
  const waker = wakeOnWatch(kc, [
    {path: `/apis/${ORDERS.group}/${ORDERS.version}/orders`},
    {path: `/apis/${ORDERS.group}/${ORDERS.version}/preparations`},
    {path: `/apis/${ORDERS.group}/${ORDERS.version}/servings`},
    {path: `/apis/${APPLICATIONS.group}/${APPLICATIONS.version}/namespaces/${ARGOCD_NAMESPACE}/${APPLICATIONS.plural}`},
    {path: `/api/v1/namespaces/${ARGOCD_NAMESPACE}/pods`},
    {path: '/apis/apps/v1/deployments'},
    {path: '/apis/apps/v1/statefulsets'},
  ])

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
        // The apiserver or registry may be stopping under us at the end of a test, a fresh CRD
        // answers 429 while its storage initializes, and a restarted apiserver (a restore) 503
        // until its paths are installed: all pass by the next round.
        if (!stopped && !isCode(err, 429) && !isCode(err, 503)) console.error(`stack simulator: ${(err as Error).message}`)
      }
      // While objects change (a command at work, a roll-out), as often as before: Argo CD compares
      // at most once a second (argocd-simulator.ts) and a skipped comparison has no event to wake it.
      await waker.wait(waker.busy(3000) ? Math.min(300, opts.intervalMs ?? 300) : (opts.intervalMs ?? 2000))
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
      waker.stop()
      await looping
    },
  }
}

/** `oci://host[:port]/repo/path` -> host and repository. */
export function parseOci(url: string): {host: string; repository: string} | undefined {
  const m = /^oci:\/\/([^/]+)\/(.+?)\/*$/.exec(url)
  return m?.[1] && m[2] ? {host: m[1], repository: m[2]} : undefined
}
