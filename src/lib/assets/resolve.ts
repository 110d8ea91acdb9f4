// Finds the artifact a command will use and says plainly which file and version it is
// and whether it is the pinned one. Order: explicit flag, then the fetched assets
// folder, then what the single binary embeds, then a mirror directory (--mirror / ICHOR_MIRROR).
import {createHash} from 'node:crypto'
import {existsSync, readdirSync, statSync} from 'node:fs'
import {join, relative} from 'node:path'
import {IchorError} from '../errors/errors.js'
import {readBoundedFile, readChartArchive} from '../chart/archive.js'
import {assetsDir, cacheHome, pinnedAssets, type AssetId, type PinnedAsset} from './lock.js'
import {embeddedArtifactFile} from './packaged.js'
import {EXIT} from '../errors/exit-codes.js'

export type AssetOrigin = 'flag' | 'assets' | 'embedded' | 'mirror'

export interface ResolvedAsset {
  id: AssetId
  path: string
  version: string
  sha256: string
  origin: AssetOrigin
  pinned: PinnedAsset
  /** True when the bytes are exactly the pinned artifact. */
  matchesPin: boolean
}

export interface AssetSources {
  /** Explicit file given by flag (--cilium-chart, --argocd-chart, --kokumi-manifest). */
  override?: string
  /** A local mirror directory to search when nothing was fetched. */
  mirror?: string
  /** The fetched assets folder (--assets-dir); default assetsDir(). */
  assetsDir?: string
}

export const OVERRIDE_FLAG: Record<AssetId, string> = {
  cilium: '--cilium-chart',
  argocd: '--argocd-chart',
  kokumi: '--kokumi-manifest',
}

/** Kokumi 0.14's install.yaml is about 85 KB. */
export const MAX_MANIFEST_BYTES = 8 * 1024 * 1024

export function resolveAsset(id: AssetId, sources: AssetSources = {}): ResolvedAsset {
  const pinned = pinnedAssets()[id]
  if (sources.override) {
    if (!existsSync(sources.override)) throw new IchorError(`${OVERRIDE_FLAG[id]}: no such file ${sources.override}`, {exitCode: EXIT.usage})
    const st = statSync(sources.override)
    if (st.isDirectory()) throw new IchorError(`${OVERRIDE_FLAG[id]}: ${sources.override} is a directory, expected a file`, {exitCode: EXIT.usage})
    // A device or FIFO (/dev/zero) would be read forever.
    if (!st.isFile()) throw new IchorError(`${OVERRIDE_FLAG[id]}: ${sources.override} is not a regular file (a device, FIFO or socket), expected a file`, {exitCode: EXIT.usage})
    return describeFile(id, sources.override, 'flag')
  }
  const fetched = join(assetsDir(sources.assetsDir), pinned.file)
  if (existsSync(fetched)) return describeFile(id, fetched, 'assets')
  const embedded = embeddedArtifactFile(id, join(cacheHome(), 'ichor'))
  if (embedded) return describeFile(id, embedded.path, 'embedded')
  const mirror = sources.mirror ?? process.env.ICHOR_MIRROR
  if (mirror) {
    const found = findInMirror(id, mirror)
    if (found) return describeFile(id, found, 'mirror')
    throw new IchorError(`${pinned.description} ${pinned.version} is not in the mirror ${mirror}, nor any other version of it`, {
      hint: `pass ${OVERRIDE_FLAG[id]} FILE, or run \`ichor assets fetch\` where the network reaches ${pinned.url}`,
    })
  }
  throw new IchorError(`${pinned.description} ${pinned.version} is missing: nothing was fetched into ${fetched}`, {
    hint: `run \`ichor assets fetch\` (or \`ichor assets fetch --from DIR\` with a local mirror), or pass ${OVERRIDE_FLAG[id]} FILE or --mirror DIR`,
  })
}

/**
 * A given version of an artifact (e.g. `cni upgrade --to 1.19.6`): the pinned one is
 * resolved as above; another from the fetched assets folder by its file name, else from the
 * mirror. Undefined when neither holds it.
 */
export function resolveAssetVersion(id: AssetId, version: string, sources: Omit<AssetSources, 'override'> = {}): ResolvedAsset | undefined {
  const pinned = pinnedAssets()[id]
  if (version === pinned.version) return resolveAsset(id, sources)
  const fetched = join(assetsDir(sources.assetsDir), pinned.file.replace(pinned.version, version))
  if (existsSync(fetched)) return describeFile(id, fetched, 'assets')
  const mirror = sources.mirror ?? process.env.ICHOR_MIRROR
  if (!mirror) return undefined
  if (!existsSync(mirror) || !statSync(mirror).isDirectory()) throw new IchorError(`--mirror: ${mirror} is not a directory`, {exitCode: EXIT.usage})
  for (const file of walk(mirror, 3)) {
    const match = MIRROR_PATTERNS[id].exec(relative(mirror, file).split('\\').join('/'))
    if (match?.[1] === version) return describeFile(id, file, 'mirror')
  }
  return undefined
}

/** One line for the operator: which file, which version, pinned or not. */
export function describeAsset(a: ResolvedAsset): string {
  const verdict = a.matchesPin
    ? `matches the pin ${a.pinned.version}`
    : a.version === a.pinned.version
      ? `does NOT match the pin: version ${a.version} but sha256 differs from ${a.pinned.sha256.slice(0, 12)}`
      : `does NOT match the pin ${a.pinned.version}`
  return `${a.id}: ${a.path} (${a.pinned.name} ${a.version}, sha256 ${a.sha256.slice(0, 12)}, from ${a.origin}) ${verdict}`
}

// Every file is read once, after checks on its kind and size (a directory, a device or a
// huge file given by flag is a named error, exit 2); its digest comes from those bytes.
function describeFile(id: AssetId, path: string, origin: AssetOrigin): ResolvedAsset {
  const pinned = pinnedAssets()[id]
  const label = origin === 'flag' ? OVERRIDE_FLAG[id] : `${pinned.description} (${origin})`
  if (id === 'kokumi') {
    const bytes = readBoundedFile(path, label, MAX_MANIFEST_BYTES, "Kokumi's install.yaml")
    const sha256 = createHash('sha256').update(bytes).digest('hex')
    const version = kokumiManifestVersionOf(bytes.toString('utf8'), path)
    return {id, path, version, sha256, origin, pinned, matchesPin: sha256 === pinned.sha256}
  }
  const chart = readChartArchive(path, label)
  if (chart.name !== pinned.name) {
    throw new IchorError(`${OVERRIDE_FLAG[id]}: ${path} is the chart "${chart.name}", expected "${pinned.name}"`, {exitCode: EXIT.usage})
  }
  return {id, path, version: chart.version, sha256: chart.sha256, origin, pinned, matchesPin: chart.sha256 === pinned.sha256}
}

/** Kokumi ships no chart: read the version from the controller image tag in install.yaml. */
export function kokumiManifestVersion(path: string): string {
  return kokumiManifestVersionOf(readBoundedFile(path, OVERRIDE_FLAG.kokumi, MAX_MANIFEST_BYTES, "Kokumi's install.yaml").toString('utf8'), path)
}

function kokumiManifestVersionOf(text: string, path: string): string {
  const match = /image:\s{0,20}\S{0,200}kokumi-dev\/kokumi:v?([0-9][\w.+-]*)/.exec(text)
  if (!match) {
    if (!/kind:\s*CustomResourceDefinition/.test(text) || !/kokumi/.test(text)) {
      throw new IchorError(`${OVERRIDE_FLAG.kokumi}: ${path} does not look like Kokumi's install.yaml`, {exitCode: EXIT.usage})
    }
    return 'unknown'
  }
  return match[1]!
}

const MIRROR_PATTERNS: Record<AssetId, RegExp> = {
  cilium: /(?:^|\/)cilium-(\d+\.\d+\.\d+[\w.-]*)\.tgz$/,
  argocd: /(?:^|\/)argo-cd-(\d+\.\d+\.\d+[\w.-]*)\.tgz$/,
  kokumi: /(?:^|\/)kokumi-v?(\d+\.\d+\.\d+[\w.-]*)(?:\/|-)install\.yaml$/,
}

/** The pinned version when the mirror has it, else the newest version it has. */
export function findInMirror(id: AssetId, mirror: string): string | undefined {
  if (!existsSync(mirror) || !statSync(mirror).isDirectory()) {
    throw new IchorError(`--mirror: ${mirror} is not a directory`, {exitCode: EXIT.usage})
  }
  const pinned = pinnedAssets()[id]
  const candidates: {path: string; version: string}[] = []
  for (const file of walk(mirror, 3)) {
    const match = MIRROR_PATTERNS[id].exec(relative(mirror, file).split('\\').join('/'))
    if (match) candidates.push({path: file, version: match[1]!})
  }
  if (candidates.length === 0) return undefined
  const exact = candidates.find((c) => c.version === pinned.version)
  if (exact) return exact.path
  candidates.sort((a, b) => compareVersions(b.version, a.version))
  return candidates[0]!.path
}

function* walk(dir: string, depth: number): Generator<string> {
  for (const entry of readdirSync(dir, {withFileTypes: true}).sort((a, b) => a.name.localeCompare(b.name))) {
    const p = join(dir, entry.name)
    if (entry.isDirectory() && depth > 0) yield* walk(p, depth - 1)
    else if (entry.isFile()) yield p
  }
}

/** Numeric compare of dotted versions; a pre-release sorts before its release. */
export function compareVersions(a: string, b: string): number {
  const parse = (v: string) => {
    const [core, pre] = v.replace(/^v/, '').split('-', 2)
    return {nums: core!.split('.').map((n) => Number.parseInt(n, 10) || 0), pre}
  }
  const pa = parse(a)
  const pb = parse(b)
  for (let i = 0; i < Math.max(pa.nums.length, pb.nums.length); i++) {
    const d = (pa.nums[i] ?? 0) - (pb.nums[i] ?? 0)
    if (d !== 0) return d
  }
  if (pa.pre && !pb.pre) return -1
  if (!pa.pre && pb.pre) return 1
  return (pa.pre ?? '').localeCompare(pb.pre ?? '')
}
