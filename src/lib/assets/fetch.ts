// `ichor assets fetch`: downloads (or copies from a mirror) each pinned artifact,
// refuses any size or digest mismatch, and writes it atomically into the assets folder
// ($XDG_CACHE_HOME/ichor/assets unless --assets-dir / ICHOR_ASSETS_DIR say otherwise).
import {createHash} from 'node:crypto'
import {existsSync, mkdirSync, readFileSync, renameSync, writeFileSync} from 'node:fs'
import {basename, dirname, join} from 'node:path'
import {IchorError} from '../errors/errors.js'
import {assetsDir, ASSET_IDS, pinnedAssets, type AssetId, type PinnedAsset} from './lock.js'
import {findInMirror} from './resolve.js'

export interface FetchResult {
  id: AssetId
  path: string
  version: string
  sha256: string
  status: 'present' | 'fetched' | 'copied'
  source: string
}

export interface FetchOptions {
  from?: string
  only?: AssetId[]
  /** Where to store them (--assets-dir); default assetsDir(). */
  assetsDir?: string
  fetchImpl?: typeof fetch
}

export async function fetchAssets(opts: FetchOptions = {}): Promise<FetchResult[]> {
  const results: FetchResult[] = []
  const failures: string[] = []
  for (const id of opts.only ?? ASSET_IDS) {
    try {
      results.push(await fetchOne(pinnedAssets()[id], opts))
    } catch (error) {
      failures.push(`${id}: ${(error as Error).message}`)
    }
  }
  if (failures.length > 0) {
    throw new IchorError(`could not fetch every pinned artifact:\n${failures.map((f) => `  - ${f}`).join('\n')}`, {
      hint: 'an artifact that is not the pinned one can still be used explicitly with --cilium-chart, --argocd-chart or --kokumi-manifest',
    })
  }
  return results
}

async function fetchOne(pin: PinnedAsset, opts: FetchOptions): Promise<FetchResult> {
  const target = join(assetsDir(opts.assetsDir), pin.file)
  if (existsSync(target) && digest(readFileSync(target)) === pin.sha256) {
    return {id: pin.id, path: target, version: pin.version, sha256: pin.sha256, status: 'present', source: target}
  }
  let bytes: Buffer
  let source: string
  if (opts.from) {
    const found = findInMirror(pin.id, opts.from)
    if (!found) throw new Error(`the mirror ${opts.from} has no ${pin.description}`)
    bytes = readFileSync(found)
    source = found
  } else {
    const doFetch = opts.fetchImpl ?? fetch
    let response: Response
    try {
      response = await doFetch(pin.url, {redirect: 'follow', signal: AbortSignal.timeout(120_000)})
    } catch (error) {
      throw new Error(`cannot download ${pin.url}: ${(error as Error).message}; offline, use --from DIR with a local mirror`)
    }
    if (!response.ok) throw new Error(`GET ${pin.url} answered ${response.status} ${response.statusText}`)
    bytes = Buffer.from(await response.arrayBuffer())
    source = pin.url
  }
  verify(pin, bytes, source)
  mkdirSync(dirname(target), {recursive: true})
  const tmp = `${target}.${process.pid}.tmp`
  writeFileSync(tmp, bytes)
  renameSync(tmp, target)
  return {id: pin.id, path: target, version: pin.version, sha256: pin.sha256, status: opts.from ? 'copied' : 'fetched', source}
}

function verify(pin: PinnedAsset, bytes: Buffer, source: string): void {
  const got = digest(bytes)
  if (got !== pin.sha256) {
    throw new Error(
      `${basename(source)} is not the pinned ${pin.description} ${pin.version}: sha256 ${got} (${bytes.length} bytes), ` +
        `expected ${pin.sha256} (${pin.size} bytes)`,
    )
  }
}

function digest(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex')
}

