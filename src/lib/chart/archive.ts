// Reads a Helm chart archive (.tgz) into memory once per path and digest, so the
// values engine can read values.yaml, values.schema.json and templates without helm.
import {createHash} from 'node:crypto'
import {readFileSync} from 'node:fs'
import {Parser, type ReadEntry} from 'tar'
import {parse as parseYaml} from 'yaml'
import {IchorError} from '../errors/errors.js'

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

export function readChartArchive(path: string): ChartArchive {
  let bytes: Buffer
  try {
    bytes = readFileSync(path)
  } catch (error) {
    throw new IchorError(`cannot read chart archive ${path}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`, {exitCode: 2})
  }
  const sha256 = createHash('sha256').update(bytes).digest('hex')
  const key = `${path}@${sha256}`
  const hit = cache.get(key)
  if (hit) return hit
  const entries = untarSync(bytes, path)
  // A chart archive holds one top folder named after the chart.
  const chartYamlPath = [...entries.keys()].find((p) => /^[^/]+\/Chart\.yaml$/.test(p))
  if (!chartYamlPath) throw new IchorError(`${path} is not a Helm chart archive (no <name>/Chart.yaml inside)`, {exitCode: 2})
  const top = chartYamlPath.split('/')[0]!
  const files = new Map<string, Buffer>()
  for (const [p, data] of entries) if (p.startsWith(`${top}/`)) files.set(p.slice(top.length + 1), data)
  const meta = parseYaml(files.get('Chart.yaml')!.toString('utf8')) as {name?: string; version?: string; appVersion?: string}
  if (!meta?.name || !meta.version) throw new IchorError(`${path}: Chart.yaml has no name or version`, {exitCode: 2})
  const archive: ChartArchive = {path, sha256, name: meta.name, version: String(meta.version), appVersion: meta.appVersion, files}
  cache.set(key, archive)
  return archive
}

/** Untars a gzipped tar held in memory, synchronously (tar's Parser accepts a Buffer in one write). */
export function untarSync(gz: Buffer, label: string): Map<string, Buffer> {
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
  parser.on('error', (e: unknown) => { failure = e })
  parser.on('warn', (_code: string, message: string) => { failure ??= new Error(message) })
  parser.end(gz)
  // A file that is not a gzip tarball is bad input (exit 2), whoever named it.
  if (failure) throw new IchorError(`${label} is not a gzip tarball (${failure instanceof Error ? failure.message : String(failure)})`, {exitCode: 2})
  return out
}
