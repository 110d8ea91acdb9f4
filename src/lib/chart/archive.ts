// Reads a Helm chart archive (.tgz) into memory once per path and digest, so the
// values engine can read values.yaml, values.schema.json and templates without helm.
// The file may come from a flag: it must be a regular file of bounded size holding a
// gzip stream that unpacks to a bounded size (a gzip bomb stops at the cap).
import {createHash} from 'node:crypto'
import {readFileSync, statSync} from 'node:fs'
import {gunzipSync} from 'node:zlib'
import {Parser, type ReadEntry} from 'tar'
import {parse as parseYaml} from 'yaml'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'

/** Cilium's and Argo CD's charts are about 230 KB packed and 2 MB unpacked: generous caps. */
export const MAX_CHART_ARCHIVE_BYTES = 16 * 1024 * 1024
export const MAX_CHART_UNPACKED_BYTES = 128 * 1024 * 1024

export interface ChartArchive {
  path: string
  sha256: string
  name: string
  version: string
  appVersion?: string
  /** Files of the top-level chart, keyed by path relative to the chart root (`values.yaml`, `templates/x.yaml`). */
  files: Map<string, Buffer>
}

const cache = new Map<string, ChartArchive>()

/** `label` names where the path came from (a flag) in errors; bad archives exit 2 like any bad input. */
export function readChartArchive(path: string, label = 'chart archive'): ChartArchive {
  const bytes = readBoundedFile(path, label, MAX_CHART_ARCHIVE_BYTES, 'a Helm chart archive (.tgz)')
  const sha256 = createHash('sha256').update(bytes).digest('hex')
  const key = `${path}@${sha256}`
  const hit = cache.get(key)
  if (hit) return hit
  const entries = untarSync(bytes, `${label} ${path}`)
  // A chart archive holds one top folder named after the chart.
  const chartYamlPath = [...entries.keys()].find((p) => /^[^/]+\/Chart\.yaml$/.test(p))
  if (!chartYamlPath) throw new IchorError(`${label} ${path}: not a Helm chart archive (no <name>/Chart.yaml inside)`, {exitCode: EXIT.usage})
  const top = chartYamlPath.split('/')[0]!
  const files = new Map<string, Buffer>()
  for (const [p, data] of entries) if (p.startsWith(`${top}/`)) files.set(p.slice(top.length + 1), data)
  let meta: {name?: string; version?: string; appVersion?: string} | null
  try {
    meta = parseYaml(files.get('Chart.yaml')!.toString('utf8'), {maxAliasCount: 10}) as typeof meta
  } catch (error) {
    throw new IchorError(`${label} ${path}: Chart.yaml is not valid YAML: ${(error as Error).message.split('\n')[0]}`, {exitCode: EXIT.usage})
  }
  if (!meta?.name || !meta.version) throw new IchorError(`${label} ${path}: Chart.yaml has no name or version`, {exitCode: EXIT.usage})
  const archive: ChartArchive = {path, sha256, name: meta.name, version: String(meta.version), appVersion: meta.appVersion, files}
  cache.set(key, archive)
  return archive
}

/**
 * Reads a file the user named, refusing what is not a regular file or is larger than `max`
 * before reading it; `what` says what was expected there.
 */
export function readBoundedFile(path: string, label: string, max: number, what: string): Buffer {
  let why: string | undefined
  try {
    const st = statSync(path)
    if (st.isDirectory()) why = `is a directory; give ${what}`
    else if (!st.isFile()) why = `is not a regular file; give ${what}`
    else if (st.size > max) why = `is ${st.size} bytes; at most ${max} bytes (${max / 1024 / 1024} MiB) are read`
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    why = code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : String(code ?? error)
  }
  if (why) throw new IchorError(`${label} ${path}: ${why}`, {exitCode: EXIT.usage})
  let bytes: Buffer
  try {
    bytes = readFileSync(path)
  } catch (error) {
    throw new IchorError(`${label} ${path}: cannot read it: ${(error as NodeJS.ErrnoException).code ?? String(error)}`, {exitCode: EXIT.usage})
  }
  // It may have grown between the stat and the read.
  if (bytes.length > max) throw new IchorError(`${label} ${path}: is more than ${max} bytes`, {exitCode: EXIT.usage})
  return bytes
}

/** Untars a gzipped tar held in memory, synchronously (tar's Parser accepts a Buffer in one write). */
export function untarSync(gz: Buffer, label: string): Map<string, Buffer> {
  // Checked here rather than left to tar, whose answer to junk is a bare TAR_BAD_ARCHIVE.
  if (gz.length < 2 || gz[0] !== 0x1f || gz[1] !== 0x8b) {
    throw new IchorError(`${label} is not a gzip tarball (it does not start as a gzip stream does)`, {exitCode: EXIT.usage})
  }
  let tarBytes: Buffer
  try {
    tarBytes = gunzipSync(gz, {maxOutputLength: MAX_CHART_UNPACKED_BYTES})
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    const why =
      code === 'ERR_BUFFER_TOO_LARGE'
        ? `it unpacks to more than ${MAX_CHART_UNPACKED_BYTES / 1024 / 1024} MiB`
        : `the gzip stream is broken (${code ?? (error as Error).message})`
    throw new IchorError(`${label}: cannot unpack it: ${why}`, {exitCode: EXIT.usage})
  }
  const out = new Map<string, Buffer>()
  let failure: unknown
  const parser = new Parser({
    strict: true,
    onReadEntry(entry: ReadEntry) {
      if (entry.type !== 'File' && entry.type !== 'OldFile') {
        entry.resume()
        return
      }
      const chunks: Buffer[] = []
      entry.on('data', (c: Buffer) => chunks.push(c))
      entry.on('end', () => out.set(entry.path.replace(/^\.\//, ''), Buffer.concat(chunks)))
    },
  })
  parser.on('error', (e: unknown) => {
    failure = e
  })
  parser.on('warn', (_code: string, message: string) => {
    failure ??= new Error(message)
  })
  parser.end(tarBytes)
  // A file that is not a gzip tarball is bad input (exit 2), whoever named it.
  if (failure) throw new IchorError(`${label} is not a gzip tarball (${failure instanceof Error ? failure.message : String(failure)})`, {exitCode: EXIT.usage})
  return out
}
