// What a Cilium minor removes or rejects among the objects a cluster already holds, as that
// minor's upgrade notes say, read from the live API server before `cni upgrade` changes
// anything. The notes (cilium/cilium Documentation/operations/upgrade.rst, "1.19 Upgrade
// Notes", v1.19.6; Documentation/operations/upgrade-current.inc, "1.20 Upgrade Notes",
// v1.20.0) and the CRD schemas of those tags (pkg/k8s/apis/cilium.io/client/crds) decide
// what is refused: a kind or API version the new minor no longer serves, a policy field its
// CRDs forbid or no longer know. A deprecation is a warning, never a refusal.
import type {Kube} from '../kube/client.js'
import {describeObject, type KubeObject} from '../kube/objects.js'
import {parseCiliumVersion} from './versions.js'

export type Severity = 'refuse' | 'warn'

/** One live object and what the target minor does to it. */
export interface RemovedApiFinding {
  severity: Severity
  /** `Kind ns/name` or `Kind name`. */
  object: string
  kind: string
  namespace?: string
  name: string
  /** The Cilium minor whose upgrade notes say so. */
  minor: string
  /** What that minor does to it, and what to do first. */
  why: string
  /** The upgrade-notes section it comes from. */
  doc: string
}

export interface RemovedApiReport {
  refusals: RemovedApiFinding[]
  warnings: RemovedApiFinding[]
}

/** Objects of a kind, every one of them or those `match` picks, listed in `apiVersion`. */
interface KindRule {
  severity: Severity
  apiVersion: string
  kind: string
  /** Why this object is caught, or undefined when it is not. Default: every object. */
  match?: (object: KubeObject) => string | undefined
  why: string
}

/** A field in CiliumNetworkPolicy/CiliumClusterwideNetworkPolicy rules (`spec` and each of `specs[]`). */
interface PolicyRule {
  severity: Severity
  /** The paths found in one rule set (`spec` or one of `specs`), e.g. `ingress[0].fromRequires`. */
  find: (spec: Record<string, unknown>) => string[]
  why: string
}

/** A whole-policy condition (not per rule set). */
interface PolicyObjectRule {
  severity: Severity
  match: (object: KubeObject) => boolean
  why: string
}

interface MinorNotes {
  doc: string
  kinds: KindRule[]
  policyFields: PolicyRule[]
  policies: PolicyObjectRule[]
}

const POLICY_KINDS = ['CiliumNetworkPolicy', 'CiliumClusterwideNetworkPolicy'] as const

const NOTES_119 = 'Cilium upgrade notes, 1.19 Upgrade Notes (Documentation/operations/upgrade.rst, v1.19.6)'
const NOTES_120 = 'Cilium upgrade notes, 1.20 Upgrade Notes (Documentation/operations/upgrade-current.inc, v1.20.0)'

/** The upgrade notes ichor acts on, per target minor. */
export const REMOVED_APIS: Readonly<Record<string, MinorNotes>> = {
  '1.19': {
    doc: NOTES_119,
    kinds: [
      {
        // "Custom Resource Versions": the CRD and the BGPv1 control plane are gone; the 1.19
        // operator no longer registers ciliumbgppeeringpolicies (pkg/k8s/synced/crd.go).
        severity: 'refuse',
        apiVersion: 'cilium.io/v2alpha1',
        kind: 'CiliumBGPPeeringPolicy',
        why: 'Cilium 1.19 removes CiliumBGPPeeringPolicy and its BGPv1 control plane: nothing would act on it; migrate to the cilium.io/v2 CiliumBGPClusterConfig, CiliumBGPPeerConfig, CiliumBGPAdvertisement and CiliumBGPNodeConfigOverride, then delete it',
      },
      {
        severity: 'warn',
        apiVersion: 'cilium.io/v2',
        kind: 'CiliumLoadBalancerIPPool',
        match: writtenThrough('cilium.io/v2alpha1'),
        why: 'Cilium 1.19 deprecates cilium.io/v2alpha1 CiliumLoadBalancerIPPool (still served): change the manifests that write it to apiVersion cilium.io/v2',
      },
    ],
    policyFields: [
      {
        // The 1.19 CRDs set maxItems: 0 on both (crds/v2/ciliumnetworkpolicies.yaml).
        severity: 'refuse',
        find: (spec) => [
          ...nonEmptyInRules(spec, ['ingress', 'ingressDeny'], 'fromRequires'),
          ...nonEmptyInRules(spec, ['egress', 'egressDeny'], 'toRequires'),
        ],
        why: "Cilium 1.19's policy CRDs require FromRequires and ToRequires to be empty (they were deprecated): remove these fields from the policy",
      },
      {
        severity: 'warn',
        find: (spec) => l7RulesIn(spec, ['kafka']),
        why: 'Cilium 1.19 deprecates Kafka network policy rules; Cilium 1.20 removes them',
      },
    ],
    policies: [],
  },
  '1.20': {
    doc: NOTES_120,
    kinds: [
      {
        // "Removed Options": v2alpha1 CiliumNodeConfig is gone from the 1.20 CRD (v2 since 1.16).
        severity: 'refuse',
        apiVersion: 'cilium.io/v2',
        kind: 'CiliumNodeConfig',
        match: writtenThrough('cilium.io/v2alpha1'),
        why: 'Cilium 1.20 no longer serves cilium.io/v2alpha1 CiliumNodeConfig: change the manifests or tooling that write it to apiVersion cilium.io/v2',
      },
    ],
    policyFields: [
      {
        // Envoy Go Extensions (proxylib) and Kafka-aware policies are removed: the 1.20 CRDs
        // have no rules.kafka, rules.l7 or rules.l7proto, so the API server would drop them.
        severity: 'refuse',
        find: (spec) => l7RulesIn(spec, ['kafka', 'l7', 'l7proto']),
        why: 'Cilium 1.20 removes Kafka-aware policies and Envoy Go Extensions (proxylib): its policy CRDs no longer have rules.kafka, rules.l7 or rules.l7proto; remove that rules section from the policy',
      },
      {
        severity: 'warn',
        find: (spec) => ruleFields(spec, ['ingress', 'egress'], 'authentication'),
        why: 'Cilium 1.20 deprecates mutual authentication (it will be removed in a later version)',
      },
    ],
    policies: [
      {
        severity: 'warn',
        match: (o) => o.spec === undefined && o.specs === undefined,
        why: 'Cilium 1.20 rejects a policy with neither spec nor specs on any create or update (existing ones stay)',
      },
    ],
  },
}

/** The minors whose notes apply to a move from `installed` to `target`: those after the installed one, up to the target's. */
export function minorsCrossed(installed: string, target: string): string[] {
  const from = parseCiliumVersion(installed)
  const to = parseCiliumVersion(target)
  if (!from || !to || to.major !== from.major) return []
  return Object.keys(REMOVED_APIS).filter((m) => {
    const minor = Number(m.split('.')[1])
    return Number(m.split('.')[0]) === to.major && minor > from.minor && minor <= to.minor
  })
}

/** The live objects each crossed minor's rules look at, by `apiVersion kind`; a kind not served is absent. */
export type LiveObjects = ReadonlyMap<string, readonly KubeObject[]>

const keyOf = (apiVersion: string, kind: string) => `${apiVersion} ${kind}`

/** What to list for `minors`: each rule's kind, and the policy kinds when a minor has policy rules. */
export function kindsToList(minors: readonly string[]): {apiVersion: string; kind: string}[] {
  const out = new Map<string, {apiVersion: string; kind: string}>()
  for (const m of minors) {
    const notes = REMOVED_APIS[m]!
    for (const r of notes.kinds) out.set(keyOf(r.apiVersion, r.kind), {apiVersion: r.apiVersion, kind: r.kind})
    if (notes.policyFields.length || notes.policies.length)
      for (const kind of POLICY_KINDS) out.set(keyOf('cilium.io/v2', kind), {apiVersion: 'cilium.io/v2', kind})
  }
  return [...out.values()]
}

/** The findings of `minors`' rules on the listed objects, refusals and warnings apart, sorted by object. */
export function findRemovedApis(minors: readonly string[], live: LiveObjects): RemovedApiReport {
  const findings: RemovedApiFinding[] = []
  const add = (severity: Severity, minor: string, o: KubeObject, kind: string, why: string) =>
    findings.push({
      severity,
      object: describeObject({kind, metadata: o.metadata}),
      kind,
      ...(o.metadata.namespace ? {namespace: o.metadata.namespace} : {}),
      name: o.metadata.name,
      minor,
      why,
      doc: REMOVED_APIS[minor]!.doc,
    })
  for (const minor of minors) {
    const notes = REMOVED_APIS[minor]!
    for (const rule of notes.kinds) {
      for (const o of live.get(keyOf(rule.apiVersion, rule.kind)) ?? []) {
        const caught = rule.match ? rule.match(o) : ''
        if (caught !== undefined) add(rule.severity, minor, o, rule.kind, caught ? `${caught}; ${rule.why}` : rule.why)
      }
    }
    for (const kind of POLICY_KINDS) {
      for (const o of live.get(keyOf('cilium.io/v2', kind)) ?? []) {
        for (const rule of notes.policies) if (rule.match(o)) add(rule.severity, minor, o, kind, rule.why)
        for (const rule of notes.policyFields) {
          const paths = [...ruleSets(o)].flatMap(([prefix, spec]) => rule.find(spec).map((p) => `${prefix}.${p}`))
          if (paths.length) add(rule.severity, minor, o, kind, `${paths.join(', ')}: ${rule.why}`)
        }
      }
    }
  }
  findings.sort((a, b) => a.object.localeCompare(b.object))
  return {refusals: findings.filter((f) => f.severity === 'refuse'), warnings: findings.filter((f) => f.severity === 'warn')}
}

/** Lists the kinds `minors` look at from the API server (all namespaces); a kind whose CRD is absent has no objects. */
export async function readLiveObjects(kube: Kube, minors: readonly string[]): Promise<LiveObjects> {
  const live = new Map<string, KubeObject[]>()
  for (const {apiVersion, kind} of kindsToList(minors)) {
    const resource = await kube.resourceFor(apiVersion, kind)
    if (!resource) continue
    const list = await kube.request<{items: KubeObject[]}>('GET', `/apis/${apiVersion}/${resource.plural}`)
    live.set(
      keyOf(apiVersion, kind),
      list.items.map((item) => ({...item, apiVersion, kind})),
    )
  }
  return live
}

/** The findings for a move from `installed` to `target`, read from the live cluster. */
export async function readRemovedApis(kube: Kube, installed: string, target: string): Promise<RemovedApiReport> {
  const minors = minorsCrossed(installed, target)
  if (!minors.length) return {refusals: [], warnings: []}
  return findRemovedApis(minors, await readLiveObjects(kube, minors))
}

/** One line per finding, for messages and warnings. */
export function describeFinding(f: RemovedApiFinding): string {
  return `${f.object}: ${f.why} (${f.doc})`
}

// --- helpers over policy specs ---

type Obj = Record<string, unknown>
const isObj = (v: unknown): v is Obj => !!v && typeof v === 'object' && !Array.isArray(v)
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : [])

/** `spec` and each `specs[i]` of a policy, with the path prefix to name them. */
function* ruleSets(o: KubeObject): Generator<[string, Obj]> {
  if (isObj(o.spec)) yield ['spec', o.spec]
  for (const [i, s] of arr(o.specs).entries()) if (isObj(s)) yield [`specs[${i}]`, s]
}

/** `section[i].field` for every rule in `sections` where `field` is present. */
function ruleFields(spec: Obj, sections: readonly string[], field: string): string[] {
  const out: string[] = []
  for (const section of sections)
    for (const [i, rule] of arr(spec[section]).entries())
      if (isObj(rule) && rule[field] !== undefined && rule[field] !== null) out.push(`${section}[${i}].${field}`)
  return out
}

/** `section[i].field` for every rule in `sections` where the list `field` has items (an empty list is what the new CRDs accept). */
function nonEmptyInRules(spec: Obj, sections: readonly string[], field: string): string[] {
  const out: string[] = []
  for (const section of sections)
    for (const [i, rule] of arr(spec[section]).entries()) if (isObj(rule) && arr(rule[field]).length > 0) out.push(`${section}[${i}].${field}`)
  return out
}

/** `ingress[i].toPorts[j].rules.<key>` (and egress) for every L7 rules section that sets one of `keys`. */
function l7RulesIn(spec: Obj, keys: readonly string[]): string[] {
  const out: string[] = []
  for (const section of ['ingress', 'egress'])
    for (const [i, rule] of arr(spec[section]).entries())
      for (const [j, port] of arr(isObj(rule) ? rule.toPorts : undefined).entries()) {
        const rules = isObj(port) ? port.rules : undefined
        if (!isObj(rules)) continue
        for (const key of keys) if (rules[key] !== undefined && rules[key] !== null) out.push(`${section}[${i}].toPorts[${j}].rules.${key}`)
      }
  return out
}

/**
 * An object some manager last wrote through `apiVersion` (its managedFields name the version the
 * client used): the manifests or tooling behind it still use that version.
 */
function writtenThrough(apiVersion: string): (o: KubeObject) => string | undefined {
  return (o) => {
    const managers = arr(o.metadata.managedFields)
      .filter((m): m is Obj => isObj(m) && m.apiVersion === apiVersion)
      .map((m) => String(m.manager ?? 'unknown'))
    return managers.length ? `written through ${apiVersion} by ${[...new Set(managers)].join(', ')}` : undefined
  }
}
