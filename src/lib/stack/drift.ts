// Object drift of a stack component: the objects its published bundle declares, each checked
// by a server-side dry-run apply as Argo CD's own field manager (forced, as Argo CD's sync
// is). If the result differs from the live object, a sync would change it: someone changed it
// out of band. managedFields, resourceVersion, generation and status are not compared (a
// dry run moves the first three; status is the controllers'). An object whose live version
// was found in line with the same bundle object before is not dry-run again (drift-cache.ts).
import {createHash} from 'node:crypto'
import {isDeepStrictEqual} from 'node:util'
import {untarSync} from '../chart/archive.js'
import {isNotFound, KubeApiError, type Kube} from '../kube/client.js'
import {describeObject, PARTIAL_OBJECT_METADATA_LIST, resolvePath, refOf, type KubeObject} from '../kube/objects.js'
import type {OciClient} from '../oci/client.js'
import {ARGOCD_FIELD_MANAGER} from './argocd.js'
import {driftCache, driftCacheDir, indexedObject, objectHash, type IndexedObject} from './drift-cache.js'
import {parseObjects} from './objects.js'
import {BUNDLE_REPOSITORY_PREFIX, COMPONENT_NAMESPACE} from './orders.js'
import type {StackComponent} from '../state/installation-types.js'
import {once, type Once} from '../tasks/memo.js'

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
  const head = await client.headManifest(repo, tag)
  return head?.digest ? readManifestAt(client, repo, head.digest) : undefined
}

/** The manifest.yaml of the bundle at `digest` (the digest, not the tag: what was indexed is what is read). */
async function readManifestAt(client: OciClient, repo: string, digest: string): Promise<string | undefined> {
  const {manifest} = await client.getManifest(repo, digest)
  for (const layer of (manifest as {layers?: {digest: string}[]}).layers ?? []) {
    const text = untarSync(await client.getBlob(repo, layer.digest), `${repo}@${digest}`)
      .get('manifest.yaml')
      ?.toString('utf8')
    if (text !== undefined) return text
  }
  return undefined
}

/**
 * The drifted objects of the bundle `tag`; undefined when the registry lost it (reported elsewhere).
 * With the cache (drift-cache.ts), an object whose live version was already found in line with
 * the same bundle object costs one metadata-only GET; the others a GET and a dry run.
 */
export async function readBundleDrift(
  kube: Kube,
  client: OciClient,
  component: StackComponent,
  tag: string,
  opts: {round?: DriftRound; /** What the caller just found the tag at (no second HEAD). */ digest?: string} = {},
): Promise<DriftedObject[] | undefined> {
  const repo = `${BUNDLE_REPOSITORY_PREFIX}/${component}`
  const round = opts.round ?? newDriftRound()
  const digest = opts.digest ?? (await client.headManifest(repo, tag))?.digest
  if (!digest) return undefined
  const load = once(() => readManifestAt(client, repo, digest).then((text) => (text === undefined ? undefined : parseObjects(text, `${component} ${tag}`))))
  const cache = driftCache(kube.server, component)
  const fromBundle = async () => {
    const loaded = await load()
    const index = loaded?.map(indexedObject)
    if (index) cache?.writeBundleIndex(digest, index)
    return index
  }
  const index = cache?.bundleIndex(digest) ?? (await fromBundle())
  if (!index) return undefined
  const namespace = COMPONENT_NAMESPACE[component]
  const results = await inPool(index, 8, async (entry, i) => {
    // Read before the dry run: a change landing during it leaves a verdict keyed on the older basis.
    const basis = cache && entry.kind !== 'Secret' ? await verdictBasis(kube, round, entry) : undefined
    if (cache && basis !== undefined) {
      const live = await liveVersion(kube, round, entry, namespace)
      if (live && cache.unchanged(live.uid, live.resourceVersion, entry.hash, basis)) return undefined
    }
    const object = (await load())?.[i]
    // An index that does not describe the bundle (a damaged cache file) is not trusted for this object.
    const hash = object && objectHash(object)
    if (!object)
      return {
        object: describeObject({kind: entry.kind, name: entry.name, namespace: entry.namespace}),
        fields: [`not in bundle ${digest}: remove ${driftCacheDir()} and run again`],
      }
    const verdict = await objectDrift(kube, object, namespace)
    if (!verdict.drifted && verdict.live && basis !== undefined && hash === entry.hash)
      cache?.recordUnchanged(verdict.live.uid, verdict.live.resourceVersion, entry.hash, basis)
    return verdict.drifted
  })
  cache?.save()
  return results.filter((r): r is DriftedObject => r !== undefined)
}

type Version = {uid: string; resourceVersion: string}

/**
 * One look at the cluster: metadata-only LISTs of each kind in each namespace the bundles
 * name, shared by the components checked together (both list ClusterRoles and CRDs). A few
 * dozen requests instead of one GET per object, and no CRD schema fetched. A new round for
 * every look: a listing is never reused once objects may have changed.
 */
export interface DriftRound {
  listings: Map<string, Promise<Map<string, Version>>>
  /** The API server's version and admission configuration, read once per round. */
  server?: Once<string>
}

export function newDriftRound(): DriftRound {
  return {listings: new Map()}
}

const CRD = {apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition'}
/** What can mutate or refuse an apply besides the object's schema (kubernetes v1.36 admissionregistration.k8s.io/v1). */
const ADMISSION_KINDS = ['MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration', 'ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']

/**
 * What a dry run's verdict depends on besides the live object and the body applied: the API
 * server's version, its admission configuration (webhooks and admission policies: name, uid,
 * resourceVersion) and, for a custom resource, its CRD's uid and resourceVersion (which moves
 * with every generation: a new schema defaults, prunes or refuses differently; `cni upgrade`
 * makes one). Undefined, so no verdict is kept or used, for a custom resource whose CRD cannot
 * be listed. Admission objects that may not be listed count as unchanged (a role without that
 * right sees a verdict kept across an admission change; it still sees every object change).
 */
async function verdictBasis(kube: Kube, round: DriftRound, entry: IndexedObject): Promise<string | undefined> {
  round.server ??= once(() => serverBasis(kube, round))
  const server = await round.server()
  const group = entry.apiVersion.includes('/') ? entry.apiVersion.split('/')[0]! : ''
  // A CRD's group has a dot and is not one of Kubernetes' own (*.k8s.io needs an approval annotation).
  if (!group.includes('.') || group.endsWith('.k8s.io')) return server
  const resource = await kube.resourceFor(entry.apiVersion, entry.kind)
  const crd = resource && (await liveVersion(kube, round, {...CRD, name: `${resource.plural}.${group}`, hash: ''}, ''))
  return crd ? `${server}\0${crd.uid}/${crd.resourceVersion}` : undefined
}

async function serverBasis(kube: Kube, round: DriftRound): Promise<string> {
  const version = kube.serverVersion ?? (await kube.request<{gitVersion?: string}>('GET', '/version')).gitVersion ?? ''
  const admission = await Promise.all(
    ADMISSION_KINDS.map(async (kind) => {
      const apiVersion = 'admissionregistration.k8s.io/v1'
      if (!(await kube.resourceFor(apiVersion, kind))) return `${kind}:-`
      const items = [...(await listing(kube, round, (await resolvePath(kube, {apiVersion, kind})).collection)).entries()]
        .map(([name, v]) => `${name}/${v.uid}/${v.resourceVersion}`)
        .sort()
      return `${kind}:${items.join(',')}`
    }),
  )
  return createHash('sha256')
    .update([version, ...admission].join('\n'))
    .digest('hex')
    .slice(0, 32)
}

/** uid and resourceVersion of the live object; undefined when it or its kind is absent. */
async function liveVersion(kube: Kube, round: DriftRound, entry: IndexedObject, namespace: string): Promise<Version | undefined> {
  const resource = await kube.resourceFor(entry.apiVersion, entry.kind)
  if (!resource) return undefined
  const {collection} = await resolvePath(kube, {
    apiVersion: entry.apiVersion,
    kind: entry.kind,
    namespace: resource.namespaced ? (entry.namespace ?? namespace) : undefined,
  })
  return (await listing(kube, round, collection)).get(entry.name)
}

/** uid and resourceVersion of every object of a collection, by name: one metadata-only LIST per round. */
function listing(kube: Kube, round: DriftRound, collection: string): Promise<Map<string, Version>> {
  const byPath = round.listings
  let found = byPath.get(collection)
  if (!found) {
    found = kube.request<{items?: KubeObject[]}>('GET', collection, {accept: PARTIAL_OBJECT_METADATA_LIST}).then(
      (list) => {
        const out = new Map<string, Version>()
        for (const item of list.items ?? []) {
          const {name, uid, resourceVersion} = item.metadata as {name: string; uid?: string; resourceVersion?: string}
          if (uid && resourceVersion) out.set(name, {uid, resourceVersion})
        }
        return out
      },
      (error) => {
        // Not allowed to list (a role that may only get): every object of the kind is checked in full.
        if (error instanceof KubeApiError && (error.code === 403 || error.code === 404)) return new Map<string, Version>()
        throw error
      },
    )
    byPath.set(collection, found)
    found.catch(() => byPath.delete(collection))
  }
  return found
}

interface DriftVerdict {
  drifted?: DriftedObject
  /** The live object the dry run was made against. */
  live?: {uid: string; resourceVersion: string}
}

async function objectDrift(kube: Kube, object: KubeObject, namespace: string): Promise<DriftVerdict> {
  const resource = await kube.resourceFor(object.apiVersion, object.kind)
  if (!resource) return {drifted: {object: describeObject(object), fields: [`${object.apiVersion} ${object.kind} is not served`]}}
  // A namespaced object without a namespace goes to the Application's destination, as Argo CD syncs it.
  const ns = resource.namespaced ? (object.metadata.namespace ?? namespace) : undefined
  const path = await resolvePath(kube, {...refOf(object), namespace: ns})
  const label = describeObject({kind: object.kind, name: object.metadata.name, namespace: ns})
  const live = await kube.request<KubeObject>('GET', path.item).catch((error) => {
    if (isNotFound(error)) return undefined
    throw error
  })
  if (!live) return {drifted: {object: label, fields: ['missing']}}
  const annotations = {...object.metadata.annotations, ...pick(live.metadata.annotations, TRACKING_ANNOTATION)}
  const labels = {...object.metadata.labels, ...pick(live.metadata.labels, TRACKING_LABEL)}
  const body = {
    ...object,
    metadata: {...object.metadata, namespace: ns, ...(Object.keys(annotations).length ? {annotations} : {}), ...(Object.keys(labels).length ? {labels} : {})},
  }
  let dry: KubeObject
  try {
    dry = await kube.request<KubeObject>('PATCH', path.item, {
      body,
      contentType: 'application/apply-patch+yaml',
      query: {fieldManager: ARGOCD_FIELD_MANAGER, force: true, dryRun: 'All', fieldValidation: 'Strict'},
    })
  } catch (error) {
    if (error instanceof KubeApiError) return {drifted: {object: label, fields: [`a sync would fail: ${error.status.message ?? error.message}`]}}
    throw error
  }
  const [a, b] = [comparable(live), comparable(dry)]
  const {uid, resourceVersion} = live.metadata as {uid?: string; resourceVersion?: string}
  if (isDeepStrictEqual(a, b)) return {live: uid && resourceVersion ? {uid, resourceVersion} : undefined}
  const fields: string[] = []
  differingPaths(a, b, '', fields)
  return {drifted: {object: label, fields}}
}

function pick(map: Record<string, string> | undefined, key: string): Record<string, string> {
  return map?.[key] === undefined ? {} : {[key]: map[key]!}
}

function comparable(o: KubeObject): unknown {
  const {
    managedFields: _m,
    resourceVersion: _r,
    generation: _g,
    ...metadata
  } = o.metadata as KubeObject['metadata'] & {managedFields?: unknown; generation?: number}
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

/** f over every item, at most `size` at a time, results in the items' order. */
async function inPool<T, R>(items: readonly T[], size: number, f: (x: T, i: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length)
  let next = 0
  const worker = async () => {
    while (next < items.length) {
      const i = next++
      out[i] = await f(items[i]!, i)
    }
  }
  await Promise.all(Array.from({length: Math.min(size, items.length)}, worker))
  return out
}
