// Talos's field manager on the objects of a Helm release. Every Talos version creates the
// inline-manifest objects with field manager `talos` (v1.12: a plain Create; v1.13+: a
// server-side apply), and nothing ever removes that entry: Talos below 1.13 has no inventory
// to hand over, and from 1.13 only the objects still in the inventory were cleared. While
// `talos` co-owns a field, Helm 4's server-side upgrade cannot drop it when a later values
// change stops rendering it (a field leaves an object only when no manager owns it any more).
// So the hand-over strips `talos` from every object the release manifest names.
import {CORE_SCHEMA, loadAll} from 'js-yaml'
import {parseAllDocuments} from 'yaml'
import {IchorError} from '../errors/errors.js'
import {isNotFound, KubeApiError, type Kube} from '../kube/client.js'
import {describeObject, getObject, resolvePath, type KubeObject, type ObjectRef} from '../kube/objects.js'
import {FIELD_MANAGER} from '../constants.js'

/** Talos's field manager (constants.KubernetesFieldManagerName; v1.12 writes the literal "talos"). */
export const TALOS_FIELD_MANAGER = 'talos'

type ManagedEntry = {manager?: string}
type LiveMeta = KubeObject & {metadata: KubeObject['metadata'] & {managedFields?: ManagedEntry[]}}

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

/** Drops `talos` from each object's managedFields (idempotent); returns the objects changed. */
export async function stripTalosFieldManager(kube: Kube, refs: ObjectRef[]): Promise<ObjectRef[]> {
  const changed: ObjectRef[] = []
  for (const ref of refs) {
    const live = await readMeta(kube, ref)
    if (!hasTalosManager(live)) continue
    await patchWithoutTalos(kube, ref, live!.metadata.managedFields!)
    changed.push(ref)
  }
  return changed
}

/**
 * A merge patch that replaces managedFields with the list minus `talos`. When `talos` is the
 * only manager, `[{}]` is the API's way to clear the list (an empty list means "unchanged").
 */
async function patchWithoutTalos(kube: Kube, ref: ObjectRef, managedFields: ManagedEntry[], extraMetadata: Record<string, unknown> = {}): Promise<void> {
  const kept = managedFields.filter((f) => f.manager !== TALOS_FIELD_MANAGER)
  const body = {metadata: {...extraMetadata, managedFields: kept.length > 0 ? kept : [{}]}}
  try {
    const {item} = await resolvePath(kube, ref)
    await kube.request('PATCH', item, {body, contentType: 'application/merge-patch+json', query: {fieldManager: FIELD_MANAGER}})
  } catch (error) {
    if (isNotFound(error)) return
    const detail = error instanceof KubeApiError ? (error.status.message ?? error.message) : (error as Error).message
    throw new IchorError(`removing field manager "${TALOS_FIELD_MANAGER}" from ${describeObject(ref)}: ${detail}`, {cause: error})
  }
}

export function hasTalosManager(live: {metadata?: {managedFields?: ManagedEntry[]}} | undefined): boolean {
  return (live?.metadata?.managedFields ?? []).some((f) => f.manager === TALOS_FIELD_MANAGER)
}

function readMeta(kube: Kube, ref: ObjectRef): Promise<LiveMeta | undefined> {
  return getObject<LiveMeta>(kube, ref, {metadataOnly: true})
}
