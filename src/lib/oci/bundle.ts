// Deterministic bundles: the same files give the same layer bytes in any process, on any
// machine, so the manifest digest only moves when the rendered manifests move (ADR decision 7).
// We write the ustar headers ourselves: the `tar` package packs from the filesystem and
// stamps times and owners we would have to scrub; 512-byte headers are small and testable.
import {createHash} from 'node:crypto'
import {gzipSync} from 'node:zlib'
import {IchorError} from '../errors/errors.js'

export interface BundleFile {
  /** Relative path inside the bundle, `/`-separated (`manifest.yaml`, `crds/x.yaml`). */
  path: string
  content: string | Buffer
}

export interface Bundle {
  /** The gzipped tar, i.e. the OCI layer bytes. */
  layer: Buffer
  /** `sha256:<hex>` of `layer`. */
  layerDigest: string
  size: number
}

const BLOCK = 512
const FILE_MODE = 0o644
const DIR_MODE = 0o755
// Fixed compression level: a different level gives different (still valid) bytes. zlib's
// default 6 is within ~2% of 9 in size on rendered YAML at about half the time.
const GZIP_LEVEL = 6
// RFC 1952 OS byte "unknown": zlib writes the build platform here, which would differ across machines.
const GZIP_OS_UNKNOWN = 0xff

export function buildBundle(files: BundleFile[]): Bundle {
  const layer = gzipDeterministic(buildTar(files))
  return {layer, layerDigest: sha256Digest(layer), size: layer.length}
}

/**
 * gzip with no file name, mtime 0, a fixed level and OS byte. The deflate stream itself is
 * zlib's: Node's bundled zlib gives the canonical bytes (checked equal to pako, a frozen JS
 * port, at levels 6 and 9), but another zlib build (a distro Node linked to the system
 * zlib, a future Node) may compress differently. test/oci/bundle.test.ts pins a digest so
 * such a drift is seen; swapping this body for pako's `gzip` would freeze it everywhere.
 */
function gzipDeterministic(data: Buffer): Buffer {
  const gz = gzipSync(data, {level: GZIP_LEVEL})
  // Node's gzip header already has no file name and mtime 0; only the OS byte varies by platform.
  gz[9] = GZIP_OS_UNKNOWN
  return gz
}

/** The uncompressed tar: entries sorted by path (byte order), parent folders added for nested paths. */
export function buildTar(files: BundleFile[]): Buffer {
  const entries = new Map<string, {type: 'file'; data: Buffer} | {type: 'dir'}>()
  for (const file of files) {
    const path = checkPath(file.path)
    if (entries.has(path)) throw new IchorError(`bundle: the path ${path} is given twice`)
    entries.set(path, {type: 'file', data: typeof file.content === 'string' ? Buffer.from(file.content, 'utf8') : file.content})
  }
  for (const path of [...entries.keys()]) {
    const parts = path.split('/')
    for (let i = 1; i < parts.length; i++) {
      const dir = `${parts.slice(0, i).join('/')}/`
      const clash = entries.get(parts.slice(0, i).join('/'))
      if (clash) throw new IchorError(`bundle: ${parts.slice(0, i).join('/')} is a file and also the folder of ${path}`)
      if (!entries.has(dir)) entries.set(dir, {type: 'dir'})
    }
  }
  // Byte order, not locale order: the same on every machine.
  const paths = [...entries.keys()].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
  const blocks: Buffer[] = []
  for (const path of paths) {
    const entry = entries.get(path)!
    if (entry.type === 'dir') {
      blocks.push(ustarHeader(path, 0, DIR_MODE, '5'))
      continue
    }
    blocks.push(ustarHeader(path, entry.data.length, FILE_MODE, '0'), entry.data)
    const pad = (BLOCK - (entry.data.length % BLOCK)) % BLOCK
    if (pad) blocks.push(Buffer.alloc(pad))
  }
  // End of archive: two zero blocks.
  blocks.push(Buffer.alloc(2 * BLOCK))
  return Buffer.concat(blocks)
}

function checkPath(path: string): string {
  const bad = (why: string) => new IchorError(`bundle: invalid path ${JSON.stringify(path)}: ${why}`)
  if (!path) throw bad('it is empty')
  if (path.startsWith('/')) throw bad('it must be relative')
  if (path.includes('\\')) throw bad('use / as the separator')
  if (path.includes('\0')) throw bad('it contains a NUL byte')
  const parts = path.split('/')
  if (parts.some((p) => p === '' || p === '.' || p === '..')) throw bad('no empty, . or .. segments')
  return path
}

/** One POSIX ustar header: owner 0:0 with empty names, mtime 0, no pax extension. */
function ustarHeader(path: string, size: number, mode: number, type: '0' | '5'): Buffer {
  const h = Buffer.alloc(BLOCK)
  const [prefix, name] = splitName(path)
  h.write(name, 0, 100, 'utf8')
  writeOctal(h, 100, 8, mode)
  writeOctal(h, 108, 8, 0) // uid
  writeOctal(h, 116, 8, 0) // gid
  writeOctal(h, 124, 12, size)
  writeOctal(h, 136, 12, 0) // mtime
  h.fill(0x20, 148, 156) // checksum field counts as spaces while summing
  h.write(type, 156, 1, 'ascii')
  h.write('ustar\0', 257, 6, 'ascii')
  h.write('00', 263, 2, 'ascii')
  // uname/gname stay empty: readers then use the numeric 0:0.
  writeOctal(h, 329, 8, 0) // devmajor
  writeOctal(h, 337, 8, 0) // devminor
  h.write(prefix, 345, 155, 'utf8')
  let sum = 0
  for (const byte of h) sum += byte
  h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8, 'ascii')
  return h
}

/** ustar keeps names over 100 bytes by moving leading folders into the 155-byte prefix field. */
function splitName(path: string): [prefix: string, name: string] {
  if (Buffer.byteLength(path) <= 100) return ['', path]
  // A folder entry's trailing slash belongs to the name part.
  const trailing = path.endsWith('/') ? '/' : ''
  const body = trailing ? path.slice(0, -1) : path
  for (let i = body.indexOf('/'); i !== -1; i = body.indexOf('/', i + 1)) {
    const prefix = body.slice(0, i)
    const name = body.slice(i + 1) + trailing
    if (Buffer.byteLength(prefix) <= 155 && Buffer.byteLength(name) <= 100) return [prefix, name]
  }
  throw new IchorError(`bundle: the path ${path} is too long for a ustar header (name 100 bytes, folder prefix 155)`)
}

function writeOctal(h: Buffer, offset: number, width: number, value: number): void {
  const digits = value.toString(8)
  if (digits.length > width - 1) throw new IchorError(`bundle: ${value} does not fit a ${width}-byte tar field`)
  h.write(`${digits.padStart(width - 1, '0')}\0`, offset, width, 'ascii')
}

export function sha256Digest(bytes: Buffer | string): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`
}

const TAG = /^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$/

/**
 * `<chartVersion>-<first 12 hex of sha256(rendered)>`. The hash covers the rendered bytes,
 * so a value change moves the tag even when the chart version does not. `+` (semver build
 * metadata) is not allowed in an OCI tag and becomes `_`, as Helm does for OCI charts.
 */
export function bundleTag(chartVersion: string, renderedBytes: Buffer | string): string {
  const hash = createHash('sha256').update(renderedBytes).digest('hex').slice(0, 12)
  const tag = `${chartVersion.replaceAll('+', '_')}-${hash}`
  if (!TAG.test(tag)) {
    throw new IchorError(
      `cannot make an OCI tag from the version ${JSON.stringify(chartVersion)}: ${JSON.stringify(tag)} does not match [a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}`,
    )
  }
  return tag
}
