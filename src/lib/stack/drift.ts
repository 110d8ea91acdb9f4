// Object drift of a stack component: the objects its published bundle declares, each checked
// by a server-side dry-run apply as Argo CD's own field manager (forced, as Argo CD's sync
// is). If the result differs from the live object, a sync would change it: someone changed it
// out of band. managedFields, resourceVersion, generation and status are not compared (a
// dry run moves the first three; status is the controllers').
import {isDeepStrictEqual} from 'node:util'
import {untarSync} from '../chart/archive.js'
import {isNotFound, KubeApiError, type Kube} from '../kube/client.js'
import {describeObject, resolvePath, refOf, type KubeObject} from '../kube/objects.js'
import type {OciClient} from '../oci/client.js'
import {ARGOCD_FIELD_MANAGER} from './argocd.js'
import {parseObjects} from './objects.js'
import {COMPONENT_NAMESPACE} from './orders.js'
import type {StackComponent} from './policies.js'
import {BUNDLE_REPOSITORY_PREFIX} from './prepare.js'

export interface DriftedObject {
  /** `Deployment argocd/argocd-server` */
  object: string
  /** The first fields a sync would change (`spec.replicas`), or why it cannot be compared. */
  fields: string[]
}

/**
 * Argo CD puts its tracking marks on what it syncs (argoproj/argo-cd util/argo/resource_tracking.go:
 * the `argocd.argoproj.io/tracking-id` annotation, or the `app.kubernetes.io/instance` label),
 * so they are part of what it applies; the bundle carries none. They are copied from the live
 * object so the dry run does not report their removal.
 */
const TRACKING_ANNOTATION = 'argocd.argoproj.io/tracking-id'
const TRACKING_LABEL = 'app.kubernetes.io/instance'

/** The manifest.yaml of a published bundle (undefined: the registry does not hold the tag). */
export async function readPublishedManifest(client: OciClient, component: StackComponent, tag: string): Promise<string | undefined> {
  const repo = `${BUNDLE_REPOSITORY_PREFIX}/${component}`
  if (!(await client.headManifest(repo, tag))) return undefined
  const {manifest} = await client.getManifest(repo, tag)
  for (const layer of (manifest as {layers?: {digest: string}[]}).layers ?? []) {
    const text = untarSync(await client.getBlob(repo, layer.digest), `${repo}:${tag}`).get('manifest.yaml')?.toString('utf8')
    if (text !== undefined) return text
  }
  return undefined
}

/** The drifted objects of the bundle `tag`; undefined when the registry lost it (reported elsewhere). */
export async function readBundleDrift(kube: Kube, client: OciClient, component: StackComponent, tag: string): Promise<DriftedObject[] | undefined> {
  const text = await readPublishedManifest(client, component, tag)
  if (text === undefined) return undefined
  const objects = parseObjects(text, `${component} ${tag}`)
  const results = await inBatches(objects, 8, (o) => objectDrift(kube, o, COMPONENT_NAMESPACE[component]))
  return results.filter((r): r is DriftedObject => r !== undefined)
}

async function objectDrift(kube: Kube, object: KubeObject, namespace: string): Promise<DriftedObject | undefined> {
  const resource = await kube.resourceFor(object.apiVersion, object.kind)
  if (!resource) return {object: describeObject(object), fields: [`${object.apiVersion} ${object.kind} is not served`]}
  // A namespaced object without a namespace goes to the Application's destination, as Argo CD syncs it.
  const ns = resource.namespaced ? (object.metadata.namespace ?? namespace) : undefined
  const path = await resolvePath(kube, {...refOf(object), namespace: ns})
  const label = describeObject({kind: object.kind, name: object.metadata.name, namespace: ns})
  const live = await kube.request<KubeObject>('GET', path.item).catch((error) => {
    if (isNotFound(error)) return undefined
    throw error
  })
  if (!live) return {object: label, fields: ['missing']}
  const annotations = {...object.metadata.annotations, ...pick(live.metadata.annotations, TRACKING_ANNOTATION)}
  const labels = {...object.metadata.labels, ...pick(live.metadata.labels, TRACKING_LABEL)}
  const body = {...object, metadata: {...object.metadata, namespace: ns, ...(Object.keys(annotations).length ? {annotations} : {}), ...(Object.keys(labels).length ? {labels} : {})}}
  let dry: KubeObject
  try {
    dry = await kube.request<KubeObject>('PATCH', path.item, {
      body,
      contentType: 'application/apply-patch+yaml',
      query: {fieldManager: ARGOCD_FIELD_MANAGER, force: true, dryRun: 'All', fieldValidation: 'Strict'},
    })
  } catch (error) {
    if (error instanceof KubeApiError) return {object: label, fields: [`a sync would fail: ${error.status.message ?? error.message}`]}
    throw error
  }
  const [a, b] = [comparable(live), comparable(dry)]
  if (isDeepStrictEqual(a, b)) return undefined
  const fields: string[] = []
  differingPaths(a, b, '', fields)
  return {object: label, fields}
}

function pick(map: Record<string, string> | undefined, key: string): Record<string, string> {
  return map?.[key] === undefined ? {} : {[key]: map[key]!}
}

function comparable(o: KubeObject): unknown {
  const {managedFields: _m, resourceVersion: _r, generation: _g, ...metadata} = o.metadata as KubeObject['metadata'] & {managedFields?: unknown; generation?: number}
  const {status: _s, ...rest} = o as KubeObject & {status?: unknown}
  return {...rest, metadata}
}

/** Up to three paths where `a` and `b` differ (`spec.template.spec.containers[0].image`). */
function differingPaths(a: unknown, b: unknown, at: string, out: string[]): void {
  if (out.length >= 3 || isDeepStrictEqual(a, b)) return
  const isObj = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null
  if (Array.isArray(a) && Array.isArray(b) && a.length === b.length) {
    a.forEach((x, i) => differingPaths(x, b[i], `${at}[${i}]`, out))
    return
  }
  if (isObj(a) && isObj(b) && !Array.isArray(a) && !Array.isArray(b)) {
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) differingPaths(a[k], b[k], at ? `${at}.${k}` : k, out)
    return
  }
  out.push(at || '(whole object)')
}

async function inBatches<T, R>(items: T[], size: number, f: (x: T) => Promise<R>): Promise<R[]> {
  const out: R[] = []
  for (let i = 0; i < items.length; i += size) out.push(...(await Promise.all(items.slice(i, i + size).map(f))))
  return out
}
