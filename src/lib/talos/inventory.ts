// Talos's inventory of bootstrap-manifest objects (Talos 1.13+): the ConfigMap
// kube-system/talos-bootstrap-manifests-inventory, one `data` key per object, and the
// `config.k8s.io/owning-inventory` annotation on each object Talos created.
// `talosctl upgrade-k8s` prunes every inventory key that is no longer in the manifests,
// so Cilium must leave the inventory once Helm owns it. See INVENTORY.md for the source.
import {
  ApisApi,
  CoreV1Api,
  KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  type KubernetesObject,
  type V1ConfigMap,
} from '@kubernetes/client-node'
import {IchorError} from '../errors/errors.js'
import {HELM_RELEASE_NAME_ANNOTATION, HELM_RELEASE_NAMESPACE_ANNOTATION} from './ownership.js'

export const TALOS_INVENTORY = {namespace: 'kube-system', name: 'talos-bootstrap-manifests-inventory'} as const
export const OWNING_INVENTORY_ANNOTATION = 'config.k8s.io/owning-inventory'
const FIELD_MANAGER = 'ichor-bootstrap'
/** Talos's field manager (constants.KubernetesFieldManagerName). */
export const TALOS_FIELD_MANAGER = 'talos'
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

const CILIUM_RELEASE: HelmReleaseRef = {release: 'cilium', namespace: 'kube-system'}

export interface ReleaseInventoryState {
  /** False on a cluster bootstrapped by Talos < 1.13 (nothing to hand over there). */
  inventoryExists: boolean
  /** Inventory keys whose live object carries the release's Helm ownership annotations. */
  entries: string[]
}

/** Read-only: which inventory entries belong to the Helm release (by the live objects' annotations). */
export async function findReleaseInTalosInventory(kc: KubeConfig, release: HelmReleaseRef = CILIUM_RELEASE): Promise<ReleaseInventoryState> {
  const cm = await readInventory(kc)
  if (!cm) return {inventoryExists: false, entries: []}
  const live = new LiveObjects(kc)
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
export async function isCiliumInTalosInventory(kc: KubeConfig, release: HelmReleaseRef = CILIUM_RELEASE): Promise<boolean> {
  return (await findReleaseInTalosInventory(kc, release)).entries.length > 0
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
export async function removeReleaseFromTalosInventory(kc: KubeConfig, release: HelmReleaseRef = CILIUM_RELEASE): Promise<InventoryRemoval> {
  const {inventoryExists, entries} = await findReleaseInTalosInventory(kc, release)
  if (!inventoryExists || entries.length === 0) return {inventoryExists, removedEntries: []}
  const live = new LiveObjects(kc)
  for (const key of entries) await live.releaseFromTalos(parseInventoryKey(key), OWNING_INVENTORY_ANNOTATION)
  await removeInventoryKeys(kc, entries)
  return {inventoryExists, removedEntries: entries}
}

export const removeCiliumFromTalosInventory = (kc: KubeConfig): Promise<InventoryRemoval> => removeReleaseFromTalosInventory(kc, CILIUM_RELEASE)

async function readInventory(kc: KubeConfig): Promise<V1ConfigMap | undefined> {
  try {
    return await kc.makeApiClient(CoreV1Api).readNamespacedConfigMap(TALOS_INVENTORY)
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
async function removeInventoryKeys(kc: KubeConfig, keys: string[]): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api)
  for (let attempt = 1; ; attempt++) {
    const cm = await readInventory(kc)
    if (!cm) return
    const data = {...(cm.data ?? {})}
    if (!keys.some((k) => k in data)) return
    for (const k of keys) delete data[k]
    try {
      await core.replaceNamespacedConfigMap({...TALOS_INVENTORY, body: {...cm, data}})
      return
    } catch (error) {
      if ((error as {code?: number}).code === 409 && attempt < 5) continue
      throw kubeError(`updating ${TALOS_INVENTORY.namespace}/${TALOS_INVENTORY.name}`, error)
    }
  }
}

/** Reads objects named only by group/kind (the inventory has no version), via discovery. */
class LiveObjects {
  private readonly objects: KubernetesObjectApi
  private versions?: Promise<Map<string, string>>
  constructor(private readonly kc: KubeConfig) {
    this.objects = KubernetesObjectApi.makeApiClient(kc)
  }

  async read(ref: InventoryRef): Promise<KubernetesObject | undefined> {
    const apiVersion = await this.apiVersion(ref.group)
    if (!apiVersion) return undefined // the group is gone (a CRD deleted): nothing to hand over
    try {
      return await this.objects.read({apiVersion, kind: ref.kind, metadata: {name: ref.name, ...(ref.namespace ? {namespace: ref.namespace} : {})}})
    } catch (error) {
      if (isNotFound(error)) return undefined
      throw kubeError(`reading ${describe(ref)}`, error)
    }
  }

  /**
   * Drops Talos's claim on an object: the owning-inventory annotation, and the field
   * manager `talos` from managedFields, so a later server-side `helm upgrade` (Helm 4)
   * changing a value does not conflict with a manager that no longer applies anything.
   */
  async releaseFromTalos(ref: InventoryRef, annotation: string): Promise<void> {
    const apiVersion = await this.apiVersion(ref.group)
    if (!apiVersion) return
    const live = await this.read(ref)
    if (!live) return
    const managedFields = (live.metadata?.managedFields ?? []).filter((f) => f.manager !== TALOS_FIELD_MANAGER)
    const body = {
      apiVersion,
      kind: ref.kind,
      metadata: {
        name: ref.name,
        ...(ref.namespace ? {namespace: ref.namespace} : {}),
        annotations: {[annotation]: null},
        // A merge patch replaces the list; an empty list would mean "leave as is", so keep at least one entry.
        ...(managedFields.length > 0 && managedFields.length !== live.metadata?.managedFields?.length ? {managedFields} : {}),
      },
    }
    try {
      await this.objects.patch(body as unknown as KubernetesObject, undefined, undefined, FIELD_MANAGER, undefined, PatchStrategy.MergePatch)
    } catch (error) {
      if (isNotFound(error)) return
      throw kubeError(`removing ${annotation} from ${describe(ref)}`, error)
    }
  }

  private async apiVersion(group: string): Promise<string | undefined> {
    if (group === '') return 'v1'
    this.versions ??= this.kc
      .makeApiClient(ApisApi)
      .getAPIVersions()
      .then((list) => new Map(list.groups.map((g) => [g.name, g.preferredVersion?.groupVersion ?? g.versions[0]!.groupVersion])))
    return (await this.versions).get(group)
  }
}

function describe(ref: InventoryRef): string {
  return `${ref.kind}${ref.group ? `.${ref.group}` : ''} ${ref.namespace ? `${ref.namespace}/` : ''}${ref.name}`
}

function isNotFound(error: unknown): boolean {
  return (error as {code?: number}).code === 404
}

function kubeError(action: string, error: unknown): IchorError {
  const body = (error as {body?: unknown}).body
  let detail = (error as Error).message
  if (typeof body === 'string') {
    try {
      detail = (JSON.parse(body) as {message?: string}).message ?? detail
    } catch {
      // not JSON: keep the client's message
    }
  }
  return new IchorError(`${action}: ${detail}`, {cause: error})
}
