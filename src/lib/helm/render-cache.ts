// The offline render cache in $XDG_CACHE_HOME/ichor/renders (ICHOR_RENDER_CACHE=off
// disables it). An offline render is a function of the chart bytes, the arguments, the
// values and the helm binary: a rerun with the same inputs reads the earlier output
// instead of starting helm again (about 0.3 s for Cilium, 0.7 s for Argo CD).
//
// Except when the chart generates material: Cilium's `genCA`/`genSelfSignedCert` (the
// `cilium-ca` Secret with ca.key, `hubble-server-certs` with tls.key when
// hubble.tls.auto.method=helm) or a `randAlphaNum` password differ on every render, and a
// cached copy would hand two clusters the same CA and keys. So a render holding any Secret
// with data is never cached: secret values never reach a cache, whether helm generated them
// or they came from values, and no key pattern can be missed. Renders whose Secrets are
// empty shells (Argo CD's argocd-secret) are still cached. The folder is 0700, entries 0600.
import {createHash} from 'node:crypto'
import {existsSync, readdirSync, readFileSync, rmSync, statSync} from 'node:fs'
import {join} from 'node:path'
import {parse as parseYaml} from 'yaml'
import {ensurePrivateDir, securePrivateFiles, writePrivateFileAtomic} from '../fs/private-files.js'
import {cacheHome} from '../assets/lock.js'

export interface RenderCacheEntry {
  /** The entry's file (for tests). */
  file: string
  read(): string | undefined
  write(text: string): void
}

/** $XDG_CACHE_HOME/ichor/renders (the same cache home as the fetched assets). */
function renderCacheDir(): string {
  return join(cacheHome(), 'ichor', 'renders')
}

/**
 * The helm binary as a cache key: its path and file identity (size, mtime, inode), read
 * without starting it. Another helm at the path (an upgrade) is another key.
 */
export function helmCacheIdentity(path: string): string {
  const s = statSync(path)
  return `${path}\0${s.size}\0${s.mtimeMs}\0${s.ino}`
}

/**
 * The cache entry for one render, keyed by sha256 over everything the output depends on;
 * undefined when caching is off. A chart directory (not an archive) is never cached,
 * since its files can change under the same path. `args` is helm's argument list
 * (`template`, release, chart path, flags); the key holds the chart's bytes, not its path.
 */
export function renderCache(helmIdentity: string, chartPath: string, args: string[], input: string): RenderCacheEntry | undefined {
  if (process.env.ICHOR_RENDER_CACHE === 'off') return undefined
  let chartBytes: Buffer
  try {
    if (!statSync(chartPath).isFile()) return undefined
    chartBytes = readFileSync(chartPath)
  } catch {
    return undefined
  }
  const key = createHash('sha256')
    .update(helmIdentity)
    .update('\0')
    .update(chartBytes)
    .update('\0')
    .update(JSON.stringify([args[1], ...args.slice(3)]))
    .update('\0')
    .update(input)
    .digest('hex')
  const dir = renderCacheDir()
  const file = join(dir, `${key}.yaml`)
  return {
    file,
    read: () => {
      try {
        if (!existsSync(dir) || !privateCacheDir(dir)) return undefined
        const text = readFileSync(file, 'utf8')
        if (holdsSecretData(text)) {
          rmSync(file, {force: true}) // written by an older ichor: never serve it
          return undefined
        }
        return text
      } catch {
        return undefined
      }
    },
    write: (text) => {
      if (holdsSecretData(text)) return
      try {
        if (privateCacheDir(dir)) writePrivateFileAtomic(file, text)
      } catch {
        // a cache that cannot be written is only slower
      }
    },
  }
}

/**
 * Makes the cache folder 0700 (created with its parents). A folder an older ichor left
 * open (0755, entries 0644) is closed, and its entries holding Secret data are removed.
 * False when the folder cannot be made private (then nothing is read or written).
 */
function privateCacheDir(dir: string): boolean {
  let fixed
  try {
    fixed = ensurePrivateDir(dir, {createParents: true, loose: 'fix'}).fixed
  } catch {
    return false
  }
  if (fixed.length > 0) {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name)
      try {
        if (holdsSecretData(readFileSync(path, 'utf8'))) rmSync(path, {force: true})
        else securePrivateFiles([path])
      } catch {
        rmSync(path, {recursive: true, force: true})
      }
    }
  }
  return true
}

// `kind: Secret` in any YAML spelling (block, flow, quoted keys or value) at any depth;
// only documents that match are parsed (Argo CD's CRDs mention Secrets in prose).
const MENTIONS_SECRET = /(?:^|[{,\s])["']?kind["']?\s*:\s*["']?Secret["']?\s*(?:$|[,}])/m

/**
 * Whether a rendered manifest holds secret material: a Secret (at any depth, a List's
 * items and a manifest inside a string included) with non-empty data or stringData, or a
 * PEM private key anywhere.
 * Only the documents that mention a Secret are parsed; one that cannot be parsed counts.
 */
export function holdsSecretData(text: string, depth = 0): boolean {
  if (/PRIVATE KEY-----/.test(text)) return true
  for (const doc of text.split(/^---[ \t]*$/m)) {
    if (!MENTIONS_SECRET.test(doc)) continue
    let parsed: unknown
    try {
      parsed = parseYaml(doc)
    } catch {
      return true
    }
    if (hasSecretWithData(parsed, depth)) return true
  }
  return false
}

function hasSecretWithData(node: unknown, depth = 0): boolean {
  // A string can hold a manifest of its own (a Talos inline manifest): look inside once.
  if (typeof node === 'string') return depth < 2 && MENTIONS_SECRET.test(node) && holdsSecretData(node, depth + 1)
  if (Array.isArray(node)) return node.some((n) => hasSecretWithData(n, depth))
  if (typeof node !== 'object' || node === null) return false
  const obj = node as Record<string, unknown>
  if (obj.kind === 'Secret' && (nonEmpty(obj.data) || nonEmpty(obj.stringData))) return true
  return Object.values(obj).some((n) => hasSecretWithData(n, depth))
}

function nonEmpty(v: unknown): boolean {
  if (v === undefined || v === null) return false
  if (typeof v === 'object') return Object.keys(v).length > 0
  return String(v) !== ''
}
