// What `cni upgrade` refuses or warns about among the live Cilium objects, per target minor
// (src/lib/cilium/removed-apis.ts): the rules on plain objects as the API server lists them,
// and the table checked against the real CRDs of Cilium 1.18.0, 1.19.6 and 1.20.0 (the
// pinned Go modules the operator simulator registers from), so a rule cannot drift from upstream.
import {describe, expect, it} from 'vitest'
import type {KubeObject} from '../../src/lib/kube/objects.js'
import {findRemovedApis, kindsToList, minorsCrossed, type LiveObjects} from '../../src/lib/cilium/removed-apis.js'
import {ciliumCrd, ciliumCrdNamesFor} from '../harness/cilium-simulator.js'

const obj = (apiVersion: string, kind: string, name: string, rest: Partial<KubeObject> & {namespace?: string; meta?: object} = {}): KubeObject => {
  const {namespace, meta, ...body} = rest
  return {apiVersion, kind, metadata: {name, ...(namespace ? {namespace} : {}), ...meta}, ...body}
}
/** The managedFields entry the API server keeps for a client that wrote the object through `apiVersion`. */
const managedBy = (apiVersion: string, manager: string) => ({meta: {managedFields: [{apiVersion, manager, operation: 'Apply'}]}})
const live = (...objects: KubeObject[]): LiveObjects => {
  const m = new Map<string, KubeObject[]>()
  for (const o of objects) m.set(`${o.apiVersion} ${o.kind}`, [...(m.get(`${o.apiVersion} ${o.kind}`) ?? []), o])
  return m
}

describe('minorsCrossed: the upgrade notes of the minors a move enters', () => {
  it('a minor step enters the target minor; a patch step or the same version none', () => {
    expect(minorsCrossed('1.18.0', '1.19.6')).toEqual(['1.19'])
    expect(minorsCrossed('1.19.6', '1.20.0')).toEqual(['1.20'])
    expect(minorsCrossed('1.18.0', '1.18.12')).toEqual([])
    expect(minorsCrossed('1.19.6', '1.19.6')).toEqual([])
    expect(minorsCrossed('x', '1.19.6')).toEqual([])
  })
  it('lists the BGPv1 kind and both policy kinds for 1.19', () => {
    expect(kindsToList(['1.19'])).toEqual(
      expect.arrayContaining([
        {apiVersion: 'cilium.io/v2alpha1', kind: 'CiliumBGPPeeringPolicy'},
        {apiVersion: 'cilium.io/v2', kind: 'CiliumNetworkPolicy'},
        {apiVersion: 'cilium.io/v2', kind: 'CiliumClusterwideNetworkPolicy'},
      ]),
    )
  })
})

describe('findRemovedApis: 1.19', () => {
  const bgp = obj('cilium.io/v2alpha1', 'CiliumBGPPeeringPolicy', 'rack1', {spec: {nodeSelector: {}, virtualRouters: []}})
  const requires = obj('cilium.io/v2', 'CiliumNetworkPolicy', 'prod-only', {
    namespace: 'apps',
    spec: {endpointSelector: {}, ingress: [{fromEndpoints: [{}]}, {fromEndpoints: [{}], fromRequires: [{matchLabels: {env: 'prod'}}]}]},
  })
  const clusterwide = obj('cilium.io/v2', 'CiliumClusterwideNetworkPolicy', 'deny-dev', {
    specs: [{endpointSelector: {}}, {endpointSelector: {}, egressDeny: [{toEndpoints: [{}], toRequires: [{matchLabels: {env: 'dev'}}]}]}],
  })
  const emptyLists = obj('cilium.io/v2', 'CiliumNetworkPolicy', 'empty-requires', {
    namespace: 'apps',
    spec: {endpointSelector: {}, ingress: [{fromEndpoints: [{}], fromRequires: []}], egress: [{toEndpoints: [{}], toRequires: []}]},
  })
  const kafka = obj('cilium.io/v2', 'CiliumNetworkPolicy', 'kafka', {
    namespace: 'apps',
    spec: {endpointSelector: {}, ingress: [{toPorts: [{ports: [{port: '9092'}], rules: {kafka: [{topic: 'a'}]}}]}]},
  })
  const poolOld = obj('cilium.io/v2', 'CiliumLoadBalancerIPPool', 'old', managedBy('cilium.io/v2alpha1', 'argocd-controller'))
  const poolNew = obj('cilium.io/v2', 'CiliumLoadBalancerIPPool', 'new', managedBy('cilium.io/v2', 'kubectl'))

  it('given a CiliumBGPPeeringPolicy and policies with fromRequires/toRequires, then each is refused by name, path and doc section', () => {
    const r = findRemovedApis(['1.19'], live(bgp, requires, clusterwide, emptyLists, poolNew))
    expect(r.refusals.map((f) => f.object)).toEqual([
      'CiliumBGPPeeringPolicy rack1',
      'CiliumClusterwideNetworkPolicy deny-dev',
      'CiliumNetworkPolicy apps/prod-only',
    ])
    expect(r.refusals[0]).toMatchObject({
      kind: 'CiliumBGPPeeringPolicy',
      name: 'rack1',
      minor: '1.19',
      why: expect.stringMatching(/removes CiliumBGPPeeringPolicy.*CiliumBGPClusterConfig/),
    })
    expect(r.refusals[1]!.why).toMatch(/^specs\[1\]\.egressDeny\[0\]\.toRequires: .*FromRequires and ToRequires to be empty/)
    expect(r.refusals[2]).toMatchObject({namespace: 'apps', why: expect.stringMatching(/^spec\.ingress\[1\]\.fromRequires: /)})
    for (const f of r.refusals) expect(f.doc).toMatch(/1\.19 Upgrade Notes \(Documentation\/operations\/upgrade\.rst, v1\.19\.6\)/)
    expect(r.warnings).toEqual([])
  })
  it('given what 1.19 only deprecates (Kafka rules, a pool written through v2alpha1), then warnings, never refusals', () => {
    const r = findRemovedApis(['1.19'], live(kafka, poolOld, poolNew))
    expect(r.refusals).toEqual([])
    expect(r.warnings.map((f) => [f.object, f.why])).toEqual([
      ['CiliumLoadBalancerIPPool old', expect.stringMatching(/^written through cilium\.io\/v2alpha1 by argocd-controller; .*deprecates/)],
      ['CiliumNetworkPolicy apps/kafka', expect.stringMatching(/^spec\.ingress\[0\]\.toPorts\[0\]\.rules\.kafka: .*deprecates Kafka/)],
    ])
  })
  it('given no such objects (or no CRD: no list), then nothing', () => {
    expect(findRemovedApis(['1.19'], live(emptyLists, poolNew))).toEqual({refusals: [], warnings: []})
    expect(findRemovedApis(['1.19'], new Map())).toEqual({refusals: [], warnings: []})
    expect(findRemovedApis([], live(bgp, requires))).toEqual({refusals: [], warnings: []})
  })
})

describe('findRemovedApis: 1.20', () => {
  it('refuses Kafka and proxylib rules and a CiliumNodeConfig written through v2alpha1; warns on mutual authentication and on a policy without spec(s)', () => {
    const l7 = obj('cilium.io/v2', 'CiliumClusterwideNetworkPolicy', 'proxylib', {
      spec: {endpointSelector: {}, egress: [{toPorts: [{ports: [{port: '80'}], rules: {l7proto: 'r2d2', l7: [{cmd: 'READ'}]}}]}]},
    })
    const auth = obj('cilium.io/v2', 'CiliumNetworkPolicy', 'mtls', {
      namespace: 'a',
      spec: {endpointSelector: {}, ingress: [{fromEndpoints: [{}], authentication: {mode: 'required'}}]},
    })
    const empty = obj('cilium.io/v2', 'CiliumNetworkPolicy', 'empty', {namespace: 'a'})
    const cnc = obj('cilium.io/v2', 'CiliumNodeConfig', 'c', {namespace: 'kube-system', ...managedBy('cilium.io/v2alpha1', 'helm')})
    const r = findRemovedApis(['1.20'], live(l7, auth, empty, cnc))
    expect(r.refusals.map((f) => [f.object, f.why])).toEqual([
      [
        'CiliumClusterwideNetworkPolicy proxylib',
        expect.stringMatching(/^spec\.egress\[0\]\.toPorts\[0\]\.rules\.l7, spec\.egress\[0\]\.toPorts\[0\]\.rules\.l7proto: Cilium 1\.20 removes/),
      ],
      ['CiliumNodeConfig kube-system/c', expect.stringMatching(/^written through cilium\.io\/v2alpha1 by helm; Cilium 1\.20 no longer serves/)],
    ])
    expect(r.warnings.map((f) => f.object)).toEqual(['CiliumNetworkPolicy a/empty', 'CiliumNetworkPolicy a/mtls'])
    for (const f of [...r.refusals, ...r.warnings]) expect(f.doc).toMatch(/1\.20 Upgrade Notes .*v1\.20\.0/)
  })
})

// The rules against Cilium's own CRDs: what each minor's operator registers and what its schemas accept.
describe('the table agrees with the real CRDs of each minor', () => {
  type Schema = {properties?: Record<string, Schema>; items?: Schema; maxItems?: number}
  const ruleSchema = (module: string, kind: 'ciliumnetworkpolicies' | 'ciliumclusterwidenetworkpolicies', section: string): Schema => {
    const crd = ciliumCrd(module, `${kind}.cilium.io`)
    const v2 = (crd.spec.versions as unknown as {name: string; schema: {openAPIV3Schema: Schema}}[]).find((v) => v.name === 'v2')!
    return v2.schema.openAPIV3Schema.properties!.spec!.properties![section]!.items!
  }
  const versions = (module: string, name: string) => (ciliumCrd(module, name).spec.versions as unknown as {name: string}[]).map((v) => v.name)

  it('1.19: the operator no longer registers CiliumBGPPeeringPolicy (1.18 did, with BGP on); fromRequires/toRequires have maxItems 0 (1.18: unbounded)', () => {
    const bgpOn = {'enable-bgp-control-plane': 'true'}
    expect(ciliumCrdNamesFor('1.18.0', bgpOn)).toContain('ciliumbgppeeringpolicies.cilium.io')
    expect(ciliumCrdNamesFor('1.19.6', bgpOn)).not.toContain('ciliumbgppeeringpolicies.cilium.io')
    expect(() => ciliumCrd('1.19.6', 'ciliumbgppeeringpolicies.cilium.io')).toThrow(/no pregenerated CRD/)
    for (const kind of ['ciliumnetworkpolicies', 'ciliumclusterwidenetworkpolicies'] as const) {
      for (const [section, field] of [
        ['ingress', 'fromRequires'],
        ['ingressDeny', 'fromRequires'],
        ['egress', 'toRequires'],
        ['egressDeny', 'toRequires'],
      ] as const) {
        expect(ruleSchema('1.18.0', kind, section).properties![field]!.maxItems, `${kind} ${section}`).toBeUndefined()
        expect(ruleSchema('1.19.6', kind, section).properties![field]!.maxItems, `${kind} ${section}`).toBe(0)
      }
    }
  })
  it('1.20: rules.kafka, l7 and l7proto are gone from the policy CRDs (1.19 has them); CiliumNodeConfig serves only v2', () => {
    const rulesOf = (module: string) => ruleSchema(module, 'ciliumnetworkpolicies', 'ingress').properties!.toPorts!.items!.properties!.rules!.properties!
    for (const key of ['kafka', 'l7', 'l7proto']) {
      expect(rulesOf('1.19.6'), key).toHaveProperty(key)
      expect(rulesOf('1.20.0'), key).not.toHaveProperty(key)
    }
    expect(versions('1.19.6', 'ciliumnodeconfigs.cilium.io')).toEqual(['v2', 'v2alpha1'])
    expect(versions('1.20.0', 'ciliumnodeconfigs.cilium.io')).toEqual(['v2'])
    expect(versions('1.20.0', 'ciliumloadbalancerippools.cilium.io')).toContain('v2alpha1')
  })
})
