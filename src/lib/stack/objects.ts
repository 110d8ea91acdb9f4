// Kubernetes objects as plain data: parse multi-document YAML, find, clone, and write
// them back as canonical YAML, so a bundle's bytes depend only on its objects.
import {CORE_SCHEMA, loadAll} from 'js-yaml'
import {parseAllDocuments} from 'yaml'
import {IchorError} from '../errors/errors.js'
import type {KubeObject} from '../kube/objects.js'
import {toYaml} from '../yaml/emit.js'

/** An unquoted integer with a leading zero, which YAML 1.1 reads as octal. */
const LEGACY_OCTAL = /:[ \t]+[-+]?0[0-7]+[ \t]*(#.*)?$/m

/**
 * Parses multi-document YAML into objects, skipping empty documents (helm emits `---` with
 * only a `# Source:` comment for templates that render nothing). The YAML 1.2 core schema:
 * an unquoted `2024-01-01` stays a string, never a Date. js-yaml, because it parses the
 * 1.9 MB Argo CD render about five times faster than the `yaml` package (bench/yaml.mjs).
 */
export function parseObjects(text: string, source = 'manifest'): KubeObject[] {
  let docs: unknown[]
  try {
    // Kubernetes and helm read YAML 1.1, where `0644` is octal 420; the 1.2 core schema
    // would read 644. Such values are rare (file modes), so only a manifest holding one
    // takes the slower YAML 1.1 reader.
    docs = LEGACY_OCTAL.test(text)
      ? parseAllDocuments(text, {version: '1.1'}).map((d) => {
          if (d.errors.length > 0) throw d.errors[0]
          return d.toJS()
        })
      : loadAll(text, undefined, {schema: CORE_SCHEMA, filename: source})
  } catch (error) {
    throw new IchorError(`${source}: YAML does not parse: ${(error as Error).message.split('\n')[0]}`)
  }
  const out: KubeObject[] = []
  for (const [index, value] of docs.entries()) {
    if (value === null || value === undefined) continue
    if (typeof value !== 'object' || Array.isArray(value)) {
      throw new IchorError(`${source}: YAML document ${index + 1} is not a Kubernetes object`)
    }
    const obj = value as Partial<KubeObject>
    if (typeof obj.apiVersion !== 'string' || typeof obj.kind !== 'string' || typeof obj.metadata?.name !== 'string') {
      throw new IchorError(`${source}: YAML document ${index + 1} has no apiVersion, kind or metadata.name`)
    }
    out.push(obj as KubeObject)
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
function compareObjects(a: KubeObject, b: KubeObject): number {
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

export function sortObjects(objects: readonly KubeObject[]): KubeObject[] {
  return [...objects].sort(compareObjects)
}

/**
 * Canonical multi-document YAML: sorted objects, sorted keys, each document opened by `---`
 * (see yaml/emit.ts for the scalar rules). Same objects, same bytes.
 */
export function serializeObjects(objects: readonly KubeObject[]): string {
  const seen = new Set<string>()
  const docs: string[] = []
  for (const obj of sortObjects(objects)) {
    const id = objectId(obj)
    if (seen.has(id)) throw new IchorError(`two objects with the same identity in one manifest: ${id}`)
    seen.add(id)
    docs.push(`---\n${toYaml(obj)}`)
  }
  return docs.join('')
}

/** `Kind namespace/name` (or `Kind name` when cluster-scoped), for messages and identity. */
export function objectId(obj: Pick<KubeObject, 'kind' | 'metadata'>): string {
  return obj.metadata.namespace ? `${obj.kind} ${obj.metadata.namespace}/${obj.metadata.name}` : `${obj.kind} ${obj.metadata.name}`
}

export function findObject(objects: readonly KubeObject[], kind: string, name: string, namespace?: string): KubeObject | undefined {
  return objects.find((o) => o.kind === kind && o.metadata.name === name && (namespace === undefined || o.metadata.namespace === namespace))
}

/** The object, or an error that names what the manifest lacks ("no Service kokumi-registry in the Kokumi manifest"). */
export function requireObject(objects: readonly KubeObject[], kind: string, name: string, source: string): KubeObject {
  const found = findObject(objects, kind, name)
  if (!found) throw new IchorError(`no ${kind} ${name} in the ${source}`)
  return found
}

export function cloneObjects<T>(value: T): T {
  return structuredClone(value)
}
