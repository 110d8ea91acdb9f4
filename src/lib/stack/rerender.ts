// A Preparation Kokumi rendered again without a change of content. Kokumi renders an Order
// whenever the hash of its render inputs differs from status.latestConfigHash
// (internal/controller/order_controller.go reconcileRender), and each push is a new artifact
// digest even for the same files: oras stamps the push time (org.opencontainers.image.created),
// tars the work folder with its file times (oras-go content/file, TarReproducible false) and
// Kokumi adds the previous digest as kokumi.dev/parent (internal/service/order_service.go
// ProcessOrder). After 0.14.0, main also hashes the resolved source and destination
// (internal/renderer/hash.go, commit 5b113ca), so an upgrade from 0.14.0 renders every Order
// once again. With promotion Manual such a render is no change a person must approve: only
// the files Argo CD applies decide, not the digest, the annotations or the config hash.
import {createHash} from 'node:crypto'
import {untarSync} from '../chart/archive.js'
import type {Kube} from '../kube/client.js'
import {getObject, type KubeObject} from '../kube/objects.js'
import type {OciClient} from '../oci/client.js'
import type {StackComponent} from '../state/installation-types.js'
import {orderPromotion} from './kokumi-api.js'
import {COMPONENT_NAMESPACE, ORDER_API_VERSION} from './orders.js'

const APPROVE_DEPLOY_LABEL = 'delivery.kokumi.dev/approve-deploy'

export type RenderedPreparation = KubeObject & {
  spec?: {configHash?: string; source?: {oci?: string; baseDigest?: string}; artifact?: {ociRef?: string; digest?: string}}
}

/** The registry path and digest of a Preparation's artifact (`oci://host/ns/order@sha256:…`). */
export function preparationArtifact(p: RenderedPreparation | undefined): {repository: string; digest: string} | undefined {
  const digest = p?.spec?.artifact?.digest
  const ref = p?.spec?.artifact?.ociRef?.replace(/^oci:\/\//, '').split('@')[0]
  if (!digest || !ref || !ref.includes('/')) return undefined
  return {repository: ref.slice(ref.indexOf('/') + 1), digest}
}

/**
 * One digest over the files of an artifact's layers (path and bytes; tar headers, file times,
 * annotations and the manifest left out), or undefined when the registry does not hold it.
 */
export async function renderedContentDigest(client: OciClient, repository: string, digest: string): Promise<string | undefined> {
  if (!(await client.headManifest(repository, digest))) return undefined
  const {manifest} = await client.getManifest(repository, digest)
  const files = new Map<string, Buffer>()
  for (const layer of (manifest as {layers?: {digest: string}[]}).layers ?? []) {
    const blob = await client.getBlob(repository, layer.digest)
    let layerFiles: Map<string, Buffer>
    try {
      layerFiles = untarSync(blob, `${repository}@${digest}`)
    } catch {
      return undefined // not a tar+gzip Kokumi pushed: its content cannot be told, so it is not "the same"
    }
    for (const [path, data] of layerFiles) files.set(path, data)
  }
  const h = createHash('sha256')
  for (const path of [...files.keys()].sort()) h.update(`${path}\0${createHash('sha256').update(files.get(path)!).digest('hex')}\n`)
  return `sha256:${h.digest('hex')}`
}

/** Whether two Preparations' artifacts hold the same files; undefined when the registry lacks either. */
export async function sameRenderedContent(client: OciClient, a: RenderedPreparation, b: RenderedPreparation): Promise<boolean | undefined> {
  const [x, y] = [preparationArtifact(a), preparationArtifact(b)]
  if (!x || !y) return undefined
  const [cx, cy] = await Promise.all([renderedContentDigest(client, x.repository, x.digest), renderedContentDigest(client, y.repository, y.digest)])
  return cx && cy ? cx === cy : undefined
}

export interface SameContentRerender {
  component: StackComponent
  /** The Order's latest Preparation, neither served nor approved. */
  preparation: string
  /** The Preparation the Serving serves, whose files it holds. */
  served: string
  message: string
}

type OrderObject = KubeObject & {spec?: unknown; status?: {latestPreparationName?: string; conditions?: {type: string; status: string}[]}}

/**
 * Promotion Manual: the Order's latest Preparation when nothing serves or approves it yet and
 * its files are those of the served one (both artifacts read from the registry); undefined
 * otherwise (Automatic, served, approved, other content, or an artifact the registry lost).
 */
export async function readSameContentRerender(kube: Kube, client: OciClient, component: StackComponent): Promise<SameContentRerender | undefined> {
  const namespace = COMPONENT_NAMESPACE[component]
  const [order, serving] = await Promise.all([
    getObject<OrderObject>(kube, {apiVersion: ORDER_API_VERSION, kind: 'Order', name: component, namespace}),
    getObject<KubeObject & {spec?: {preparationName?: string}}>(kube, {apiVersion: ORDER_API_VERSION, kind: 'Serving', name: component, namespace}),
  ])
  if (!order || orderPromotion(order.spec) !== 'Manual') return undefined
  if (!order.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')) return undefined
  const preparation = order.status?.latestPreparationName
  const served = serving?.spec?.preparationName
  if (!preparation || !served || preparation === served) return undefined
  const [latest, current] = await Promise.all(
    [preparation, served].map((name) => getObject<RenderedPreparation>(kube, {apiVersion: ORDER_API_VERSION, kind: 'Preparation', name, namespace})),
  )
  if (!latest || !current || latest.metadata.labels?.[APPROVE_DEPLOY_LABEL] === 'true') return undefined
  if ((await sameRenderedContent(client, latest, current)) !== true) return undefined
  return {
    component,
    preparation,
    served,
    message: `${component}: Preparation ${preparation} is a re-render by Kokumi of the served ${served}, same content: nothing to approve (ichor stack sync serves it)`,
  }
}
