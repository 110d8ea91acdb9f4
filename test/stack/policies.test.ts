import {readFileSync} from 'node:fs'
import {describe, expect, it} from 'vitest'
import {parse} from 'yaml'
import type {StackComponent} from '../../src/lib/state/installation-types.js'
import {policiesFor, policiesPath} from '../../src/lib/stack/policies.js'
import type {KubeObject} from '../../src/lib/kube/objects.js'

type Selector = {matchLabels?: Record<string, string>; matchExpressions?: Array<{key: string; operator: string; values?: string[]}>}
type Http = Array<{method?: string; path?: string}>
type Ports = Array<{ports: Array<{port: string; protocol: string}>; rules?: {http?: Http; dns?: unknown}}>
type Rule = {fromEndpoints?: Selector[]; fromEntities?: string[]; toEndpoints?: Selector[]; toEntities?: string[]; toPorts?: Ports; [k: string]: unknown}
type Spec = {endpointSelector: Selector; ingress?: Rule[]; egress?: Rule[]; enableDefaultDeny?: {ingress?: boolean; egress?: boolean}}

/** `k=v,k2 in (a|b)` or `*` for the empty selector: a stable description of a selector. */
const sel = (s: Selector): string => {
  const parts = [
    ...Object.entries(s.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`),
    ...(s.matchExpressions ?? []).map((e) => `${e.key} ${e.operator.toLowerCase()} (${(e.values ?? []).join('|')})`),
  ].sort()
  return parts.length === 0 ? '*' : parts.join(',')
}
/** `5000/TCP` or, with L7 HTTP rules, `5000/TCP[GET /v2/.*|HEAD /v2/.*]`. */
const ports = (p?: Ports): string =>
  (p ?? [])
    .flatMap((tp) => {
      const http = tp.rules?.http
        ? `[${tp.rules.http
            .map((r) => `${r.method ?? '*'} ${r.path ?? '*'}`)
            .sort()
            .join('|')}]`
        : ''
      return tp.ports.map((x) => `${x.port}/${x.protocol}${http}`)
    })
    .sort()
    .join('+') || 'any'

/** Every allow as `subject <- peer : ports` (ingress) or `subject -> peer : ports` (egress). */
function allows(policies: KubeObject[], direction: 'ingress' | 'egress'): string[] {
  const out: string[] = []
  for (const p of policies) {
    const spec = p.spec as Spec
    for (const rule of spec[direction] ?? []) {
      const peers =
        direction === 'ingress'
          ? [...(rule.fromEndpoints ?? []).map(sel), ...(rule.fromEntities ?? []).map((e) => `entity:${e}`)]
          : [...(rule.toEndpoints ?? []).map(sel), ...(rule.toEntities ?? []).map((e) => `entity:${e}`)]
      if (peers.length === 0 && !rule.toPorts) continue // the default-deny's empty rule selects no peer
      const keys = Object.keys(rule).filter((k) => !['fromEndpoints', 'fromEntities', 'toEndpoints', 'toEntities', 'toPorts'].includes(k))
      expect(keys, `${p.metadata.name}: unexpected ${direction} rule fields`).toEqual([])
      for (const peer of peers) out.push(`${sel(spec.endpointSelector)} ${direction === 'ingress' ? '<-' : '->'} ${peer} : ${ports(rule.toPorts)}`)
    }
  }
  return out.sort()
}

const AC = 'app.kubernetes.io/name=argocd-application-controller'
const REPO = 'app.kubernetes.io/name=argocd-repo-server'
const SERVER = 'app.kubernetes.io/name=argocd-server'
const REDIS = 'app.kubernetes.io/name=argocd-redis'
const THREE = 'app.kubernetes.io/name in (argocd-application-controller|argocd-repo-server|argocd-server)'
const KCTRL = 'app.kubernetes.io/name=kokumi,control-plane=controller-manager'
const KSERVER = 'app.kubernetes.io/component=server,app.kubernetes.io/name=kokumi'
const REGISTRY = 'app=registry'
const READ = '[GET /v2/.*|HEAD /v2/.*]'
const DNS = 'io.kubernetes.pod.namespace=kube-system,k8s-app=kube-dns'

const EXPECTED: Record<StackComponent, {ingress: string[]; egress: string[]}> = {
  argocd: {
    ingress: [
      `${REDIS} <- ${THREE} : 6379/TCP`,
      `${REPO} <- app.kubernetes.io/name in (argocd-application-controller|argocd-server) : 8081/TCP`,
      `${SERVER} <- entity:host : 8080/TCP`, // UI through port-forward
      `${AC} <- entity:host : 8082/TCP`, // kubelet probes
      `${REPO} <- entity:host : 8084/TCP`,
      `${SERVER} <- entity:host : 8080/TCP`,
    ],
    egress: [
      `* -> ${DNS} : 53/TCP+53/UDP`,
      `${THREE} -> entity:kube-apiserver : 6443/TCP`,
      `app.kubernetes.io/name in (argocd-application-controller|argocd-repo-server) -> app=registry,io.kubernetes.pod.namespace=kokumi : 5000/TCP`,
      `${THREE} -> ${REDIS} : 6379/TCP`,
      `app.kubernetes.io/name in (argocd-application-controller|argocd-server) -> ${REPO} : 8081/TCP`,
    ],
  },
  kokumi: {
    ingress: [
      `${REGISTRY} <- ${REPO},io.kubernetes.pod.namespace=argocd : 5000/TCP${READ}`,
      `${REGISTRY} <- ${AC},io.kubernetes.pod.namespace=argocd : 5000/TCP${READ}`,
      `${REGISTRY} <- ${KCTRL} : 5000/TCP`, // the one writer
      `${REGISTRY} <- ${KSERVER} : 5000/TCP${READ}`,
      `${REGISTRY} <- entity:host : 5000/TCP[GET /]`, // kubelet probes only
      `${KSERVER} <- entity:host : 8080/TCP`, // UI through port-forward, and probes
      `${KCTRL} <- entity:host : 8081/TCP`, // probes
    ],
    egress: [
      `* -> ${DNS} : 53/TCP+53/UDP`,
      `${KCTRL} -> entity:kube-apiserver : 6443/TCP`,
      `${KSERVER} -> entity:kube-apiserver : 6443/TCP`,
      `${KCTRL} -> ${REGISTRY} : 5000/TCP`,
      `${KSERVER} -> ${REGISTRY} : 5000/TCP`,
    ],
  },
}

describe.each(['argocd', 'kokumi'] as const)('CiliumNetworkPolicies of %s (parsed from assets/policies)', (component) => {
  const policies = policiesFor(component)

  it('are CiliumNetworkPolicies in the namespace, with unique names', () => {
    const raw = readFileSync(policiesPath(component), 'utf8')
    expect(raw).toContain('apiVersion: cilium.io/v2')
    for (const p of policies) expect([p.apiVersion, p.kind, p.metadata.namespace]).toEqual(['cilium.io/v2', 'CiliumNetworkPolicy', component])
    expect(new Set(policies.map((p) => p.metadata.name)).size).toBe(policies.length)
  })

  it('deny all ingress and egress by default for every pod', () => {
    const deny = policies.find((p) => p.metadata.name === 'default-deny')!
    expect(deny.spec).toMatchObject({endpointSelector: {}, ingress: [{}], egress: [{}], enableDefaultDeny: {ingress: true, egress: true}})
  })

  it('allow DNS to kube-dns on 53/UDP and 53/TCP with a dns rule, from every pod', () => {
    const dns = policies.find((p) => p.metadata.name === 'allow-dns')!.spec as Spec
    expect(dns.endpointSelector).toEqual({})
    expect(dns.egress![0]!.toPorts![0]!.rules).toEqual({dns: [{matchPattern: '*'}]})
  })

  it('allow exactly the named ingress, nothing else', () => {
    expect(allows(policies, 'ingress')).toEqual([...EXPECTED[component].ingress].sort())
  })

  it('allow exactly the named egress, nothing else', () => {
    expect(allows(policies, 'egress')).toEqual([...EXPECTED[component].egress].sort())
  })

  it('never admit ingress from outside the cluster (world, all, remote-node, cluster, a CIDR) or deny-overrides', () => {
    const text = JSON.stringify(policies)
    for (const p of policies) {
      for (const rule of ((p.spec as Spec).ingress ?? []) as Rule[]) {
        for (const e of rule.fromEntities ?? []) expect(e).toBe('host')
        expect(rule.fromCIDR).toBeUndefined()
        expect(rule.fromCIDRSet).toBeUndefined()
        expect(rule.fromRequires).toBeUndefined()
      }
    }
    expect(text).not.toMatch(/"(world|all|remote-node|cluster|init|unmanaged)"/)
    expect(text).not.toMatch(/CIDR/)
  })

  it('are what a YAML 1.1 reader sees too (ports stay strings)', () => {
    const docs = readFileSync(policiesPath(component), 'utf8')
      .split(/^---$/m)
      .slice(1)
      .map((d) => parse(d, {version: '1.1'}))
    expect(docs).toEqual(policies)
  })
})

describe("who may write to Kokumi's anonymous registry", () => {
  const registryIngress = policiesFor('kokumi')
    .filter((p) => sel((p.spec as Spec).endpointSelector) === REGISTRY)
    .flatMap((p) => ((p.spec as Spec).ingress ?? []).map((rule) => ({policy: p.metadata.name, rule})))
  const peersOf = (rule: Rule) => [...(rule.fromEndpoints ?? []).map(sel), ...(rule.fromEntities ?? []).map((e) => `entity:${e}`)]

  it('only the controller-manager has a rule without L7 HTTP limits (Cilium lets an L4-only allow win over an L7 one)', () => {
    const unlimited = registryIngress.filter(({rule}) => (rule.toPorts ?? []).some((tp) => !tp.rules?.http)).flatMap(({rule}) => peersOf(rule))
    expect(unlimited).toEqual([KCTRL])
  })

  it('every other peer may only GET or HEAD, readers under /v2/ and the host only the probe path /', () => {
    for (const {policy, rule} of registryIngress) {
      const http = (rule.toPorts ?? []).flatMap((tp) => tp.rules?.http ?? [])
      if (peersOf(rule).includes(KCTRL)) continue
      expect(http.length, policy).toBeGreaterThan(0)
      for (const r of http) {
        expect(['GET', 'HEAD'], `${policy}: ${r.method}`).toContain(r.method)
        expect(r.path, policy).toBe(peersOf(rule).includes('entity:host') ? '/' : '/v2/.*')
      }
    }
  })
})
