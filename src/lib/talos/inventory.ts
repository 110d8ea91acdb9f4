// Talos's inventory of bootstrap-manifest objects (Talos 1.13+): the ConfigMap
// kube-system/talos-bootstrap-manifests-inventory, one `data` key per object, and the
// `config.k8s.io/owning-inventory` annotation on each object Talos created.
// `talosctl upgrade-k8s` prunes every inventory key that is no longer in the manifests,
// so Cilium must leave the inventory once Helm owns it. See INVENTORY.md for the source.
import {IchorError} from '../errors/errors.js'
import {isConflict, isNotFound, KubeApiError, type Kube} from '../kube/client.js'
import {type KubeObject, resolvePath} from '../kube/objects.js'
import {CILIUM_RELEASE as CILIUM} from '../constants.js'
import {handOverObjectFields} from './field-manager.js'
import {HELM_RELEASE_NAME_ANNOTATION, HELM_RELEASE_NAMESPACE_ANNOTATION} from './ownership.js'
import {once} from '../tasks/memo.js'

export const TALOS_INVENTORY = {namespace: 'kube-system', name: 'talos-bootstrap-manifests-inventory'} as const
export const OWNING_INVENTORY_ANNOTATION = 'config.k8s.io/owning-inventory'
const RBAC_GROUP = 'rbac.authorization.k8s.io'

/** One inventory entry: group and kind, never a version. */
export interface InventoryRef {
  namespace: string
  name: string
  group: string
  kind: string
}

/**
 * cli-utils' ObjMetadata string: `<namespace>_<name>_<group>_<kind>`; RBAC names write
 * `:` as `__` (a `_` cannot appear in a Kubernetes name, so the split is unambiguous).
 */
export function inventoryKey(ref: InventoryRef): string {
  const name = ref.group === RBAC_GROUP ? ref.name.replaceAll(':', '__') : ref.name
  return `${ref.namespace}_${name}_${ref.group}_${ref.kind}`
}

export function parseInventoryKey(key: string): InventoryRef {
  const first = key.indexOf('_')
  const last = key.lastIndexOf('_')
  const beforeLast = key.lastIndexOf('_', last - 1)
  if (first < 0 || beforeLast <= first) throw new IchorError(`cannot read Talos inventory entry "${key}"`)
  const group = key.slice(beforeLast + 1, last)
  const rawName = key.slice(first + 1, beforeLast)
  return {
    namespace: key.slice(0, first),
    name: group === RBAC_GROUP ? rawName.replaceAll('__', ':') : rawName,
    group,
    kind: key.slice(last + 1),
  }
}

export interface HelmReleaseRef {
  release: string
  namespace: string
}

const CILIUM_RELEASE: HelmReleaseRef = {release: CILIUM.name, namespace: CILIUM.namespace}

export interface ReleaseInventoryState {
  /** False on a cluster bootstrapped by Talos < 1.13 (nothing to hand over there). */
  inventoryExists: boolean
  /** Inventory keys whose live object carries the release's Helm ownership annotations. */
  entries: string[]
}

interface ConfigMap {
  apiVersion?: string
  kind?: string
  metadata?: {name?: string; namespace?: string; resourceVersion?: string}
  data?: Record<string, string>
}

type LiveObject = KubeObject & {metadata: KubeObject['metadata'] & {managedFields?: Array<{manager?: string}>}}

const INVENTORY_PATH = `/api/v1/namespaces/${TALOS_INVENTORY.namespace}/configmaps/${TALOS_INVENTORY.name}`

/** Read-only: which inventory entries belong to the Helm release (by the live objects' annotations). */
export async function findReleaseInTalosInventory(kube: Kube, release: HelmReleaseRef = CILIUM_RELEASE): Promise<ReleaseInventoryState> {
  const cm = await readInventory(kube)
  if (!cm) return {inventoryExists: false, entries: []}
  const live = new LiveObjects(kube)
  const entries: string[] = []
  for (const key of Object.keys(cm.data ?? {}).sort()) {
    const obj = await live.read(parseInventoryKey(key))
    const annotations = obj?.metadata?.annotations ?? {}
    if (annotations[HELM_RELEASE_NAME_ANNOTATION] === release.release && annotations[HELM_RELEASE_NAMESPACE_ANNOTATION] === release.namespace) {
      entries.push(key)
    }
  }
  return {inventoryExists: true, entries}
}

/** The probe of the hand-over's inventory step: would `upgrade-k8s` still prune or re-own Cilium? */
export async function isCiliumInTalosInventory(kube: Kube, release: HelmReleaseRef = CILIUM_RELEASE): Promise<boolean> {
  return (await findReleaseInTalosInventory(kube, release)).entries.length > 0
}

export interface InventoryRemoval {
  inventoryExists: boolean
  /** Keys taken out of the inventory ConfigMap. */
  removedEntries: string[]
}

/**
 * Takes the release's objects out of Talos's inventory: first the owning-inventory
 * annotation and the `talos` field manager off each object, then their keys out of the ConfigMap (that order, so a run
 * killed in between still finds them by their keys). Idempotent; no-op without inventory.
 */
async function removeReleaseFromTalosInventory(kube: Kube, release: HelmReleaseRef = CILIUM_RELEASE): Promise<InventoryRemoval> {
  const {inventoryExists, entries} = await findReleaseInTalosInventory(kube, release)
  if (!inventoryExists || entries.length === 0) return {inventoryExists, removedEntries: []}
  const live = new LiveObjects(kube)
  for (const key of entries) await live.releaseFromTalos(parseInventoryKey(key), OWNING_INVENTORY_ANNOTATION)
  await removeInventoryKeys(kube, entries)
  return {inventoryExists, removedEntries: entries}
}

export const removeCiliumFromTalosInventory = (kube: Kube): Promise<InventoryRemoval> => removeReleaseFromTalosInventory(kube, CILIUM_RELEASE)

async function readInventory(kube: Kube): Promise<ConfigMap | undefined> {
  try {
    return await kube.request<ConfigMap>('GET', INVENTORY_PATH)
  } catch (error) {
    if (isNotFound(error)) return undefined
    throw kubeError(`reading ${TALOS_INVENTORY.namespace}/${TALOS_INVENTORY.name}`, error)
  }
}

/**
 * Talos rewrites the whole ConfigMap when it writes, so the update carries the
 * resourceVersion it read: a concurrent Talos write makes it fail (409) and it is retried
 * on the fresh copy instead of overwriting it.
 */
async function removeInventoryKeys(kube: Kube, keys: string[]): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const cm = await readInventory(kube)
    if (!cm) return
    const data = {...(cm.data ?? {})}
    if (!keys.some((k) => k in data)) return
    for (const k of keys) delete data[k]
    try {
      await kube.request('PUT', INVENTORY_PATH, {body: {...cm, data}})
      return
    } catch (error) {
      if (isConflict(error) && attempt < 5) continue
      throw kubeError(`updating ${TALOS_INVENTORY.namespace}/${TALOS_INVENTORY.name}`, error)
    }
  }
}

/** Reads objects named only by group/kind (the inventory has no version), via discovery. */
class LiveObjects {
  // The served groups' preferred versions, read once per hand-over.
  private readonly versions = once(() =>
    this.kube
      .request<{groups: Array<{name: string; preferredVersion?: {groupVersion: string}; versions: Array<{groupVersion: string}>}>}>('GET', '/apis')
      .then((list) => new Map(list.groups.map((g) => [g.name, g.preferredVersion?.groupVersion ?? g.versions[0]!.groupVersion]))),
  )
  constructor(private readonly kube: Kube) {}

  async read(ref: InventoryRef): Promise<LiveObject | undefined> {
    const item = await this.itemPath(ref)
    if (!item) return undefined // the group or kind is gone (a CRD deleted): nothing to hand over
    try {
      return await this.kube.request<LiveObject>('GET', item)
    } catch (error) {
      if (isNotFound(error)) return undefined
      throw kubeError(`reading ${describe(ref)}`, error)
    }
  }

  /**
   * Ends Talos's claim on an object: the owning-inventory annotation goes, and the fields of the
   * field manager `talos` go to Helm's manager (field-manager.ts says why), in one patch, so a
   * later server-side `helm upgrade` (Helm 4) neither conflicts with a manager that no longer
   * applies anything nor keeps a field its render dropped.
   */
  async releaseFromTalos(ref: InventoryRef, annotation: string): Promise<void> {
    const apiVersion = await this.apiVersion(ref.group)
    if (!apiVersion || !(await this.kube.resourceFor(apiVersion, ref.kind))) return
    await handOverObjectFields(
      this.kube,
      {apiVersion, kind: ref.kind, name: ref.name, namespace: ref.namespace || undefined},
      {annotations: {[annotation]: null}},
    )
  }

  /** URL of the object, or undefined when the API server no longer serves its group or kind. */
  private async itemPath(ref: InventoryRef): Promise<string | undefined> {
    const apiVersion = await this.apiVersion(ref.group)
    if (!apiVersion) return undefined
    if (!(await this.kube.resourceFor(apiVersion, ref.kind))) return undefined
    return (await resolvePath(this.kube, {apiVersion, kind: ref.kind, name: ref.name, namespace: ref.namespace || undefined})).item
  }

  private async apiVersion(group: string): Promise<string | undefined> {
    if (group === '') return 'v1'
    return (await this.versions()).get(group)
  }
}

function describe(ref: InventoryRef): string {
  return `${ref.kind}${ref.group ? `.${ref.group}` : ''} ${ref.namespace ? `${ref.namespace}/` : ''}${ref.name}`
}

function kubeError(action: string, error: unknown): IchorError {
  const detail = error instanceof KubeApiError ? (error.status.message ?? error.message) : (error as Error).message
  return new IchorError(`${action}: ${detail}`, {cause: error})
}

/** Every key of Talos's inventory (empty when there is none: Talos before 1.13, or nothing applied yet). */
export async function readTalosInventoryKeys(kube: Kube): Promise<string[]> {
  return Object.keys((await readInventory(kube))?.data ?? {}).sort()
}

/** Takes keys out of Talos's inventory (a conflict with a concurrent Talos write is retried). */
export function removeTalosInventoryKeys(kube: Kube, keys: string[]): Promise<void> {
  return keys.length === 0 ? Promise.resolve() : removeInventoryKeys(kube, keys)
}
