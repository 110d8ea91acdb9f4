// Generic objects by apiVersion/kind/name: URL resolution through discovery, get, list
// and delete. Objects stay plain JSON end to end.
import {IchorError} from '../errors/errors.js'
import {type ApiResource, isNotFound, type Kube} from './client.js'

export interface ObjectMeta {
  name: string
  namespace?: string
  resourceVersion?: string
  generation?: number
  uid?: string
  labels?: Record<string, string>
  annotations?: Record<string, string>
  [key: string]: unknown
}

export interface KubeObject {
  apiVersion: string
  kind: string
  metadata: ObjectMeta
  [key: string]: unknown
}

export interface ObjectRef {
  apiVersion: string
  kind: string
  name: string
  namespace?: string
}

/** `Kind ns/name` or `Kind name`, for messages. */
export function describeObject(ref: {kind: string; name?: string; namespace?: string; metadata?: {name?: string; namespace?: string}}): string {
  const name = ref.name ?? ref.metadata?.name ?? '<unnamed>'
  const namespace = ref.namespace ?? ref.metadata?.namespace
  return `${ref.kind} ${namespace ? `${namespace}/` : ''}${name}`
}

export function refOf(object: KubeObject): ObjectRef {
  return {apiVersion: object.apiVersion, kind: object.kind, name: object.metadata.name, namespace: object.metadata.namespace}
}

export interface ResolvedPath {
  resource: ApiResource
  /** Namespace actually used (undefined for cluster-scoped kinds). */
  namespace?: string
  /** URL of the collection (POST, list). */
  collection: string
  /** URL of the object itself. */
  item: string
}

/** Thrown when the API server does not serve a kind, e.g. its CRD is not installed yet. */
export class KindNotServedError extends IchorError {
  constructor(kube: Kube, apiVersion: string, kind: string) {
    super(`the API server ${kube.server} does not serve ${kind} in ${apiVersion}`, {
      hint: 'install the CustomResourceDefinition that defines it first (and wait until it is Established)',
    })
    this.name = 'KindNotServedError'
  }
}

export async function resolvePath(kube: Kube, ref: Omit<ObjectRef, 'name'> & {name?: string; metadata?: never}): Promise<ResolvedPath> {
  const resource = await kube.resourceFor(ref.apiVersion, ref.kind)
  if (!resource) throw new KindNotServedError(kube, ref.apiVersion, ref.kind)
  const root = ref.apiVersion.includes('/') ? `/apis/${ref.apiVersion}` : `/api/${ref.apiVersion}`
  let collection: string
  let namespace: string | undefined
  if (resource.namespaced) {
    if (!ref.namespace) {
      throw new IchorError(`${describeObject(ref)} has no namespace, and ${ref.kind} is namespaced`)
    }
    namespace = ref.namespace
    collection = `${root}/namespaces/${encodeURIComponent(namespace)}/${resource.plural}`
  } else {
    collection = `${root}/${resource.plural}`
  }
  const item = ref.name === undefined ? collection : `${collection}/${encodeURIComponent(ref.name)}`
  return {resource, namespace, collection, item}
}

/** The object's paths, or undefined when its kind is not served (so no such object can exist). */
async function resolveServedPath(kube: Kube, ref: ObjectRef): Promise<ResolvedPath | undefined> {
  try {
    return await resolvePath(kube, ref)
  } catch (error) {
    if (error instanceof KindNotServedError) return undefined
    throw error
  }
}

/**
 * The object, or undefined when it or its kind is absent. With `metadataOnly` the API
 * server answers with PartialObjectMetadata: an existence or version check that does
 * not fetch a CRD's whole schema.
 */
export async function getObject<T extends KubeObject = KubeObject>(kube: Kube, ref: ObjectRef, options: {metadataOnly?: boolean} = {}): Promise<T | undefined> {
  const path = await resolveServedPath(kube, ref)
  if (!path) return undefined
  try {
    return await kube.request<T>('GET', path.item, options.metadataOnly ? {accept: PARTIAL_OBJECT_METADATA} : {})
  } catch (error) {
    if (isNotFound(error)) return undefined
    throw error
  }
}

export const PARTIAL_OBJECT_METADATA = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1'
export const PARTIAL_OBJECT_METADATA_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1'

export async function listObjects<T extends KubeObject = KubeObject>(
  kube: Kube,
  ref: {apiVersion: string; kind: string; namespace?: string},
  options: {labelSelector?: string; fieldSelector?: string} = {},
): Promise<T[]> {
  const path = await resolvePath(kube, ref)
  const list = await kube.request<{items: T[]}>('GET', path.collection, {
    query: {labelSelector: options.labelSelector, fieldSelector: options.fieldSelector},
  })
  // List items carry no apiVersion/kind; put them back so they can be passed on as objects.
  return list.items.map((item) => ({...item, apiVersion: ref.apiVersion, kind: ref.kind}))
}

export interface DeleteOptions {
  /** Only delete this version of the object (optimistic concurrency). */
  resourceVersion?: string
  propagationPolicy?: 'Background' | 'Foreground' | 'Orphan'
  dryRun?: boolean
}

/** Deletes the object; 'absent' when it was not there. */
export async function deleteObject(kube: Kube, ref: ObjectRef, options: DeleteOptions = {}): Promise<'deleted' | 'absent'> {
  const path = await resolveServedPath(kube, ref)
  if (!path) return 'absent'
  try {
    await kube.request('DELETE', path.item, {
      query: {dryRun: options.dryRun ? 'All' : undefined},
      body: {
        apiVersion: 'v1',
        kind: 'DeleteOptions',
        propagationPolicy: options.propagationPolicy ?? 'Background',
        ...(options.resourceVersion ? {preconditions: {resourceVersion: options.resourceVersion}} : {}),
      },
    })
    return 'deleted'
  } catch (error) {
    if (isNotFound(error)) return 'absent'
    throw error
  }
}
