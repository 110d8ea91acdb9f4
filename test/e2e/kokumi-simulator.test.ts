// Control tests of the Kokumi simulator's fidelity to Kokumi 0.14.0 (the version the harness
// installs): each names the upstream behaviour it checks and failed on the simulator before it
// followed that behaviour. Real apiserver, real registry, the real 0.14.0 CRDs and controller
// Deployment, the real Argo CD CRDs (rendered from the upstream chart by the real helm).
import {AppsV1Api, CoreV1Api, CustomObjectsApi, setHeaderOptions, Watch, type KubeConfig, type V1CustomResourceDefinition} from '@kubernetes/client-node'
import {readFileSync} from 'node:fs'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {parseAllDocuments} from 'yaml'
import {untarSync} from '../../src/lib/chart/archive.js'
import {helmTemplate} from '../../src/lib/helm/template.js'
import {buildBundle} from '../../src/lib/oci/bundle.js'
import {OciClient} from '../../src/lib/oci/client.js'
import {publishBundle} from '../../src/lib/oci/publish.js'
import {startControlPlane, type ControlPlane} from '../harness/apiserver.js'
import {createCrdRaw} from '../harness/cilium-simulator.js'
import {createNamespace, loadKubeConfig, waitForCrdEstablished, waitUntil} from '../harness/kube.js'
import {startRegistry, type RunningRegistry} from '../harness/registry.js'
import {KOKUMI_REGISTRY_HOST, startStackSimulator, type StackSimulator} from '../harness/stack-simulator.js'
import {UPSTREAM} from '../support/upstream.js'

const KOKUMI = {group: 'delivery.kokumi.dev', version: 'v1alpha1'}
const ORDERS = {...KOKUMI, plural: 'orders'}
const PREPARATIONS = {...KOKUMI, plural: 'preparations'}
const SERVINGS = {...KOKUMI, plural: 'servings'}
const APPLICATIONS = {group: 'argoproj.io', version: 'v1alpha1', plural: 'applications'}
const MERGE = setHeaderOptions('Content-Type', 'application/merge-patch+json')

type Obj = {
  metadata: {
    name: string
    namespace?: string
    labels?: Record<string, string>
    annotations?: Record<string, string>
    resourceVersion?: string
    creationTimestamp?: string
  }
  spec?: any
  status?: any
}

let cp: ControlPlane
let registry: RunningRegistry
let kc: KubeConfig
let custom: CustomObjectsApi
let sim: StackSimulator
// The simulator's clock: each render one second later, as renders a second apart are (oras stamps the second).
let clock = Date.parse('2026-01-01T00:00:00Z')

beforeAll(async () => {
  ;[cp, registry] = await Promise.all([startControlPlane(), startRegistry()])
  kc = loadKubeConfig(cp.kubeconfigPath)
  custom = kc.makeApiClient(CustomObjectsApi)
  const render = await helmTemplate({chartPath: UPSTREAM.argocdChart, releaseName: 'argocd', namespace: 'argocd', values: {}, includeCrds: true})
  const argoCrds = parseAllDocuments(render)
    .map((d) => d.toJS() as V1CustomResourceDefinition | null)
    .filter((o): o is V1CustomResourceDefinition => o?.kind === 'CustomResourceDefinition')
  // The real Kokumi 0.14.0 install.yaml: its CRDs and its controller Deployment (whose image names the version).
  const kokumiDocs = parseAllDocuments(readFileSync(UPSTREAM.kokumiManifest, 'utf8')).map((d) => d.toJS() as any)
  const kokumiCrds = kokumiDocs.filter((o) => o?.kind === 'CustomResourceDefinition' && o.metadata?.name.endsWith('.delivery.kokumi.dev'))
  for (const crd of [...argoCrds, ...kokumiCrds]) await createCrdRaw(kc, crd)
  for (const crd of [...argoCrds, ...kokumiCrds]) await waitForCrdEstablished(kc, crd.metadata!.name!)
  await createNamespace(kc, 'argocd')
  await createNamespace(kc, 'kokumi')
  const controller = kokumiDocs.find((o) => o?.kind === 'Deployment' && o.metadata?.name === 'kokumi-controller-manager')
  await kc.makeApiClient(AppsV1Api).createNamespacedDeployment({namespace: 'kokumi', body: controller})
  // No Argo CD workloads on this bare control plane: its controller is played as running.
  sim = startStackSimulator({
    kubeconfigPath: cp.kubeconfigPath,
    registryEndpoint: registry.endpoint,
    intervalMs: 100,
    now: () => new Date((clock += 1000)),
    applicationController: 'assumed',
  })
})

afterAll(async () => {
  await sim?.stop()
  await Promise.all([cp?.stop(), registry?.stop()])
})

async function pushBundle(repository: string, tag: string, content: string): Promise<string> {
  const bundle = buildBundle([{path: 'manifest.yaml', content}])
  const result = await publishBundle(new OciClient(registry.endpoint), {
    repository,
    tag,
    layer: bundle.layer,
    layerDigest: bundle.layerDigest,
    annotations: {source: 'https://example.invalid/ichor', version: tag},
  })
  return result.manifestDigest
}

/** A 0.14.0 Order (spec.autoDeploy, not 0.17's promotion.mode). */
function order(ns: string, name: string, version: string, autoDeploy: 'Enabled' | 'Disabled') {
  return {
    apiVersion: 'delivery.kokumi.dev/v1alpha1',
    kind: 'Order',
    metadata: {name, namespace: ns},
    spec: {source: {oci: `oci://${KOKUMI_REGISTRY_HOST}/ichor/${name}`, version}, autoDeploy},
  }
}

const get = async (api: typeof ORDERS, namespace: string, name: string): Promise<Obj | undefined> => {
  try {
    return (await custom.getNamespacedCustomObject({...api, namespace, name})) as Obj
  } catch (err) {
    if ((err as {code?: number}).code === 404) return undefined
    throw err
  }
}
const getApplication = (name: string) => get(APPLICATIONS, 'argocd', name)
const readyOf = (o: Obj | undefined) => (o?.status?.conditions as any[] | undefined)?.find((c) => c.type === 'Ready')

async function patchOrderSpec(ns: string, name: string, spec: Record<string, unknown>): Promise<void> {
  await custom.patchNamespacedCustomObject({...ORDERS, namespace: ns, name, body: {spec}}, MERGE)
}

/** The Order's Preparation digest once its render of `version` is Ready. */
function rendered(ns: string, name: string, version: string, notEqual?: string): Promise<{digest: string; preparation: string}> {
  return waitUntil(`Order ${ns}/${name} Ready at ${version}`, async () => {
    const o = await get(ORDERS, ns, name)
    const digest = o?.status?.latestArtifactDigest as string | undefined
    return readyOf(o)?.status === 'True' && o?.spec.source.version === version && digest && digest !== notEqual
      ? {digest, preparation: o!.status.latestPreparationName as string}
      : undefined
  })
}

function servedAt(name: string, digest: string): Promise<Obj> {
  return waitUntil(
    `Application argocd/${name} at ${digest}`,
    async () => {
      const app = await getApplication(name)
      return app?.spec?.source?.targetRevision === digest && app
      // Seconds when the machine is idle; the whole suite on two CPUs has taken over 15 s.
    },
    {timeoutMs: 60_000},
  )
}

async function settle(): Promise<void> {
  for (let i = 0; i < 4; i++) await sim.tick()
}

/** manifest.yaml of the artifact Kokumi pushed for a Preparation. */
async function preparationManifest(ns: string, name: string, digest: string): Promise<{yaml: string; annotations: Record<string, string>}> {
  const oci = new OciClient(registry.endpoint)
  const fetched = await oci.getManifest(`${ns}/${name}`, digest)
  const m = fetched.manifest as {layers: {digest: string}[]; annotations?: Record<string, string>}
  for (const layer of m.layers) {
    const text = untarSync(await oci.getBlob(`${ns}/${name}`, layer.digest), layer.digest).get('manifest.yaml')
    if (text) return {yaml: text.toString('utf8'), annotations: m.annotations ?? {}}
  }
  throw new Error(`${ns}/${name}@${digest} holds no manifest.yaml`)
}

/** Collects the watch events of one object until `stop()`. */
async function watchObject(path: string, name: string): Promise<{events: {type: string; object: Obj}[]; stop: () => void}> {
  const events: {type: string; object: Obj}[] = []
  const req = await new Watch(kc).watch(
    path,
    {fieldSelector: `metadata.name=${name}`},
    (type, object) => events.push({type, object}),
    () => undefined,
  )
  return {events, stop: () => req.abort()}
}

describe('Kokumi simulator follows Kokumi 0.14.0', () => {
  it('renderer.go NormalizeYAML: the Preparation holds the re-serialised bundle, which ends before the first document yaml.v3 cannot decode', async () => {
    const ns = await createNamespace(kc, 'rt-sim')
    const name = 'rt-sim'
    // Four-space indentation, a line comment, a quoted 'yes', a folded block; then a document
    // with a raw control character (libyaml: "control characters are not allowed"; the
    // yaml package reads it); then a good document that Kokumi never reaches.
    const bundle = [
      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n    name: rt-one   # the first\ndata:\n    quoted: 'yes'\n    folded: >-\n        one\n        two\n",
      'apiVersion: v1\nkind: ConfigMap\nmetadata:\n    name: rt-two\ndata:\n    bell: "ring\x07"\n    raw: ring\x07\n',
      'apiVersion: v1\nkind: ConfigMap\nmetadata:\n    name: rt-three\n',
    ].join('---\n')
    expect(parseAllDocuments(bundle).every((d) => d.errors.length === 0)).toBe(true)
    await pushBundle(`ichor/${name}`, '1.0.0-aaaaaaaaaaaa', bundle)
    await custom.createNamespacedCustomObject({...ORDERS, namespace: ns, body: order(ns, name, '1.0.0-aaaaaaaaaaaa', 'Enabled')})
    const {digest} = await rendered(ns, name, '1.0.0-aaaaaaaaaaaa')
    const {yaml} = await preparationManifest(ns, name, digest)
    // yaml.v3 never wraps (best_width -1), so the folded block is re-emitted on one line.
    expect(yaml).toBe("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: rt-one # the first\ndata:\n  quoted: 'yes'\n  folded: >-\n    one two\n")
    await servedAt(name, digest)
    await waitUntil('Argo CD synced it', async () => {
      const s = (await getApplication(name))?.status
      return s?.sync?.status === 'Synced' && s.sync.revision === digest
    })
    const core = kc.makeApiClient(CoreV1Api)
    const names = (await core.listNamespacedConfigMap({namespace: ns})).items.map((c) => c.metadata!.name)
    expect(names).toContain('rt-one')
    expect(names).not.toContain('rt-two')
    expect(names).not.toContain('rt-three')
  })

  it('order_controller.go: the Order reads Ready=Unknown/Processing with the new config hash while it renders', async () => {
    const ns = await createNamespace(kc, 'processing-sim')
    const name = 'processing-sim'
    await pushBundle(`ichor/${name}`, '1.0.0-aaaaaaaaaaaa', 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: p\n')
    const watch = await watchObject(`/apis/delivery.kokumi.dev/v1alpha1/namespaces/${ns}/orders`, name)
    try {
      await custom.createNamespacedCustomObject({...ORDERS, namespace: ns, body: order(ns, name, '1.0.0-aaaaaaaaaaaa', 'Enabled')})
      await rendered(ns, name, '1.0.0-aaaaaaaaaaaa')
      await waitUntil('the Ready event', async () => watch.events.some((e) => readyOf(e.object)?.status === 'True'))
    } finally {
      watch.stop()
    }
    const phases = watch.events
      .map((e) => readyOf(e.object))
      .filter(Boolean)
      .map((c) => `${c.status}/${c.reason}`)
    expect(phases).toEqual(['Unknown/Processing', 'True/Ready'])
    const processing = watch.events.find((e) => readyOf(e.object)?.reason === 'Processing')!.object
    const ready = watch.events.find((e) => readyOf(e.object)?.reason === 'Ready')!.object
    // status.go Processing: the hash is recorded before the render, the digest only after it.
    expect(processing.status.latestConfigHash).toBe(ready.status.latestConfigHash)
    expect(processing.status.latestArtifactDigest).toBeUndefined()
    expect(processing.status.observedGeneration).toBeUndefined()
  })

  it('preparation_controller.go: promotion follows the auto-deploy label stamped on the Preparation at render time, not the Order spec of now', async () => {
    const ns = await createNamespace(kc, 'stamp-sim')
    const name = 'stamp-sim'
    await pushBundle(`ichor/${name}`, '1.0.0-aaaaaaaaaaaa', 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\n')
    await custom.createNamespacedCustomObject({...ORDERS, namespace: ns, body: order(ns, name, '1.0.0-aaaaaaaaaaaa', 'Disabled')})
    const {preparation} = await rendered(ns, name, '1.0.0-aaaaaaaaaaaa')
    const prep = (await get(PREPARATIONS, ns, preparation))!
    expect(prep.metadata.labels).toEqual({
      'delivery.kokumi.dev/order': name,
      'delivery.kokumi.dev/version': '1.0.0-aaaaaaaaaaaa',
      'delivery.kokumi.dev/auto-deploy': 'Disabled',
    })
    // order_controller.go createPreparation: Ready as soon as it is created.
    expect(readyOf(prep)).toMatchObject({status: 'True', reason: 'Ready'})
    // autoDeploy is not a render input (hash.go): switching it renders nothing, so nothing is served.
    await patchOrderSpec(ns, name, {autoDeploy: 'Enabled'})
    await settle()
    expect(await get(SERVINGS, ns, name)).toBeUndefined()
    expect(await getApplication(name)).toBeUndefined()
  })

  it('preparation_controller.go: approve-deploy on any Ready Preparation re-points the Serving, an older one included', async () => {
    const ns = await createNamespace(kc, 'approve-sim')
    const name = 'approve-sim'
    await pushBundle(`ichor/${name}`, '1.0.0-aaaaaaaaaaaa', 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a1\n')
    await pushBundle(`ichor/${name}`, '1.0.0-bbbbbbbbbbbb', 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a2\n')
    await custom.createNamespacedCustomObject({...ORDERS, namespace: ns, body: order(ns, name, '1.0.0-aaaaaaaaaaaa', 'Disabled')})
    const first = await rendered(ns, name, '1.0.0-aaaaaaaaaaaa')
    await patchOrderSpec(ns, name, {source: {oci: `oci://${KOKUMI_REGISTRY_HOST}/ichor/${name}`, version: '1.0.0-bbbbbbbbbbbb'}})
    const second = await rendered(ns, name, '1.0.0-bbbbbbbbbbbb', first.digest)
    const approve = (p: string) =>
      custom.patchNamespacedCustomObject(
        {...PREPARATIONS, namespace: ns, name: p, body: {metadata: {labels: {'delivery.kokumi.dev/approve-deploy': 'true'}}}},
        MERGE,
      )
    await approve(second.preparation)
    await servedAt(name, second.digest)
    // The older Preparation approved now (a second `stack promote` of an earlier render, or a person in the UI).
    await approve(first.preparation)
    await servedAt(name, first.digest)
    const serving = (await get(SERVINGS, ns, name))!
    expect(serving.spec).toEqual({orderName: name, preparationName: first.preparation, preparationPolicy: {type: 'Manual'}})
  })

  it('preparation_controller.go on a restart: every Preparation is reconciled again in list order, and the last approved one listed is served', async () => {
    const ns = await createNamespace(kc, 'restart-sim')
    const name = 'restart-sim'
    const versions = ['1.0.0-aaaaaaaaaaaa', '1.0.0-bbbbbbbbbbbb']
    for (const v of versions) await pushBundle(`ichor/${name}`, v, `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: r-${v}\n`)
    await custom.createNamespacedCustomObject({...ORDERS, namespace: ns, body: order(ns, name, versions[0]!, 'Disabled')})
    const a = await rendered(ns, name, versions[0]!)
    await patchOrderSpec(ns, name, {source: {oci: `oci://${KOKUMI_REGISTRY_HOST}/ichor/${name}`, version: versions[1]}})
    const b = await rendered(ns, name, versions[1]!, a.digest)
    // Approve the one listed last first, then the other: the Serving ends at the one listed first.
    const [early, late] = [a, b].sort((x, y) => (x.preparation < y.preparation ? -1 : 1)) as [typeof a, typeof a]
    const approve = (p: string) =>
      custom.patchNamespacedCustomObject(
        {...PREPARATIONS, namespace: ns, name: p, body: {metadata: {labels: {'delivery.kokumi.dev/approve-deploy': 'true'}}}},
        MERGE,
      )
    await approve(late.preparation)
    await servedAt(name, late.digest)
    await approve(early.preparation)
    await servedAt(name, early.digest)
    await settle()
    expect((await get(SERVINGS, ns, name))!.spec.preparationName).toBe(early.preparation)
    // A restart (what a Kokumi bundle roll-out does): both are reconciled, in name order; the later one wins.
    await sim.restart()
    await servedAt(name, late.digest)
    expect((await get(SERVINGS, ns, name))!.spec.preparationName).toBe(late.preparation)

    // Back to the early one by hand, then a roll-out of the controller Deployment (its pod template changes).
    await custom.patchNamespacedCustomObject({...SERVINGS, namespace: ns, name, body: {spec: {preparationName: early.preparation}}}, MERGE)
    await servedAt(name, early.digest)
    await kc.makeApiClient(AppsV1Api).patchNamespacedDeployment(
      {
        namespace: 'kokumi',
        name: 'kokumi-controller-manager',
        body: {spec: {template: {metadata: {annotations: {'kubectl.kubernetes.io/restartedAt': new Date(0).toISOString()}}}}},
      },
      MERGE,
    )
    await servedAt(name, late.digest)
  })

  it('serving_controller.go reconcileArgoApplication: the Application is replaced by a full Update, so the status Argo CD wrote is dropped with it', async () => {
    const ns = await createNamespace(kc, 'update-sim')
    const name = 'update-sim'
    await pushBundle(`ichor/${name}`, '1.0.0-aaaaaaaaaaaa', 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: u1\n')
    await pushBundle(`ichor/${name}`, '1.0.0-bbbbbbbbbbbb', 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: u2\n')
    await custom.createNamespacedCustomObject({...ORDERS, namespace: ns, body: order(ns, name, '1.0.0-aaaaaaaaaaaa', 'Enabled')})
    const first = await rendered(ns, name, '1.0.0-aaaaaaaaaaaa')
    const app = await servedAt(name, first.digest)
    // 0.14.0 labels the Application with the Order and the Serving only.
    expect(app.metadata.labels).toEqual({'delivery.kokumi.dev/order': name, 'delivery.kokumi.dev/serving': name})
    await waitUntil('Argo CD status written', async () => (await getApplication(name))?.status?.sync?.revision === first.digest)
    // An Automatic Serving follows the newest Ready Preparation by creationTimestamp, which has a
    // second's resolution; in a tie the first listed wins (serving_controller.go 124-133, as the
    // simulator does). The second render must come in a later second, as it does in a real run.
    const created = Date.parse((await get(PREPARATIONS, ns, first.preparation))!.metadata.creationTimestamp!)
    while (Date.now() < created + 1000) await new Promise((r) => setTimeout(r, 50))
    const watch = await watchObject('/apis/argoproj.io/v1alpha1/namespaces/argocd/applications', name)
    try {
      await patchOrderSpec(ns, name, {source: {oci: `oci://${KOKUMI_REGISTRY_HOST}/ichor/${name}`, version: '1.0.0-bbbbbbbbbbbb'}})
      const second = await rendered(ns, name, '1.0.0-bbbbbbbbbbbb', first.digest)
      await servedAt(name, second.digest)
      await waitUntil('the move seen', async () => watch.events.some((e) => e.object.spec?.source?.targetRevision === second.digest))
      const moved = watch.events.find((e) => e.object.spec?.source?.targetRevision === second.digest)!.object
      expect(moved.status).toBeUndefined()
    } finally {
      watch.stop()
    }
  })

  it('oras_client.go Push: a re-render of the same content is a new manifest digest (oras stamps org.opencontainers.image.created)', async () => {
    const ns = await createNamespace(kc, 'rerender-sim')
    const name = 'rerender-sim'
    await pushBundle(`ichor/${name}`, '1.0.0-aaaaaaaaaaaa', 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: rr\n')
    await custom.createNamespacedCustomObject({...ORDERS, namespace: ns, body: order(ns, name, '1.0.0-aaaaaaaaaaaa', 'Enabled')})
    const first = await rendered(ns, name, '1.0.0-aaaaaaaaaaaa')
    const {annotations} = await preparationManifest(ns, name, first.digest)
    expect(annotations['org.opencontainers.image.created']).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/)
    expect(annotations['org.opencontainers.image.description']).toBe('Initial commit')
    await servedAt(name, first.digest)
    // Registry loss of the Preparation, then what `ichor stack sync` asks for: a render again.
    const del = await fetch(`${registry.endpoint}/v2/${ns}/${name}/manifests/${first.digest}`, {method: 'DELETE'})
    expect(del.status).toBe(202)
    await custom.patchNamespacedCustomObjectStatus({...ORDERS, namespace: ns, name, body: {status: {latestConfigHash: null}}}, MERGE)
    const second = await rendered(ns, name, '1.0.0-aaaaaaaaaaaa', first.digest)
    expect(second.digest).not.toBe(first.digest)
    expect(second.preparation).not.toBe(first.preparation)
    const again = await preparationManifest(ns, name, second.digest)
    expect(again.yaml).toBe('apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: rr\n')
    expect(again.annotations['kokumi.dev/parent']).toBe(first.digest)
    await servedAt(name, second.digest)
  })
  it('hash.go after 0.14.0 (main, commit 5b113ca): an upgrade from 0.14.0 renders every Order once again, same manifest.yaml under a new digest, then no more', async () => {
    const ns = await createNamespace(kc, 'upgrade-sim')
    const name = 'upgrade-sim'
    await pushBundle(`ichor/${name}`, '1.0.0-bbbbbbbbbbbb', 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: up\n')
    await custom.createNamespacedCustomObject({...ORDERS, namespace: ns, body: order(ns, name, '1.0.0-bbbbbbbbbbbb', 'Disabled')})
    const first = await rendered(ns, name, '1.0.0-bbbbbbbbbbbb')
    const firstHash = (await get(ORDERS, ns, name))?.status?.latestConfigHash
    const apps = kc.makeApiClient(AppsV1Api)
    const setImage = (image: string) =>
      apps.patchNamespacedDeployment(
        {namespace: 'kokumi', name: 'kokumi-controller-manager', body: {spec: {template: {spec: {containers: [{name: 'manager', image}]}}}}},
        setHeaderOptions('Content-Type', 'application/strategic-merge-patch+json'),
      )
    try {
      await setImage('ghcr.io/kokumi-dev/kokumi:0.15.0')
      const second = await rendered(ns, name, '1.0.0-bbbbbbbbbbbb', first.digest)
      expect(second.preparation).not.toBe(first.preparation)
      const o = await get(ORDERS, ns, name)
      expect(o?.status?.latestConfigHash).not.toBe(firstHash)
      const again = await preparationManifest(ns, name, second.digest)
      expect(again.yaml).toBe((await preparationManifest(ns, name, first.digest)).yaml)
      expect(again.annotations['kokumi.dev/parent']).toBe(first.digest)
      const prep = await get(PREPARATIONS, ns, second.preparation)
      expect(prep?.spec?.configHash).toBe(o?.status?.latestConfigHash)
      // Once: the new hash is now the Order's, so further rounds render nothing.
      await settle()
      expect((await get(ORDERS, ns, name))?.status?.latestArtifactDigest).toBe(second.digest)
    } finally {
      await setImage('ghcr.io/kokumi-dev/kokumi:0.14.0')
    }
  })
})
