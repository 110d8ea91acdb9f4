import {mkdtempSync, readFileSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {Ajv} from 'ajv'
import {describe, expect, it} from 'vitest'
import {parse, parseAllDocuments} from 'yaml'
import {ValidationError} from '../../src/lib/errors/errors.js'
import {orderApiOfCrd, orderPromotion, shapeOrder} from '../../src/lib/stack/kokumi-api.js'
import {buildOrder, defaultAppProject, MANAGED_LABEL, repoCredsSecret} from '../../src/lib/stack/orders.js'
import {runCli} from '../support/run-cli.js'
import {UPSTREAM} from '../support/upstream.js'

const fixtureUrl = new URL('../fixtures/kokumi-0.17-order-crd.fixture.yaml', import.meta.url)

/**
 * The CRD's schema as the apiserver applies it: a field no `properties` names is pruned,
 * which for Ichor's objects means a typo silently vanishes; here it is an error instead.
 */
function structural(schema: any): any {
  if (Array.isArray(schema)) return schema.map(structural)
  if (typeof schema !== 'object' || schema === null) return schema
  const out: any = {}
  for (const [k, v] of Object.entries(schema))
    out[k] = k === 'properties' ? Object.fromEntries(Object.entries(v as object).map(([p, s]) => [p, structural(s)])) : structural(v)
  if (out.properties && out.additionalProperties === undefined && !out['x-kubernetes-preserve-unknown-fields']) out.additionalProperties = false
  return out
}

function orderValidator(crdPath: string | URL) {
  return crdValidator(parse(readFileSync(crdPath, 'utf8')), 'v1alpha1')
}

function crdValidator(crd: any, version: string) {
  const schema = structural(crd.spec.versions.find((v: any) => v.name === version).schema.openAPIV3Schema)
  // metadata is `type: object` in the CRD; the apiserver validates it itself.
  schema.properties.metadata = {type: 'object'}
  const ajv = new Ajv({strict: false, allErrors: true, validateFormats: false})
  return ajv.compile(schema)
}

/** The CEL rules of the Order CRD that matter here (ajv does not run CEL). */
function celRules(order: any): string[] {
  const errors: string[] = []
  const src = order.spec.source
  if (!!src === !!order.spec.menuRef) errors.push('exactly one of source or menuRef must be set')
  if (src && !!src.oci === !!src.pantryRef) errors.push('exactly one of oci or pantryRef must be set')
  if (src?.oci) {
    try {
      if (new URL(src.oci).protocol !== 'oci:') errors.push('must be a valid OCI URL')
    } catch {
      errors.push('must be a valid OCI URL')
    }
  }
  return errors
}

const repository = 'oci://kokumi-registry.kokumi.svc.cluster.local:5000/ichor/argocd'

describe('buildOrder', () => {
  it('builds the argocd Order in argocd and the kokumi Order in kokumi', () => {
    const argocd = buildOrder({component: 'argocd', repository, tag: '10.11.6-0123456789ab', promotion: 'Automatic'})
    expect(argocd).toEqual({
      apiVersion: 'delivery.kokumi.dev/v1alpha1',
      kind: 'Order',
      metadata: {name: 'argocd', namespace: 'argocd', labels: {[MANAGED_LABEL]: 'true'}},
      spec: {source: {oci: repository, version: '10.11.6-0123456789ab'}, promotion: {mode: 'Automatic'}},
    })
    const kokumi = buildOrder({
      component: 'kokumi',
      repository: 'kokumi-registry.kokumi.svc.cluster.local:5000/ichor/kokumi',
      tag: '0.17.0-abcdefabcdef',
      promotion: 'Manual',
    })
    expect(kokumi.metadata.namespace).toBe('kokumi')
    expect((kokumi.spec as any).source.oci).toBe('oci://kokumi-registry.kokumi.svc.cluster.local:5000/ichor/kokumi')
    expect((kokumi.spec as any).promotion).toEqual({mode: 'Manual'})
  })

  it.each(['Automatic', 'Manual'] as const)('validates against the 0.17 Order CRD fixture (promotion %s)', (promotion) => {
    const validate = orderValidator(fixtureUrl)
    const order = buildOrder({component: 'argocd', repository, tag: '10.11.6-0123456789ab', promotion})
    expect(validate(order), JSON.stringify(validate.errors)).toBe(true)
    expect(celRules(order)).toEqual([])
  })

  it('the fixture schema can fail: it refuses the 0.14 autoDeploy field and an unknown promotion mode', () => {
    const validate = orderValidator(fixtureUrl)
    const order: any = buildOrder({component: 'argocd', repository, tag: 't', promotion: 'Automatic'})
    expect(validate({...order, spec: {...order.spec, autoDeploy: 'Enabled'}})).toBe(false)
    expect(validate({...order, spec: {...order.spec, promotion: {mode: 'Sometimes'}}})).toBe(false)
  })

  it('the 0.14.0 CRD (upstream) does not know promotion, which is why the fixture exists', () => {
    const validate = orderValidator(`${UPSTREAM.kokumiCrdDir}/delivery.kokumi.dev_orders.yaml`)
    expect(validate(buildOrder({component: 'argocd', repository, tag: 't', promotion: 'Automatic'}))).toBe(false)
  })

  it.each([
    ['Automatic', 'Enabled'],
    ['Manual', 'Disabled'],
  ] as const)('shaped for the real 0.14.0 Order CRD (autoDeploy): promotion %s becomes autoDeploy %s and validates', (promotion, autoDeploy) => {
    const validate = orderValidator(`${UPSTREAM.kokumiCrdDir}/delivery.kokumi.dev_orders.yaml`)
    const order: any = shapeOrder(buildOrder({component: 'argocd', repository, tag: '10.11.6-0123456789ab', promotion}), {
      field: 'autoDeploy',
      apiVersion: 'delivery.kokumi.dev/v1alpha1',
    })
    expect(order.spec).toEqual({source: {oci: repository, version: '10.11.6-0123456789ab'}, autoDeploy})
    expect(validate(order), JSON.stringify(validate.errors)).toBe(true)
    expect(celRules(order)).toEqual([])
    expect(orderPromotion(order.spec)).toBe(promotion)
  })

  it('shaped for the 0.17 fixture (promotion.mode) it is unchanged', () => {
    const order = buildOrder({component: 'kokumi', repository, tag: 't', promotion: 'Manual'})
    expect(shapeOrder(order, {field: 'promotion.mode', apiVersion: 'delivery.kokumi.dev/v1alpha1'})).toBe(order)
    expect(orderPromotion(order.spec)).toBe('Manual')
  })

  it('refuses a non-OCI repository, a bad tag or a bad promotion mode', () => {
    expect(() => buildOrder({component: 'argocd', repository: 'https://x/y', tag: 't', promotion: 'Automatic'})).toThrow(ValidationError)
    expect(() => buildOrder({component: 'argocd', repository, tag: 'a tag', promotion: 'Automatic'})).toThrow(/tag/)
    expect(() => buildOrder({component: 'argocd', repository, tag: 't', promotion: 'Auto' as any})).toThrow(/promotion/)
  })
})

describe('repoCredsSecret and defaultAppProject', () => {
  it('repo-creds: OCI over HTTP for the registry, no credential', () => {
    const s = repoCredsSecret('kokumi-registry.kokumi.svc.cluster.local:5000')
    expect(s.metadata).toMatchObject({namespace: 'argocd', labels: {'argocd.argoproj.io/secret-type': 'repo-creds'}})
    expect(s.stringData).toEqual({type: 'oci', url: 'oci://kokumi-registry.kokumi.svc.cluster.local:5000', insecureOCIForceHttp: 'true'})
    expect(JSON.stringify(s)).not.toMatch(/password|username|token/i)
  })

  it('default AppProject: as permissive as Argo CD’s own default', () => {
    expect(defaultAppProject()).toMatchObject({
      apiVersion: 'argoproj.io/v1alpha1',
      kind: 'AppProject',
      metadata: {name: 'default', namespace: 'argocd'},
      spec: {sourceRepos: ['*'], destinations: [{server: '*', namespace: '*'}], clusterResourceWhitelist: [{group: '*', kind: '*'}]},
    })
  })
})

describe('the offline dry run writes Orders in the shape of the Kokumi manifest it used', () => {
  it('Given the mirror (Kokumi 0.14.0), When init --dry-run --output-dir runs, Then every Order written has the served version of that CRD and validates against it', async () => {
    const out = join(mkdtempSync(join(tmpdir(), 'ichor-orders-')), 'out')
    try {
      const r = await runCli(
        [
          'init',
          '--dry-run',
          '--output-dir',
          out,
          '--cluster-name',
          'homelab',
          '--endpoint',
          'https://192.0.2.10:6443',
          '--control-plane',
          '192.0.2.10',
          '--mirror',
          UPSTREAM.dir,
          '--json',
        ],
        {env: {...process.env, ICHOR_MIRROR: ''}},
      )
      expect(r.code, r.stderr).toBe(0)
      // The CRD comes from the artifact the run names as used, not from a path this test assumes.
      const kokumi = (JSON.parse(r.stdout) as {assets: {id: string; path: string}[]}).assets.find((a) => a.id === 'kokumi')!
      const crd = parseAllDocuments(readFileSync(kokumi.path, 'utf8'))
        .map((d) => d.toJS() as any)
        .find((o) => o?.kind === 'CustomResourceDefinition' && o.metadata.name === 'orders.delivery.kokumi.dev')
      const served = crd.spec.versions.find((v: any) => v.served && v.storage)
      const validate = crdValidator(crd, served.name)
      for (const component of ['argocd', 'kokumi']) {
        const order: any = parse(readFileSync(join(out, 'orders', `${component}.yaml`), 'utf8'))
        expect(order.apiVersion).toBe(`${crd.spec.group}/${served.name}`)
        expect(order.kind).toBe(crd.spec.names.kind)
        expect(validate(order), `${component}: ${JSON.stringify(validate.errors)}`).toBe(true)
        expect(celRules(order)).toEqual([])
        expect(orderPromotion(order.spec)).toBe('Automatic')
      }
    } finally {
      rmSync(join(out, '..'), {recursive: true, force: true})
    }
  }, 120_000)

  it('the shape comes from the CRD: its served storage version and promotion field (0.14.0 upstream, 0.17 fixture)', () => {
    expect(orderApiOfCrd(parse(readFileSync(`${UPSTREAM.kokumiCrdDir}/delivery.kokumi.dev_orders.yaml`, 'utf8')))).toEqual({
      field: 'autoDeploy',
      apiVersion: 'delivery.kokumi.dev/v1alpha1',
    })
    const fixture = parse(readFileSync(fixtureUrl, 'utf8'))
    expect(orderApiOfCrd(fixture)).toEqual({field: 'promotion.mode', apiVersion: 'delivery.kokumi.dev/v1alpha1'})
    // A later version served and stored: the Orders follow it
    const v1beta1 = {
      ...fixture,
      spec: {
        ...fixture.spec,
        versions: [
          {...fixture.spec.versions[0], storage: false},
          {...fixture.spec.versions[0], name: 'v1beta1'},
        ],
      },
    }
    expect(orderApiOfCrd(v1beta1)?.apiVersion).toBe('delivery.kokumi.dev/v1beta1')
    // Neither field: none ichor supports
    const bare = {
      ...fixture,
      spec: {...fixture.spec, versions: [{name: 'v1alpha1', served: true, storage: true, schema: {openAPIV3Schema: {properties: {spec: {properties: {}}}}}}]},
    }
    expect(orderApiOfCrd(bare)).toBeUndefined()
  })
})
