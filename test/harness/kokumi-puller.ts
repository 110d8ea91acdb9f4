// SIMULATOR of Kokumi's source puller, per Kokumi version: which files a pre-rendered OCI
// bundle leaves in Kokumi's work folder, and so whether an Order can render it. The stack
// simulator decides with it what Kokumi "sees". Reproduced from kokumi-dev/kokumi (read, not
// copied):
//
// - 0.14.0 (tag, d7d18451): internal/oci/oras_client.go `Pull`: a first layer of the Helm
//   chart media type is written to chart.tgz; anything else goes through `oras.Copy` into an
//   oras file store (oras-go v2.6.2 content/file/file.go `push`): a blob without an
//   `org.opencontainers.image.title` goes to the in-memory fallback store (no file); a titled
//   blob annotated `io.deis.oras.content.unpack: "true"` is a tar+gzip extracted under its
//   title (utils.go `extractTarGzip`, checked against `io.deis.oras.content.digest` when
//   present); another titled blob is written as the file of that name. Then
//   internal/service/order_service.go `mergeYAMLFiles` merges the top-level *.yaml files into
//   manifest.yaml unless manifest.yaml is the only one, and `ProcessOrder` reads manifest.yaml
//   ("failed to read manifest" when absent).
// - newer main (d5f825d9): the same, except that a first layer of the Flux content media type
//   `application/vnd.cncf.flux.content.v1.tar+gzip` is extracted explicitly, every layer, its
//   annotations ignored (`extractLayer`, regular files only), and `mergeYAMLFiles` skips
//   kustomization files.
// The 0.17 Order CRD is a hand-written fixture (0.17 cannot be read here); its puller is taken
// to be main's, the newest source that can be read.
import {createHash} from 'node:crypto'
import {gunzipSync} from 'node:zlib'
import {untarSync} from '../../src/lib/chart/archive.js'

export const HELM_CHART_LAYER = 'application/vnd.cncf.helm.chart.content.v1.tar+gzip'
export const FLUX_CONTENT_LAYER = 'application/vnd.cncf.flux.content.v1.tar+gzip'
const TITLE = 'org.opencontainers.image.title'
const UNPACK = 'io.deis.oras.content.unpack'
const DIGEST = 'io.deis.oras.content.digest'

export interface Descriptor {
  mediaType: string
  digest: string
  annotations?: Record<string, string>
}

export interface PulledManifest {
  config?: Descriptor
  layers: Descriptor[]
}

export type PullOutcome = {manifest: string} | {error: string}

export type PullerName = 'kokumi-0.14.0' | 'kokumi-main'

/** Which puller a Kokumi version runs: 0.14.x is the tag's, anything newer main's. */
export function pullerFor(kokumiVersion: string): PullerName {
  return /^v?0\.(\d+)\./.exec(kokumiVersion)?.[1] === '14' ? 'kokumi-0.14.0' : 'kokumi-main'
}

/** The files Kokumi's work folder holds after `Pull` and the YAML merge, and manifest.yaml from them. */
export async function pullManifest(puller: PullerName, manifest: PulledManifest, blob: (digest: string) => Promise<Buffer>): Promise<PullOutcome> {
  const first = manifest.layers[0]
  if (!first) return {error: puller === 'kokumi-main' ? 'artifact has no layers' : 'failed to read manifest: open manifest.yaml: no such file or directory'}
  if (first.mediaType === HELM_CHART_LAYER)
    return {error: 'source is a Helm chart; ichor publishes pre-rendered bundles (the simulator does not render charts)'}
  const files = new Map<string, Buffer>()
  try {
    if (puller === 'kokumi-main' && first.mediaType === FLUX_CONTENT_LAYER) {
      for (const layer of manifest.layers) for (const [path, data] of untarSync(await blob(layer.digest), layer.digest)) files.set(path, data)
    } else {
      // oras.Copy walks the manifest's successors: the config and every layer.
      for (const d of [...(manifest.config ? [manifest.config] : []), ...manifest.layers]) await orasFileStorePush(d, await blob(d.digest), files)
    }
  } catch (error) {
    return {error: `failed to pull artifact: ${(error as Error).message}`}
  }
  mergeYamlFiles(puller, files)
  const text = files.get('manifest.yaml')
  return text ? {manifest: text.toString('utf8')} : {error: 'failed to read manifest: open manifest.yaml: no such file or directory'}
}

/** oras-go v2.6.2 content/file Store.push: untitled → memory, unpack → extract under the title, else a file. */
async function orasFileStorePush(d: Descriptor, bytes: Buffer, files: Map<string, Buffer>): Promise<void> {
  const title = d.annotations?.[TITLE]
  if (!title) return
  if (title.split('/').includes('..') || title.startsWith('/')) throw new Error(`${title}: path traversal disallowed`)
  const base = title === '.' ? '' : `${title.replace(/\/+$/, '')}/`
  if (d.annotations?.[UNPACK] === 'true') {
    const checksum = d.annotations[DIGEST]
    if (checksum && `sha256:${createHash('sha256').update(gunzipSync(bytes)).digest('hex')}` !== checksum) throw new Error('content digest mismatch')
    for (const [path, data] of untarSync(bytes, title)) files.set(`${base}${path}`, data)
    return
  }
  files.set(title, bytes)
}

/** order_service.go mergeYAMLFiles: top-level *.yaml merged into manifest.yaml unless it is the only one. */
function mergeYamlFiles(puller: PullerName, files: Map<string, Buffer>): void {
  const skip = puller === 'kokumi-main' ? new Set(['kustomization.yaml']) : new Set<string>()
  const top = [...files.keys()].filter((p) => !p.includes('/') && p.endsWith('.yaml') && !skip.has(p)).sort()
  if (top.length === 0 || (top.length === 1 && top[0] === 'manifest.yaml')) return
  const merged = top.map((p) => `---\n# Source: ${p}\n${files.get(p)!.toString('utf8').trim()}\n`).join('')
  for (const p of top) files.delete(p)
  files.set('manifest.yaml', Buffer.from(merged))
}
