// Kubernetes objects as plain data: parse multi-document YAML, find, clone, and write
// them back as canonical YAML, so a bundle's bytes depend only on its objects.
import {parseAllDocuments, stringify} from 'yaml'
import {IchorError} from '../errors/errors.js'

export interface ObjectMeta {
  name: string
  namespace?: string
  labels?: Record<string, string>
  annotations?: Record<string, string>
  [key: string]: unknown
}

export interface K8sObject {
  apiVersion: string
  kind: string
  metadata: ObjectMeta
  [key: string]: unknown
}

/**
 * Parses multi-document YAML into objects, skipping empty documents (helm emits
 * `---` with only a `# Source:` comment for templates that render nothing).
 * Parsing uses YAML 1.2 core, so an unquoted `2024-01-01` stays a string.
 */
export function parseObjects(text: string, source = 'manifest'): K8sObject[] {
  const out: K8sObject[] = []
  const docs = parseAllDocuments(text)
  // parseAllDocuments returns a bare array of documents; an EmptyStream otherwise.
  for (const [index, doc] of [...docs].entries()) {
    if (doc.errors.length > 0) {
      throw new IchorError(`${source}: YAML document ${index + 1} does not parse: ${doc.errors[0]!.message}`)
    }
    const value = doc.toJS({maxAliasCount: 100}) as unknown
    if (value === null || value === undefined) continue
    if (typeof value !== 'object' || Array.isArray(value)) {
      throw new IchorError(`${source}: YAML document ${index + 1} is not a Kubernetes object`)
    }
    const obj = value as Partial<K8sObject>
    if (typeof obj.apiVersion !== 'string' || typeof obj.kind !== 'string' || typeof obj.metadata?.name !== 'string') {
      throw new IchorError(`${source}: YAML document ${index + 1} has no apiVersion, kind or metadata.name`)
    }
    out.push(obj as K8sObject)
  }
  return out
}

// Apply order, after Namespaces and CRDs: Helm's install order (pkg/release/util/kind_sorter.go)
// for the kinds it knows, so a plain `kubectl apply -f` of a bundle creates what others refer to first.
const KIND_ORDER = [
  'Namespace',
  'CustomResourceDefinition',
  'NetworkPolicy',
  'ResourceQuota',
  'LimitRange',
  'PodDisruptionBudget',
  'ServiceAccount',
  'Secret',
  'ConfigMap',
  'StorageClass',
  'PersistentVolume',
  'PersistentVolumeClaim',
  'ClusterRole',
  'ClusterRoleBinding',
  'Role',
  'RoleBinding',
  'Service',
  'DaemonSet',
  'Pod',
  'ReplicaSet',
  'Deployment',
  'HorizontalPodAutoscaler',
  'StatefulSet',
  'Job',
  'CronJob',
  'IngressClass',
  'Ingress',
  'APIService',
  'MutatingWebhookConfiguration',
  'ValidatingWebhookConfiguration',
]
const KIND_RANK = new Map(KIND_ORDER.map((k, i) => [k, i]))

/**
 * The bundle order: Namespaces, then CRDs, then the other kinds in Helm's install order,
 * then kinds Helm does not know (custom resources such as CiliumNetworkPolicy, Order) by
 * kind name; within a kind by namespace (cluster-scoped first), name, then apiVersion.
 * A total order on (kind, namespace, name, apiVersion), so any input order gives one output.
 */
export function compareObjects(a: K8sObject, b: K8sObject): number {
  const ra = KIND_RANK.get(a.kind) ?? KIND_ORDER.length
  const rb = KIND_RANK.get(b.kind) ?? KIND_ORDER.length
  if (ra !== rb) return ra - rb
  return (
    cmp(a.kind, b.kind) ||
    cmp(a.metadata.namespace ?? '', b.metadata.namespace ?? '') ||
    cmp(a.metadata.name, b.metadata.name) ||
    cmp(a.apiVersion, b.apiVersion)
  )
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}

export function sortObjects(objects: readonly K8sObject[]): K8sObject[] {
  return [...objects].sort(compareObjects)
}

/**
 * Canonical multi-document YAML: sorted objects, keys in the order they have, each document
 * opened by `---`. Strings that YAML 1.1 would read as another type (`yes`, `on`, `0777`) are
 * quoted, because kubectl and Argo CD read manifests with a YAML 1.1 parser. No line folding,
 * so the bytes do not depend on a width setting.
 */
export function serializeObjects(objects: readonly K8sObject[]): string {
  const seen = new Set<string>()
  const docs: string[] = []
  for (const obj of sortObjects(objects)) {
    const id = objectId(obj)
    if (seen.has(id)) throw new IchorError(`two objects with the same identity in one manifest: ${id}`)
    seen.add(id)
    docs.push(`---\n${stringify(obj, {version: '1.1', lineWidth: 0, minContentWidth: 0, aliasDuplicateObjects: false})}`)
  }
  return docs.join('')
}

/** `Kind namespace/name` (or `Kind name` when cluster-scoped), for messages and identity. */
export function objectId(obj: Pick<K8sObject, 'kind' | 'metadata'>): string {
  return obj.metadata.namespace ? `${obj.kind} ${obj.metadata.namespace}/${obj.metadata.name}` : `${obj.kind} ${obj.metadata.name}`
}

export function findObject(objects: readonly K8sObject[], kind: string, name: string, namespace?: string): K8sObject | undefined {
  return objects.find((o) => o.kind === kind && o.metadata.name === name && (namespace === undefined || o.metadata.namespace === namespace))
}

/** The object, or an error that names what the manifest lacks ("no Service kokumi-registry in the Kokumi manifest"). */
export function requireObject(objects: readonly K8sObject[], kind: string, name: string, source: string): K8sObject {
  const found = findObject(objects, kind, name)
  if (!found) throw new IchorError(`no ${kind} ${name} in the ${source}`)
  return found
}

export function cloneObjects<T>(value: T): T {
  return structuredClone(value)
}
