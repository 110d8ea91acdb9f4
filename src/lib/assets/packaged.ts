// The files ichor ships with (assets/: lock.json, policies, CRDs) and, in the single
// binary, the pinned artifacts embedded at build time. The npm package reads them from its
// own assets/ folder; the binary (a Node single executable application) from its SEA
// assets, named by the same relative paths.
import {createHash} from 'node:crypto'
import {existsSync, mkdirSync, readFileSync, renameSync, writeFileSync} from 'node:fs'
import {createRequire} from 'node:module'
import {basename, dirname, join, resolve} from 'node:path'
import {fileURLToPath} from 'node:url'

/** The subset of `node:sea` used here (Node 20.12+; isSea() is false outside a binary). */
interface SeaApi {
  isSea(): boolean
  getAsset(key: string): ArrayBuffer
}

let sea: SeaApi | null | undefined

/** The SEA API when running as the single binary, else null. */
function seaApi(): SeaApi | null {
  if (sea === undefined) {
    try {
      const api = createRequire(import.meta.url)('node:sea') as SeaApi
      sea = api.isSea() ? api : null
    } catch {
      sea = null
    }
  }
  return sea
}

/** True when this process is the single binary built by `npm run build:binary`. */
export function isSingleBinary(): boolean {
  return seaApi() !== null
}

/** The package's assets/ folder (the npm package: from dist/lib/assets or src/lib/assets). */
function packageAssetsDir(): string {
  return resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'assets')
}

/** A file shipped under assets/ (e.g. "lock.json", "policies/kokumi.yaml"): embedded in the binary, else on disk. */
export function readPackagedAsset(relativePath: string): Buffer {
  const api = seaApi()
  if (api) {
    try {
      return Buffer.from(api.getAsset(`assets/${relativePath}`))
    } catch {
      throw new Error(`this ichor binary embeds no assets/${relativePath}`)
    }
  }
  return readFileSync(join(packageAssetsDir(), relativePath))
}

/** One pinned artifact embedded in the binary, as recorded (and checked against lock.json) at build time. */
export interface EmbeddedArtifact {
  id: string
  /** SEA asset key of the bytes. */
  key: string
  file: string
  version: string
  sha256: string
  size: number
  /** True when the bytes are exactly the artifact assets/lock.json pins. */
  matchesPin: boolean
}

export interface EmbeddedAssets {
  /** When the binary was built from the pinned artifacts only. */
  allPinned: boolean
  artifacts: EmbeddedArtifact[]
}

/** The SEA asset that lists the embedded artifacts (written by scripts/build-binary.mjs). */
const EMBEDDED_INDEX_KEY = 'embedded.json'

/** What the binary embeds (for `ichor version`); undefined when running from the npm package. */
export function embeddedAssets(): EmbeddedAssets | undefined {
  const api = seaApi()
  if (!api) return undefined
  const artifacts = JSON.parse(Buffer.from(api.getAsset(EMBEDDED_INDEX_KEY)).toString('utf8')) as EmbeddedArtifact[]
  return {allPinned: artifacts.every((a) => a.matchesPin), artifacts}
}

/**
 * The embedded artifact `id` as a file (helm takes chart paths), written once into
 * `cacheDir/embedded/<sha256>/` and reused while its digest holds; undefined outside the binary.
 */
export function embeddedArtifactFile(id: string, cacheDir: string): {path: string; artifact: EmbeddedArtifact} | undefined {
  const api = seaApi()
  const artifact = embeddedAssets()?.artifacts.find((a) => a.id === id)
  if (!api || !artifact) return undefined
  const path = join(cacheDir, 'embedded', artifact.sha256, basename(artifact.file))
  if (existsSync(path) && sha256(readFileSync(path)) === artifact.sha256) return {path, artifact}
  const bytes = Buffer.from(api.getAsset(artifact.key))
  if (sha256(bytes) !== artifact.sha256) throw new Error(`the embedded ${id} artifact does not match its recorded sha256 ${artifact.sha256}`)
  mkdirSync(dirname(path), {recursive: true})
  const tmp = `${path}.${process.pid}.tmp`
  writeFileSync(tmp, bytes)
  renameSync(tmp, path)
  return {path, artifact}
}

function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex')
}
