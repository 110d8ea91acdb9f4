// The Kokumi/Argo CD status simulator and the Cilium operator simulator, on the real
// harness apiserver and the real distribution registry, with the real Argo CD CRDs (from the
// upstream chart, rendered by the real helm) and the Kokumi 0.17 manifest test fixture (its
// CRDs and its controller Deployment, whose image names the version the simulator follows).
import {ApiextensionsV1Api, AppsV1Api, CustomObjectsApi, setHeaderOptions, type KubeConfig, type V1CustomResourceDefinition} from '@kubernetes/client-node'
import {mkdtempSync, readFileSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {parseAllDocuments} from 'yaml'
import {helmTemplate} from '../../src/lib/helm/template.js'
import {serverSideApply} from '../../src/lib/kube/apply.js'
import {connectKube} from '../../src/lib/kube/client.js'
import type {KubeObject} from '../../src/lib/kube/objects.js'
import {approveLatestPreparation, readPromotion} from '../../src/lib/stack/promote.js'
import {buildBundle} from '../../src/lib/oci/bundle.js'
import {OciClient} from '../../src/lib/oci/client.js'
import {publishBundle} from '../../src/lib/oci/publish.js'
import {policiesFor} from '../../src/lib/stack/policies.js'
import {startControlPlane, type ControlPlane} from '../harness/apiserver.js'
import {ciliumPolicyCrds, createCrdRaw, installCiliumCrdsSimulated, startCiliumOperatorSimulator} from '../harness/cilium-simulator.js'
import {KOKUMI_017_MANIFEST_FIXTURE_NAME, kokumi017ManifestFixture, kokumi017OrderCrdFixture, ORDER_CRD_NAME} from '../harness/fixtures.js'
import {createNamespace, loadKubeConfig, waitForCrdEstablished, waitUntil} from '../harness/kube.js'
import {startRegistry, type RunningRegistry} from '../harness/registry.js'
import {ALLOWED_ORDER_ANNOTATION, KOKUMI_REGISTRY_HOST, startStackSimulator, type StackSimulator} from '../harness/stack-simulator.js'
import {UPSTREAM} from '../support/upstream.js'

const ORDERS = {group: 'delivery.kokumi.dev', version: 'v1alpha1', plural: 'orders'}
const APPLICATIONS = {group: 'argoproj.io', version: 'v1alpha1', plural: 'applications'}

let cp: ControlPlane
let registry: RunningRegistry
let kc: KubeConfig
let custom: CustomObjectsApi
let sim: StackSimulator
let fixtureDir: string

type Obj = {
  metadata: {name: string; namespace?: string; annotations?: Record<string, string>; labels?: Record<string, string>; resourceVersion?: string}
  spec?: any
  status?: any
}

beforeAll(async () => {
  fixtureDir = mkdtempSync(join(tmpdir(), 'ichor-sim-fixture-'))
  ;[cp, registry] = await Promise.all([startControlPlane(), startRegistry()])
  kc = loadKubeConfig(cp.kubeconfigPath)
  custom = kc.makeApiClient(CustomObjectsApi)

  // Argo CD's CRDs as the real chart renders them (they are templates in this chart).
  const render = await helmTemplate({chartPath: UPSTREAM.argocdChart, releaseName: 'argocd', namespace: 'argocd', values: {}, includeCrds: true})
  const argoCrds = parseAllDocuments(render)
    .map((d) => d.toJS() as V1CustomResourceDefinition | null)
    .filter((o): o is V1CustomResourceDefinition => o?.kind === 'CustomResourceDefinition')
  expect(argoCrds.map((c) => c.metadata!.name).sort()).toEqual(['applications.argoproj.io', 'applicationsets.argoproj.io', 'appprojects.argoproj.io'])
  // The Kokumi CRDs (Order from the 0.17 fixture) and its controller Deployment from the manifest fixture.
  const kokumiDocs = parseAllDocuments(readFileSync(kokumi017ManifestFixture(fixtureDir), 'utf8')).map((d) => d.toJS() as any)
  const kokumiCrds = kokumiDocs.filter(
    (o): o is V1CustomResourceDefinition => o?.kind === 'CustomResourceDefinition' && o.metadata?.name.endsWith('.delivery.kokumi.dev'),
  )
  expect(kokumiCrds.map((c) => c.metadata!.name)).toContain(ORDER_CRD_NAME)
  for (const crd of [...argoCrds, ...kokumiCrds]) await createCrdRaw(kc, crd)
  for (const crd of [...argoCrds, ...kokumiCrds]) await waitForCrdEstablished(kc, crd.metadata!.name!)
  await createNamespace(kc, 'argocd')
  await createNamespace(kc, 'kokumi')
  const controller = kokumiDocs.find((o) => o?.kind === 'Deployment' && o.metadata?.name === 'kokumi-controller-manager')
  await kc.makeApiClient(AppsV1Api).createNamespacedDeployment({namespace: 'kokumi', body: controller})

  // No Argo CD workloads on this bare control plane: its controller is played as running.
  sim = startStackSimulator({kubeconfigPath: cp.kubeconfigPath, registryEndpoint: registry.endpoint, intervalMs: 100, applicationController: 'assumed'})
})

afterAll(async () => {
  await sim?.stop()
  await Promise.all([cp?.stop(), registry?.stop()])
  if (fixtureDir) rmSync(fixtureDir, {recursive: true, force: true})
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

function order(namespace: string, name: string, component: string, version: string, mode: 'Automatic' | 'Manual') {
  return {
    apiVersion: 'delivery.kokumi.dev/v1alpha1',
    kind: 'Order',
    metadata: {name, namespace},
    spec: {source: {oci: `oci://${KOKUMI_REGISTRY_HOST}/ichor/${component}`, version}, promotion: {mode}},
  }
}

async function getOrder(namespace: string, name: string): Promise<Obj> {
  return (await custom.getNamespacedCustomObject({...ORDERS, namespace, name})) as Obj
}

async function getApplication(name: string): Promise<Obj | undefined> {
  try {
    return (await custom.getNamespacedCustomObject({...APPLICATIONS, namespace: 'argocd', name})) as Obj
  } catch (err) {
    if ((err as {code?: number}).code === 404) return undefined
    throw err
  }
}

async function setOrderVersion(namespace: string, name: string, version: string): Promise<void> {
  const current = await getOrder(namespace, name)
  await custom.replaceNamespacedCustomObject({
    ...ORDERS,
    namespace,
    name,
    body: {...current, spec: {...current.spec, source: {...current.spec.source, version}}},
  })
}

const readyCondition = (o: Obj) => (o.status?.conditions as any[] | undefined)?.find((c) => c.type === 'Ready')

/** The Preparation digest the Order's latest render produced (what its Application serves). */
function preparedDigest(namespace: string, name: string, notEqual?: string): Promise<string> {
  return waitUntil(`Order ${namespace}/${name} Ready with a Preparation`, async () => {
    const o = await getOrder(namespace, name)
    const digest = o.status?.latestArtifactDigest as string | undefined
    return readyCondition(o)?.status === 'True' && digest && digest !== notEqual && digest
  })
}

function waitHealthyAt(name: string, digest: string): Promise<Obj> {
  return waitUntil(
    `Application argocd/${name} Synced/Healthy at ${digest}`,
    async () => {
      const app = await getApplication(name)
      const s = app?.status
      return s?.sync?.status === 'Synced' && s?.health?.status === 'Healthy' && s?.sync?.revision === digest && app
    },
    {timeoutMs: 15_000},
  )
}

/** A bundle's manifest.yaml: Argo CD (and the simulator) syncs Kubernetes objects, so each bundle holds one. */
const configMap = (name: string, value: string): string => `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sim-${name}\ndata:\n  value: "${value}"\n`

describe('Kokumi 0.17 manifest test fixture', () => {
  it('is the real 0.14.0 install.yaml with only the Order CRD swapped for the 0.17 fixture and the images renamed 0.17.0', () => {
    const path = kokumi017ManifestFixture(fixtureDir)
    expect(path).toBe(join(fixtureDir, KOKUMI_017_MANIFEST_FIXTURE_NAME))
    const text = readFileSync(path, 'utf8')
    expect(text.startsWith('# TEST FIXTURE')).toBe(true)
    const fixture = parseAllDocuments(text).map((d) => d.toJS())
    const upstream = parseAllDocuments(readFileSync(UPSTREAM.kokumiManifest, 'utf8')).map((d) => d.toJS())
    expect(fixture).toHaveLength(upstream.length)
    const at = upstream.findIndex((o) => o.kind === 'CustomResourceDefinition' && o.metadata.name === ORDER_CRD_NAME)
    expect(at).toBeGreaterThan(-1)
    for (let i = 0; i < upstream.length; i++) {
      // Byte for byte but the image tags, which name the fixture's version.
      if (i !== at)
        expect(fixture[i]).toEqual(JSON.parse(JSON.stringify(upstream[i]).replaceAll('ghcr.io/kokumi-dev/kokumi:0.14.0', 'ghcr.io/kokumi-dev/kokumi:0.17.0')))
    }
    expect(text).not.toContain('ghcr.io/kokumi-dev/kokumi:0.14.0')
    const orderCrd = fixture[at]
    expect(orderCrd).toEqual(parseAllDocuments(kokumi017OrderCrdFixture())[0]!.toJS())
    const spec = orderCrd.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties
    expect(spec.promotion.properties.mode.enum).toEqual(['Automatic', 'Manual'])
    expect(spec.autoDeploy).toBeUndefined()
    expect(upstream[at].spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.autoDeploy).toBeDefined()
  })
})

describe('Kokumi/Argo CD status simulator', () => {
  it('simulator: an Order whose tag is not in the registry gets no Healthy Application and a failed Ready condition', async () => {
    const ns = await createNamespace(kc, 'sim-missing')
    await custom.createNamespacedCustomObject({...ORDERS, namespace: ns, body: order(ns, 'sim-missing', 'sim-missing', '1.0.0-000000000000', 'Automatic')})
    const failed = await waitUntil('Order Ready=False', async () => {
      const o = await getOrder(ns, 'sim-missing')
      return readyCondition(o)?.status === 'False' && o
    })
    expect(readyCondition(failed)).toMatchObject({reason: 'ProcessingFailed', observedGeneration: 1})
    expect(readyCondition(failed).message).toContain('ichor/sim-missing:1.0.0-000000000000')
    expect(failed.status.latestArtifactDigest).toBeUndefined()
    await sim.tick()
    await sim.tick()
    expect(await getApplication('sim-missing')).toBeUndefined()
  })

  it('simulator: pushing the tag creates the Application Kokumi would create, Synced/Healthy at the bundle digest; a version move follows', async () => {
    const ns = await createNamespace(kc, 'argocd-sim')
    const name = 'argocd-sim'
    await custom.createNamespacedCustomObject({...ORDERS, namespace: ns, body: order(ns, name, name, '10.1.1-aaaaaaaaaaaa', 'Automatic')})
    await waitUntil('Order Ready=False', async () => readyCondition(await getOrder(ns, name))?.status === 'False')
    await sim.tick()
    expect(await getApplication(name)).toBeUndefined()

    await pushBundle(`ichor/${name}`, '10.1.1-aaaaaaaaaaaa', 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: one\n')
    const first = await preparedDigest(ns, name)
    const app = await waitHealthyAt(name, first)
    expect(app.metadata.annotations).toEqual({[ALLOWED_ORDER_ANNOTATION]: name})
    expect(app.metadata.labels).toMatchObject({'delivery.kokumi.dev/order': name})
    expect(app.spec).toEqual({
      project: 'default',
      source: {repoURL: `oci://${KOKUMI_REGISTRY_HOST}/${ns}/${name}`, targetRevision: first, path: '.'},
      destination: {server: 'https://kubernetes.default.svc', namespace: ns},
      syncPolicy: {automated: {prune: true, selfHeal: true}, syncOptions: ['ServerSideApply=true']},
    })
    const ready = await getOrder(ns, name)
    expect(readyCondition(ready)).toMatchObject({status: 'True', reason: 'Ready', lastTransitionTime: '1970-01-01T00:00:00Z'})
    expect(ready.status).toMatchObject({latestArtifactDigest: first, latestPreparationName: `${name}-${first.slice(7, 19)}`, observedGeneration: 1})
    // Kokumi's objects between the Order and the Application: the Preparation and the Serving.
    const serving = (await custom.getNamespacedCustomObject({
      group: 'delivery.kokumi.dev',
      version: 'v1alpha1',
      plural: 'servings',
      namespace: ns,
      name,
    })) as Obj
    expect(serving.spec).toEqual({orderName: name, preparationName: `${name}-${first.slice(7, 19)}`, preparationPolicy: {type: 'Automatic'}})
    const preparation = (await custom.getNamespacedCustomObject({
      group: 'delivery.kokumi.dev',
      version: 'v1alpha1',
      plural: 'preparations',
      namespace: ns,
      name: `${name}-${first.slice(7, 19)}`,
    })) as Obj
    // Artifact.Signed is `json:"signed,omitempty"` (api/v1alpha1/preparation_types.go 85): false is not written.
    expect(preparation.spec.artifact).toEqual({ociRef: `oci://${KOKUMI_REGISTRY_HOST}/${ns}/${name}@${first}`, digest: first})

    // A rerun that changes nothing leaves the Application alone.
    const rv = app.metadata.resourceVersion
    await sim.tick()
    await sim.tick()
    expect((await getApplication(name))!.metadata.resourceVersion).toBe(rv)
    expect((await getOrder(ns, name)).metadata.resourceVersion).toBe(ready.metadata.resourceVersion)

    // The Order moves to a new tag: the Application follows to the new digest.
    await pushBundle(`ichor/${name}`, '10.1.1-bbbbbbbbbbbb', 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: two\n')
    await setOrderVersion(ns, name, '10.1.1-bbbbbbbbbbbb')
    const second = await preparedDigest(ns, name, first)
    const moved = await waitHealthyAt(name, second)
    expect(moved.spec.source.targetRevision).toBe(second)
    expect(sim.events.filter((e) => e.startsWith(`Application argocd/${name} `))).toEqual(
      expect.arrayContaining([`Application argocd/${name} created at ${first}`, `Application argocd/${name} updated to ${second}`]),
    )
    // Kokumi replaces the Application with a full Update (serving_controller.go 288-290): the
    // status Argo CD wrote at the first digest goes with it, so Argo CD starts from no revision.
    const appEvents = sim.events.filter((e) => e.startsWith(`Application argocd/${name} `))
    expect(appEvents.slice(appEvents.indexOf(`Application argocd/${name} updated to ${second}`) + 1)[0]).toMatch(
      new RegExp(`^Application argocd/${name} .* OutOfSync/Progressing$`),
    )
    const movedOrder = await getOrder(ns, name)
    expect(movedOrder.status).toMatchObject({latestArtifactDigest: second, observedGeneration: 2})
  })

  it('simulator: a version moved to a tag not yet pushed fails the Order and keeps serving the old digest', async () => {
    const ns = await createNamespace(kc, 'kokumi-sim')
    const name = 'kokumi-sim'
    await pushBundle(`ichor/${name}`, '0.17.0-aaaaaaaaaaaa', 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: k\n')
    await custom.createNamespacedCustomObject({...ORDERS, namespace: ns, body: order(ns, name, name, '0.17.0-aaaaaaaaaaaa', 'Automatic')})
    const first = await preparedDigest(ns, name)
    await waitHealthyAt(name, first)
    await setOrderVersion(ns, name, '0.17.0-cccccccccccc')
    await waitUntil('Order Ready=False', async () => readyCondition(await getOrder(ns, name))?.status === 'False')
    await sim.tick()
    const app = (await getApplication(name))!
    expect(app.spec.source.targetRevision).toBe(first)
    expect(app.status.sync.revision).toBe(first)
    expect((await getOrder(ns, name)).status.latestArtifactDigest).toBe(first)
  })

  it('simulator: Manual promotion serves nothing until promoted, then only what was promoted', async () => {
    const ns = await createNamespace(kc, 'manual-sim')
    const name = 'manual-sim'
    await pushBundle(`ichor/${name}`, '1.0.0-aaaaaaaaaaaa', configMap('a', '1'))
    await custom.createNamespacedCustomObject({...ORDERS, namespace: ns, body: order(ns, name, name, '1.0.0-aaaaaaaaaaaa', 'Manual')})
    const first = await preparedDigest(ns, name)
    await sim.tick()
    expect(await getApplication(name)).toBeUndefined()
    // What `ichor stack promote` does: the approve-deploy label on the latest Preparation.
    const kube = await connectKube({kubeconfig: cp.kubeconfigPath})
    expect(await readPromotion(kube, ns, name)).toEqual({preparation: `${name}-${first.slice(7, 19)}`, approved: false, served: false, otherApprovals: []})
    await approveLatestPreparation(kube, ns, name)
    await waitHealthyAt(name, first)
    expect(await readPromotion(kube, ns, name)).toEqual({preparation: `${name}-${first.slice(7, 19)}`, approved: true, served: true, otherApprovals: []})
    await pushBundle(`ichor/${name}`, '1.0.0-bbbbbbbbbbbb', configMap('a', '2'))
    await setOrderVersion(ns, name, '1.0.0-bbbbbbbbbbbb')
    await preparedDigest(ns, name, first)
    await sim.tick()
    expect((await getApplication(name))!.spec.source.targetRevision).toBe(first)
  })

  it('simulator: an Application not carrying the allowed-order annotation is never taken over', async () => {
    const ns = await createNamespace(kc, 'foreign-sim')
    const name = 'foreign-sim'
    const foreign = {
      apiVersion: 'argoproj.io/v1alpha1',
      kind: 'Application',
      metadata: {name, namespace: 'argocd'},
      spec: {
        project: 'default',
        source: {repoURL: 'https://example.invalid/repo.git', path: 'x'},
        destination: {server: 'https://kubernetes.default.svc', namespace: ns},
      },
    }
    await custom.createNamespacedCustomObject({...APPLICATIONS, namespace: 'argocd', body: foreign})
    await pushBundle(`ichor/${name}`, '1.0.0-aaaaaaaaaaaa', configMap('b', '1'))
    await custom.createNamespacedCustomObject({...ORDERS, namespace: ns, body: order(ns, name, name, '1.0.0-aaaaaaaaaaaa', 'Automatic')})
    await waitUntil('refusal', async () => sim.events.some((e) => e.includes(`${name} not updated: it lacks ${ALLOWED_ORDER_ANNOTATION}`)))
    const app = (await getApplication(name))!
    expect(app.spec.source).toEqual(foreign.spec.source)
    expect(app.status).toBeUndefined()
  })

  it('simulator: an Application whose Preparation digest vanished from the registry reads OutOfSync/Missing', async () => {
    const ns = await createNamespace(kc, 'gone-sim')
    const name = 'gone-sim'
    await pushBundle(`ichor/${name}`, '1.0.0-aaaaaaaaaaaa', configMap('c', '1'))
    await custom.createNamespacedCustomObject({...ORDERS, namespace: ns, body: order(ns, name, name, '1.0.0-aaaaaaaaaaaa', 'Automatic')})
    const digest = await preparedDigest(ns, name)
    await waitHealthyAt(name, digest)
    // Deleting the Preparation's manifest (the harness registry allows deletes) removes its tag and digest;
    // the Order's render inputs did not change, so Kokumi does not render again by itself.
    const del = await fetch(`${registry.endpoint}/v2/${ns}/${name}/manifests/${digest}`, {method: 'DELETE'})
    expect(del.status).toBe(202)
    const app = await waitUntil('OutOfSync/Missing', async () => {
      const a = await getApplication(name)
      return a?.status?.health?.status === 'Missing' && a
    })
    expect(app.status.sync.status).toBe('OutOfSync')
    // What Kokumi does after a failed render, and what `ichor stack sync` asks for: the config hash
    // cleared, the Order renders again and pushes a new Preparation (a new digest: oras stamps
    // org.opencontainers.image.created on every push), which the Automatic Serving serves.
    await custom.patchNamespacedCustomObjectStatus(
      {...ORDERS, namespace: ns, name, body: {status: {latestConfigHash: null}}},
      setHeaderOptions('Content-Type', 'application/merge-patch+json'),
    )
    const again = await preparedDigest(ns, name, digest)
    expect(again).not.toBe(digest)
    await waitHealthyAt(name, again)
  })
})

describe('Cilium operator simulator', () => {
  it("simulator: registers Cilium's real policy CRDs, after which ichor's CiliumNetworkPolicies apply and a policy Cilium's schema does not know is refused", async () => {
    const ciliumApi = {group: 'cilium.io', version: 'v2'}
    const policies = policiesFor('kokumi')
    expect(policies.length).toBeGreaterThan(0)
    // The kokumi namespace exists: the beforeAll put Kokumi's controller Deployment there.
    // Before the operator ran, the kind is not served.
    await expect(
      custom.createNamespacedCustomObject({...ciliumApi, plural: 'ciliumnetworkpolicies', namespace: 'kokumi', body: policies[0]!}),
    ).rejects.toMatchObject({code: 404})

    await installCiliumCrdsSimulated(cp.kubeconfigPath)
    await installCiliumCrdsSimulated(cp.kubeconfigPath) // Already there is fine.
    // Cilium's own CRDs: the operator's schema-version label and the full schema, not an open one.
    const cnp = await kc.makeApiClient(ApiextensionsV1Api).readCustomResourceDefinition({name: 'ciliumnetworkpolicies.cilium.io'})
    expect(cnp.metadata?.labels?.['io.cilium.k8s.crd.schema.version']).toBe('1.31.11')
    const schema = cnp.spec.versions[0]!.schema!.openAPIV3Schema!
    expect(schema.properties?.spec?.properties?.endpointSelector).toBeDefined()
    expect(schema.properties?.spec?.properties?.ingress?.items?.properties?.fromEndpoints).toBeDefined()
    expect(schema.x_kubernetes_preserve_unknown_fields).not.toBe(true)

    // Applied the way ichor applies them (server-side apply, fieldValidation=Strict).
    const kube = await connectKube({kubeconfig: cp.kubeconfigPath})
    await serverSideApply(kube, policies)
    const stored = (await custom.listNamespacedCustomObject({...ciliumApi, plural: 'ciliumnetworkpolicies', namespace: 'kokumi'})) as {items: Obj[]}
    expect(stored.items.map((p) => p.metadata.name).sort()).toEqual(policies.map((p) => p.metadata.name).sort())
    // Nothing ichor wrote was pruned by the schema.
    for (const policy of policies as unknown as (Obj & {specs?: unknown})[]) {
      const read = stored.items.find((p) => p.metadata.name === policy.metadata.name)! as Obj & {specs?: unknown}
      expect(read.spec ?? read.specs).toEqual(policy.spec ?? policy.specs)
    }

    // A field Cilium's schema does not know (a typo of toPorts) is refused by name, and an
    // invalid value of a known field by Cilium's enum; nothing is stored.
    const policy = (name: string, egress: unknown): KubeObject =>
      ({apiVersion: 'cilium.io/v2', kind: 'CiliumNetworkPolicy', metadata: {name, namespace: 'kokumi'}, spec: {endpointSelector: {}, egress}}) as KubeObject
    await expect(serverSideApply(kube, [policy('typo', [{toPort: [{ports: [{port: '53'}]}]}])])).rejects.toThrow(
      /\.spec\.egress\[0\]\.toPort: field not declared in schema/,
    )
    await expect(serverSideApply(kube, [policy('bad-protocol', [{toPorts: [{ports: [{port: '53', protocol: 'DNS'}]}]}])])).rejects.toThrow(
      /protocol: Unsupported value: "DNS"/,
    )
    const names = ((await custom.listNamespacedCustomObject({...ciliumApi, plural: 'ciliumnetworkpolicies', namespace: 'kokumi'})) as {items: Obj[]}).items.map(
      (p) => p.metadata.name,
    )
    expect(names).not.toContain('typo')
    expect(names).not.toContain('bad-protocol')

    // Cilium's schema wants at least one rule list: a bare selector, which the open schema took, is refused.
    const ccnp = (spec: object) => ({apiVersion: 'cilium.io/v2', kind: 'CiliumClusterwideNetworkPolicy', metadata: {name: 'sim-ccnp'}, spec}) as KubeObject
    await expect(serverSideApply(kube, [ccnp({endpointSelector: {}})])).rejects.toThrow(/must validate at least one schema \(anyOf\)/)
    await serverSideApply(kube, [ccnp({endpointSelector: {}, ingress: [{fromEntities: ['cluster']}]})])
  })

  it('simulator: the operator simulator registers the CRDs once kube-system/cilium-operator exists', async () => {
    // Its own apiserver: the CRDs must not exist yet.
    const own = await startControlPlane()
    try {
      const ownKc = loadKubeConfig(own.kubeconfigPath)
      const operator = startCiliumOperatorSimulator({kubeconfigPath: own.kubeconfigPath, intervalMs: 50})
      let done = false
      void operator.installed.then(() => (done = true))
      await new Promise((r) => setTimeout(r, 300))
      expect(done).toBe(false)
      await ownKc.makeApiClient(AppsV1Api).createNamespacedDeployment({
        namespace: 'kube-system',
        body: {
          metadata: {name: 'cilium-operator'},
          spec: {
            selector: {matchLabels: {app: 'cilium-operator'}},
            template: {
              metadata: {labels: {app: 'cilium-operator'}},
              spec: {containers: [{name: 'operator', image: 'quay.io/cilium/operator-generic:v1.18.0'}]},
            },
          },
        },
      })
      await operator.installed
      await operator.stop()
      const ext = ownKc.makeApiClient(ApiextensionsV1Api)
      for (const crd of ciliumPolicyCrds()) {
        const read = await ext.readCustomResourceDefinition({name: crd.metadata.name})
        expect(read.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')).toBe(true)
      }
    } finally {
      await own.stop()
    }
  })
})
