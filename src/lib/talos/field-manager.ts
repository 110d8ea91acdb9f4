// Talos's field manager on the objects of a Helm release. Every Talos version creates the
// inline-manifest objects with field manager `talos` (v1.12: a plain Create; v1.13+: a
// server-side apply), and nothing ever removes that entry: Talos below 1.13 has no inventory
// to hand over, and from 1.13 only the objects still in the inventory were cleared. While
// `talos` co-owns a field, Helm 4's server-side upgrade cannot drop it when a later values
// change stops rendering it (a field leaves an object only when no manager owns it any more).
// So the hand-over takes `talos` off every object the release manifest names.
//
// Taking it off is not enough: its fields must go to Helm's manager. Helm 3's adoption
// (--take-ownership) of objects identical to the bootstrap's patches nothing but Helm's own
// labels, so once `talos` is gone the rendered fields belong to no manager, and Helm 4's
// server-side apply removes only fields its own Apply entry lists: a later render that drops a
// field (`cni kube-proxy restore` drops KUBERNETES_SERVICE_HOST) left it in place. So the
// fields of `talos` are merged into the Apply entry of "helm", the manager both Helm majors
// write as (helm v3.18.0 and v4.1.4 pkg/kube/client.go getManagedFieldsManager, the CLI
// called as `helm`: release.ts helmInvocationPath). Apply, whichever Helm adopted the release:
//   - Helm 4 upgrades server side and removes what that entry lists and the new render lacks;
//     from a revision Helm 3 wrote it first folds helm's Update entries into the same Apply
//     entry (pkg/action/upgrade.go upgradeClientSideFieldManager, client-go csaupgrade), and an
//     Update entry would be folded only after a client-side revision, never after Helm 4's own.
//   - Helm 3 computes its three-way merge patch from the manifests and the live object and
//     never reads managedFields; its patches are Updates, which no Apply entry can refuse.
import {CORE_SCHEMA, loadAll} from 'js-yaml'
import {parseAllDocuments} from 'yaml'
import {IchorError} from '../errors/errors.js'
import {isConflict, isNotFound, KubeApiError, type Kube} from '../kube/client.js'
import {describeObject, getObject, resolvePath, type KubeObject, type ObjectRef} from '../kube/objects.js'
import {FIELD_MANAGER} from '../constants.js'

/** Talos's field manager (constants.KubernetesFieldManagerName; v1.12 writes the literal "talos"). */
export const TALOS_FIELD_MANAGER = 'talos'

/** The manager Helm writes as, both majors (see above). */
export const HELM_FIELD_MANAGER = 'helm'

/** A fieldsV1 trie: `f:`, `k:`, `v:`, `i:` path elements; `{}` a member leaf, "." a member with children. */
export type FieldsV1 = {[element: string]: FieldsV1}

export interface ManagedEntry {
  manager?: string
  operation?: string
  apiVersion?: string
  time?: string
  fieldsType?: string
  fieldsV1?: FieldsV1
  subresource?: string
}
type LiveMeta = KubeObject & {metadata: KubeObject['metadata'] & {managedFields?: ManagedEntry[]; resourceVersion?: string}}

/**
 * The objects a Helm release manifest names; namespaced ones without a namespace are in the release's.
 * js-yaml: only each document's apiVersion, kind and metadata strings are read, and it parses
 * Cilium's manifest several times faster than the `yaml` package (bench/yaml.mjs); a manifest
 * it refuses is read again with `yaml`, as before.
 */
export function releaseObjectRefs(manifest: string, releaseNamespace: string): ObjectRef[] {
  let docs: unknown[]
  try {
    docs = loadAll(manifest, undefined, {schema: CORE_SCHEMA})
  } catch {
    docs = parseAllDocuments(manifest, {version: '1.1'}).map((d) => d.toJS())
  }
  const refs: ObjectRef[] = []
  for (const doc of docs) {
    const o = doc as {apiVersion?: unknown; kind?: unknown; metadata?: {name?: unknown; namespace?: unknown}} | null | undefined
    if (!o || typeof o.apiVersion !== 'string' || typeof o.kind !== 'string' || typeof o.metadata?.name !== 'string') continue
    const namespace = typeof o.metadata.namespace === 'string' && o.metadata.namespace ? o.metadata.namespace : releaseNamespace
    refs.push({apiVersion: o.apiVersion, kind: o.kind, name: o.metadata.name, namespace})
  }
  return refs
}

/** Read-only: the objects among `refs` whose managedFields still list `talos`. */
export async function objectsManagedByTalos(kube: Kube, refs: ObjectRef[]): Promise<ObjectRef[]> {
  const live = await Promise.all(refs.map((ref) => readMeta(kube, ref)))
  return refs.filter((_, i) => hasTalosManager(live[i]))
}

/**
 * The union of two field sets as structured-merge-diff serialises them: a node is `{}` when its
 * path is a member without children, and holds "." when it is a member with children.
 */
export function unionFieldsV1(a: FieldsV1 | undefined, b: FieldsV1 | undefined): FieldsV1 {
  if (!a) return b ?? {}
  if (!b) return a
  const aLeaf = Object.keys(a).length === 0
  const bLeaf = Object.keys(b).length === 0
  if (aLeaf && bLeaf) return {}
  const out: FieldsV1 = aLeaf || bLeaf ? {'.': {}} : {}
  for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) out[key] = key === '.' ? {} : unionFieldsV1(a[key], b[key])
  return out
}

/**
 * managedFields with every `talos` entry's fields given to the Apply entry of "helm" (made from
 * the first `talos` entry when there is none) and the `talos` entries gone. Subresource entries
 * of `talos` (Talos writes none) are dropped: Helm never applies a subresource.
 */
export function managedFieldsHandedToHelm(managedFields: ManagedEntry[]): ManagedEntry[] {
  const talos = managedFields.filter((f) => f.manager === TALOS_FIELD_MANAGER && !f.subresource)
  const kept = managedFields.filter((f) => f.manager !== TALOS_FIELD_MANAGER)
  if (talos.length === 0) return kept
  const isHelmApply = (f: ManagedEntry) => f.manager === HELM_FIELD_MANAGER && f.operation === 'Apply' && !f.subresource
  const fields = talos.reduce<FieldsV1 | undefined>((set, f) => unionFieldsV1(set, f.fieldsV1), undefined) ?? {}
  const existing = kept.find(isHelmApply)
  if (existing) return kept.map((f) => (f === existing ? {...f, fieldsV1: unionFieldsV1(f.fieldsV1, fields)} : f))
  const {apiVersion, time} = talos[0]!
  return [...kept, {manager: HELM_FIELD_MANAGER, operation: 'Apply', apiVersion, time, fieldsType: 'FieldsV1', fieldsV1: fields}]
}

/** Hands the fields of `talos` to "helm" on each object (idempotent); returns the objects changed. */
export async function handTalosFieldsToHelm(kube: Kube, refs: ObjectRef[]): Promise<ObjectRef[]> {
  const changed: ObjectRef[] = []
  for (const ref of refs) if (await handOverObjectFields(kube, ref)) changed.push(ref)
  return changed
}

/**
 * One object: a merge patch replacing managedFields, on the resourceVersion it was computed
 * from, so a write landing in between (a controller, a helm run) is a conflict and the list is
 * computed again instead of being overwritten with a stale copy. One PATCH per object: a run
 * killed between two objects leaves each either untouched or handed over, never half.
 * `extraMetadata` goes into the same patch (the inventory's owning annotation).
 */
export async function handOverObjectFields(kube: Kube, ref: ObjectRef, extraMetadata: Record<string, unknown> = {}): Promise<boolean> {
  for (let attempt = 1; ; attempt++) {
    const live = await readMeta(kube, ref)
    if (!live) return false
    const hasExtra = Object.keys(extraMetadata).length > 0
    if (!hasTalosManager(live) && !hasExtra) return false
    const managedFields = hasTalosManager(live) ? managedFieldsHandedToHelm(live.metadata.managedFields!) : undefined
    const body = {metadata: {...extraMetadata, ...(managedFields ? {managedFields} : {}), resourceVersion: live.metadata.resourceVersion}}
    try {
      const {item} = await resolvePath(kube, ref)
      await kube.request('PATCH', item, {body, contentType: 'application/merge-patch+json', query: {fieldManager: FIELD_MANAGER}})
      return managedFields !== undefined
    } catch (error) {
      if (isNotFound(error)) return false
      if (isConflict(error) && attempt < 5) continue
      const detail = error instanceof KubeApiError ? (error.status.message ?? error.message) : (error as Error).message
      throw new IchorError(`handing the fields of field manager "${TALOS_FIELD_MANAGER}" on ${describeObject(ref)} to "${HELM_FIELD_MANAGER}": ${detail}`, {
        cause: error,
      })
    }
  }
}

export function hasTalosManager(live: {metadata?: {managedFields?: ManagedEntry[]}} | undefined): boolean {
  return (live?.metadata?.managedFields ?? []).some((f) => f.manager === TALOS_FIELD_MANAGER)
}

function readMeta(kube: Kube, ref: ObjectRef): Promise<LiveMeta | undefined> {
  return getObject<LiveMeta>(kube, ref, {metadataOnly: true})
}
