// Server-side apply, create-if-absent, get/delete and CRD handling against the real
// kube-apiserver of the harness, with the real Kokumi install manifest.
import {readFileSync} from 'node:fs'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {parseAllDocuments} from 'yaml'
import {startControlPlane, type ControlPlane} from '../harness/apiserver.js'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {createIfAbsent, FieldConflictError, serverSideApply} from '../../src/lib/kube/apply.js'
import {deleteObject, getObject, KindNotServedError, type KubeObject} from '../../src/lib/kube/objects.js'
import {waitForCrdEstablished, WaitTimeoutError} from '../../src/lib/kube/wait.js'
import {IchorError} from '../../src/lib/errors/errors.js'
import {readKokumiOrderApi, shapeOrder} from '../../src/lib/stack/kokumi-api.js'
import {buildOrder} from '../../src/lib/stack/orders.js'
import {KOKUMI_017_ORDER_CRD_FIXTURE} from '../harness/fixtures.js'
import {UPSTREAM} from '../support/upstream.js'

let cp: ControlPlane
let kube: Kube

beforeAll(async () => {
  cp = await startControlPlane()
  kube = await connectKube({kubeconfig: cp.kubeconfigPath})
})
afterAll(async () => {
  await cp?.stop()
})

async function namespace(name: string): Promise<string> {
  await serverSideApply(kube, [{apiVersion: 'v1', kind: 'Namespace', metadata: {name}}])
  return name
}

function configMap(ns: string, data: Record<string, string>): KubeObject {
  return {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'settings', namespace: ns}, data}
}

describe('serverSideApply', () => {
  it('reports created, then unchanged (resourceVersion kept), then configured', async () => {
    const ns = await namespace('apply-cycle')
    const [created] = await serverSideApply(kube, [configMap(ns, {a: '1'})])
    expect(created).toEqual({apiVersion: 'v1', kind: 'ConfigMap', namespace: ns, name: 'settings', result: 'created'})
    const v1 = (await getObject(kube, {apiVersion: 'v1', kind: 'ConfigMap', namespace: ns, name: 'settings'}))!.metadata.resourceVersion

    const [again] = await serverSideApply(kube, [configMap(ns, {a: '1'})])
    expect(again!.result).toBe('unchanged')
    const v2 = (await getObject(kube, {apiVersion: 'v1', kind: 'ConfigMap', namespace: ns, name: 'settings'}))!.metadata.resourceVersion
    expect(v2).toBe(v1)

    const [changed] = await serverSideApply(kube, [configMap(ns, {a: '2'})])
    expect(changed!.result).toBe('configured')
    const stored = await getObject<KubeObject & {data: Record<string, string>}>(kube, {apiVersion: 'v1', kind: 'ConfigMap', namespace: ns, name: 'settings'})
    expect(stored!.data).toEqual({a: '2'})
    const managers = (stored!.metadata.managedFields as Array<{manager: string; operation: string}>).map((m) => `${m.manager}/${m.operation}`)
    expect(managers).toEqual(['ichor-bootstrap/Apply'])
  })

  it('fills in the namespace option for namespaced objects and ignores it for cluster-scoped ones', async () => {
    const ns = await namespace('apply-default-ns')
    const results = await serverSideApply(
      kube,
      [
        {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'no-ns'}, data: {}},
        {apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: {name: 'ichor-test-reader'}, rules: []},
      ],
      {namespace: ns},
    )
    expect(results.map((r) => [r.kind, r.namespace, r.result])).toEqual([
      ['ConfigMap', ns, 'created'],
      ['ClusterRole', undefined, 'created'],
    ])
    expect(await getObject(kube, {apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', name: 'ichor-test-reader'})).toBeDefined()
  })

  it('refuses a namespaced object without a namespace', async () => {
    await expect(serverSideApply(kube, [{apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'x'}}])).rejects.toThrow(/ConfigMap x has no namespace/)
  })

  it('dry run reports what would change and persists nothing', async () => {
    const ns = await namespace('apply-dry-run')
    const [wouldCreate] = await serverSideApply(kube, [configMap(ns, {a: '1'})], {dryRun: true})
    expect(wouldCreate!.result).toBe('created')
    expect(await getObject(kube, {apiVersion: 'v1', kind: 'ConfigMap', namespace: ns, name: 'settings'})).toBeUndefined()

    await serverSideApply(kube, [configMap(ns, {a: '1'})])
    expect((await serverSideApply(kube, [configMap(ns, {a: '1'})], {dryRun: true}))[0]!.result).toBe('unchanged')
    expect((await serverSideApply(kube, [configMap(ns, {a: '9'})], {dryRun: true}))[0]!.result).toBe('configured')
    const stored = await getObject<KubeObject & {data: Record<string, string>}>(kube, {apiVersion: 'v1', kind: 'ConfigMap', namespace: ns, name: 'settings'})
    expect(stored!.data).toEqual({a: '1'})
  })

  it('reports a field owned by another manager as a conflict, and takes it only with force', async () => {
    const ns = await namespace('apply-conflict')
    await serverSideApply(kube, [configMap(ns, {a: '1', b: 'x'})])
    // Someone else changes .data.a with their own field manager (as `kubectl edit` would).
    await kube.request('PATCH', `/api/v1/namespaces/${ns}/configmaps/settings`, {
      body: {data: {a: 'edited'}},
      contentType: 'application/merge-patch+json',
      query: {fieldManager: 'kubectl-edit'},
    })

    const error = await serverSideApply(kube, [configMap(ns, {a: '1', b: 'x'})]).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(FieldConflictError)
    const conflict = error as FieldConflictError
    expect(conflict.object).toBe(`ConfigMap ${ns}/settings`)
    expect(conflict.conflicts).toEqual([expect.objectContaining({field: '.data.a', manager: 'kubectl-edit'})])
    expect(conflict.message).toContain(`ConfigMap ${ns}/settings`)
    expect(conflict.message).toContain('.data.a: set by "kubectl-edit"')
    expect(conflict.hint).toContain('--force-conflicts')
    // Nothing was written by the refused apply.
    const kept = await getObject<KubeObject & {data: Record<string, string>}>(kube, {apiVersion: 'v1', kind: 'ConfigMap', namespace: ns, name: 'settings'})
    expect(kept!.data.a).toBe('edited')

    const [forced] = await serverSideApply(kube, [configMap(ns, {a: '1', b: 'x'})], {force: true})
    expect(forced!.result).toBe('configured')
    const restored = await getObject<KubeObject & {data: Record<string, string>}>(kube, {apiVersion: 'v1', kind: 'ConfigMap', namespace: ns, name: 'settings'})
    expect(restored!.data).toEqual({a: '1', b: 'x'})
  })

  it('applies a CRD and an object of its kind in one batch, keeping x-kubernetes-* schema keys', async () => {
    const crd: KubeObject = {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: {name: 'widgets.test.ichor.dev'},
      spec: {
        group: 'test.ichor.dev',
        scope: 'Cluster',
        names: {kind: 'Widget', plural: 'widgets', singular: 'widget', listKind: 'WidgetList'},
        versions: [
          {
            name: 'v1',
            served: true,
            storage: true,
            schema: {
              openAPIV3Schema: {
                type: 'object',
                properties: {spec: {type: 'object', 'x-kubernetes-preserve-unknown-fields': true}},
              },
            },
          },
        ],
      },
    }
    const widget: KubeObject = {apiVersion: 'test.ichor.dev/v1', kind: 'Widget', metadata: {name: 'w1'}, spec: {free: {form: true}}}

    // A dry run cannot create the CRD, so the Widget is reported as would-be-created.
    const dry = await serverSideApply(kube, [crd, widget], {dryRun: true})
    expect(dry.map((r) => r.result)).toEqual(['created', 'created'])
    expect(await getObject(kube, {apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', name: 'widgets.test.ichor.dev'})).toBeUndefined()

    const results = await serverSideApply(kube, [crd, widget])
    expect(results.map((r) => `${r.kind}/${r.name}=${r.result}`)).toEqual(['CustomResourceDefinition/widgets.test.ichor.dev=created', 'Widget/w1=created'])
    const stored = await getObject<KubeObject & {spec: {free: unknown}}>(kube, {apiVersion: 'test.ichor.dev/v1', kind: 'Widget', name: 'w1'})
    expect(stored!.spec.free).toEqual({form: true})
    const storedCrd = await getObject<KubeObject & {spec: {versions: Array<{schema: {openAPIV3Schema: {properties: {spec: Record<string, unknown>}}}}>}}>(
      kube,
      {apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', name: 'widgets.test.ichor.dev'},
    )
    expect(storedCrd!.spec.versions[0]!.schema.openAPIV3Schema.properties.spec['x-kubernetes-preserve-unknown-fields']).toBe(true)

    expect((await serverSideApply(kube, [crd, widget])).map((r) => r.result)).toEqual(['unchanged', 'unchanged'])
  })

  it('applies the real Kokumi install manifest (CRDs, RBAC, workloads) and then finds nothing to change', async () => {
    const objects = parseAllDocuments(readFileSync(UPSTREAM.kokumiManifest, 'utf8'))
      .map((d) => d.toJSON() as KubeObject | null)
      .filter((o): o is KubeObject => o !== null)
    expect(objects.length).toBeGreaterThan(40)
    const first = await serverSideApply(kube, objects)
    expect(first.every((r) => r.result === 'created')).toBe(true)
    expect(first.filter((r) => r.kind === 'CustomResourceDefinition')).toHaveLength(6)
    // kube-apiserver (seen on 1.36.3) rewrites a PersistentVolumeClaim once on the first
    // update after its creation even when nothing changed, so its resourceVersion moves once.
    const rerun = await serverSideApply(kube, objects)
    expect(rerun.filter((r) => r.result !== 'unchanged' && r.kind !== 'PersistentVolumeClaim')).toEqual([])
    const third = await serverSideApply(kube, objects)
    expect(third.filter((r) => r.result !== 'unchanged')).toEqual([])
    // Its CRDs are served: an Order can be listed.
    await expect(kube.request('GET', '/apis/delivery.kokumi.dev/v1alpha1/namespaces/kokumi/orders')).resolves.toBeDefined()
  })

  it('names the kind when the API server does not serve it', async () => {
    const error = await serverSideApply(kube, [{apiVersion: 'nope.ichor.dev/v1', kind: 'Gadget', metadata: {name: 'g'}}]).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(KindNotServedError)
    expect((error as Error).message).toContain(`does not serve Gadget in nope.ichor.dev/v1`)
  })
})

describe('createIfAbsent', () => {
  it('creates once and never overwrites the first value', async () => {
    const ns = await namespace('create-once')
    const secret = (password: string): KubeObject => ({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {name: 'ichor-kokumi-admin', namespace: ns},
      type: 'Opaque',
      stringData: {password},
    })
    expect(await createIfAbsent(kube, secret('first'))).toBe('created')
    const before = await getObject(kube, {apiVersion: 'v1', kind: 'Secret', namespace: ns, name: 'ichor-kokumi-admin'})
    expect(await createIfAbsent(kube, secret('second'))).toBe('exists')
    const after = await getObject<KubeObject & {data: Record<string, string>}>(kube, {
      apiVersion: 'v1',
      kind: 'Secret',
      namespace: ns,
      name: 'ichor-kokumi-admin',
    })
    expect(Buffer.from(after!.data.password!, 'base64').toString()).toBe('first')
    expect(after!.metadata.resourceVersion).toBe(before!.metadata.resourceVersion)
  })

  it('says which object could not be created', async () => {
    await expect(
      createIfAbsent(kube, {apiVersion: 'v1', kind: 'Secret', metadata: {name: 's', namespace: 'no-such-namespace'}, stringData: {}}),
    ).rejects.toThrow(/cannot create Secret no-such-namespace\/s: namespaces "no-such-namespace" not found/)
  })
})

describe('getObject and deleteObject', () => {
  it('reads, deletes, and reports an absent object', async () => {
    const ns = await namespace('get-delete')
    await serverSideApply(kube, [configMap(ns, {k: 'v'})])
    const ref = {apiVersion: 'v1', kind: 'ConfigMap', namespace: ns, name: 'settings'}
    expect((await getObject(kube, ref))!.metadata.name).toBe('settings')
    expect(await deleteObject(kube, ref)).toBe('deleted')
    expect(await getObject(kube, ref)).toBeUndefined()
    expect(await deleteObject(kube, ref)).toBe('absent')
    expect(await getObject(kube, {apiVersion: 'nope.ichor.dev/v1', kind: 'Gadget', name: 'g'})).toBeUndefined()
  })
})

describe('waitForCrdEstablished', () => {
  it('returns for an established CRD and times out naming a missing one', async () => {
    await serverSideApply(kube, [
      {
        apiVersion: 'apiextensions.k8s.io/v1',
        kind: 'CustomResourceDefinition',
        metadata: {name: 'gizmos.test.ichor.dev'},
        spec: {
          group: 'test.ichor.dev',
          scope: 'Namespaced',
          names: {kind: 'Gizmo', plural: 'gizmos'},
          versions: [{name: 'v1', served: true, storage: true, schema: {openAPIV3Schema: {type: 'object'}}}],
        },
      },
    ])
    const progress: string[] = []
    await waitForCrdEstablished(kube, 'gizmos.test.ichor.dev', {onProgress: (s) => progress.push(s)})
    expect(progress.at(-1)).toBe('Established')

    const error = await waitForCrdEstablished(kube, 'missing.test.ichor.dev', {timeoutMs: 1200, intervalMs: 200}).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(WaitTimeoutError)
    expect((error as Error).message).toBe(
      'timed out after 1 s waiting for CustomResourceDefinition missing.test.ichor.dev to be Established; last seen: not found',
    )
  })
})

describe('strict field validation (fieldValidation=Strict on every apply and create)', () => {
  it('an unknown field in an applied object is an error naming the field, nothing is written', async () => {
    const ns = await namespace('strict-apply')
    const bad = {...configMap(ns, {a: '1'}), datta: {b: '2'}} as KubeObject
    const error = (await serverSideApply(kube, [bad]).catch((e: unknown) => e)) as Error
    expect(error).toBeInstanceOf(Error)
    // Server-side apply builds a typed patch, so it names the field with or without Strict.
    expect(error!.message).toMatch(/\.datta: field not declared in schema/)
    expect(await getObject(kube, {apiVersion: 'v1', kind: 'ConfigMap', namespace: ns, name: 'settings'})).toBeUndefined()
  })

  it('a created object with an unknown field is refused too', async () => {
    const ns = await namespace('strict-create')
    const bad = {apiVersion: 'v1', kind: 'Secret', metadata: {name: 's', namespace: ns}, stringData: {a: 'b'}, tpye: 'Opaque'} as KubeObject
    await expect(createIfAbsent(kube, bad)).rejects.toThrow(/unknown field "tpye"/)
    expect(await getObject(kube, {apiVersion: 'v1', kind: 'Secret', namespace: ns, name: 's'})).toBeUndefined()
  })
})

describe('readKokumiOrderApi: the live Order CRD decides the Order shape', () => {
  const crdOf = (path: string) =>
    parseAllDocuments(readFileSync(path, 'utf8'))
      .map((d) => d.toJS() as KubeObject)
      .find((o) => o?.kind === 'CustomResourceDefinition')!
  const applyCrd = async (crd: KubeObject) => {
    await serverSideApply(kube, [crd], {force: true})
  }

  it('the real 0.14.0 CRD has spec.autoDeploy; the 0.17 fixture spec.promotion.mode; an Order of each shape is accepted', async () => {
    await applyCrd(crdOf(`${UPSTREAM.kokumiCrdDir}/delivery.kokumi.dev_orders.yaml`))
    expect(await readKokumiOrderApi(kube)).toEqual({field: 'autoDeploy', apiVersion: 'delivery.kokumi.dev/v1alpha1'})
    const ns = await namespace('argocd')
    const order = buildOrder({
      component: 'argocd',
      repository: 'oci://kokumi-registry.kokumi.svc.cluster.local:5000/ichor/argocd',
      tag: '10.1.1-0123456789ab',
      promotion: 'Automatic',
    })
    // The ADR's shape is refused by the real 0.14.0 API (strict validation names the field).
    await expect(serverSideApply(kube, [order])).rejects.toThrow(/\.spec\.promotion: field not declared in schema/)
    await serverSideApply(kube, [shapeOrder(order, {field: 'autoDeploy', apiVersion: 'delivery.kokumi.dev/v1alpha1'})])
    expect(
      (await getObject<KubeObject & {spec: unknown}>(kube, {apiVersion: 'delivery.kokumi.dev/v1alpha1', kind: 'Order', namespace: ns, name: 'argocd'}))!.spec,
    ).toMatchObject({autoDeploy: 'Enabled'})
    await deleteObject(kube, {apiVersion: 'delivery.kokumi.dev/v1alpha1', kind: 'Order', namespace: ns, name: 'argocd'})

    await applyCrd(crdOf(KOKUMI_017_ORDER_CRD_FIXTURE))
    expect(await readKokumiOrderApi(kube)).toEqual({field: 'promotion.mode', apiVersion: 'delivery.kokumi.dev/v1alpha1'})
    await serverSideApply(kube, [shapeOrder(order, {field: 'promotion.mode', apiVersion: 'delivery.kokumi.dev/v1alpha1'})])
  })

  it('a CRD with neither field is an error naming the installed Kokumi version and what ichor supports', async () => {
    const crd = crdOf(`${UPSTREAM.kokumiCrdDir}/delivery.kokumi.dev_orders.yaml`) as KubeObject & {spec: any}
    const spec = crd.spec.versions[0].schema.openAPIV3Schema.properties.spec
    delete spec.properties.autoDeploy
    await applyCrd(crd)
    await namespace('kokumi')
    // (An earlier test applied the real manifest: its Deployment names 0.14.0.)
    await deleteObject(kube, {apiVersion: 'apps/v1', kind: 'Deployment', name: 'kokumi-controller-manager', namespace: 'kokumi'})
    await serverSideApply(kube, [
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: {name: 'kokumi-controller-manager', namespace: 'kokumi'},
        spec: {
          selector: {matchLabels: {a: 'b'}},
          template: {metadata: {labels: {a: 'b'}}, spec: {containers: [{name: 'manager', image: 'ghcr.io/kokumi-dev/kokumi:0.99.0'}]}},
        },
      } as KubeObject,
    ])
    const error = (await readKokumiOrderApi(kube).catch((e: unknown) => e)) as IchorError
    expect(error).toBeInstanceOf(IchorError)
    expect(error.message).toMatch(/installed Kokumi \(0\.99\.0\).*neither spec\.autoDeploy nor spec\.promotion\.mode/)
    expect(error.hint).toMatch(/spec\.autoDeploy \(Kokumi 0\.14\.0 and later main\) or spec\.promotion\.mode \(Kokumi 0\.17\)/)
  })
})
