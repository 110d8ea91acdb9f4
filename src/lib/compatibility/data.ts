// The version knowledge every upgrade decision reads, as one data file with a source per row:
// the Kubernetes range per Talos minor, the tested Kubernetes per Cilium minor, the newest patch
// ichor knows per minor, the Cilium charts ichor knows by digest, and each upgrade path rule.
// The binary embeds assets/compatibility.json; `ichor assets fetch --from DIR` may put a newer
// revision into the assets folder, which is then read instead, so a new patch release needs
// no new binary. A file is used only when its schema is this one and its sha256 is its data's.
import {createHash} from 'node:crypto'
import {existsSync, mkdirSync, readFileSync, renameSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {assetsDir} from '../assets/lock.js'
import {readPackagedAsset} from '../assets/packaged.js'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'

export const COMPATIBILITY_SCHEMA = 'ichor.compatibility/v1'
export const COMPATIBILITY_FILE = 'compatibility.json'

export interface PathRule {
  rule: string
  source: string
}

export interface CompatibilityData {
  talos: {upgradePath: PathRule; minors: Record<string, {newestPatch: string; kubernetes: {min: string; max: string}; source: string}>}
  kubernetes: {upgradePath: PathRule; minors: Record<string, {newestPatch: string; source: string}>}
  cilium: {
    upgradePath: PathRule
    minors: Record<string, {testedKubernetes: {oldest: string; newest: string}; source: string}>
    charts: {version: string; sha256: string; source: string}[]
  }
}

export interface CompatibilityFile {
  schema: string
  /** Grows with each published change; a fetched file replaces the embedded one only when newer. */
  revision: number
  /** sha256 of JSON.stringify(data): what the file claims its data is. */
  sha256: string
  data: CompatibilityData
}

export interface Compatibility extends CompatibilityData {
  revision: number
  /** Where the data was read from: "embedded" or the fetched file's path. */
  origin: string
}

const minor = {type: 'string', pattern: '^\\d+\\.\\d+$'}
const version = {type: 'string', pattern: '^v?\\d+\\.\\d+\\.\\d+$'}
const text = {type: 'string', minLength: 1}
const rule = {type: 'object', required: ['rule', 'source'], properties: {rule: text, source: text}}
const rows = (row: object) => ({type: 'object', propertyNames: minor, additionalProperties: row, minProperties: 1})
const SCHEMA = {
  type: 'object',
  required: ['schema', 'revision', 'sha256', 'data'],
  properties: {
    schema: {const: COMPATIBILITY_SCHEMA},
    revision: {type: 'integer', minimum: 1},
    sha256: {type: 'string', pattern: '^[0-9a-f]{64}$'},
    data: {
      type: 'object',
      required: ['talos', 'kubernetes', 'cilium'],
      properties: {
        talos: {
          type: 'object',
          required: ['upgradePath', 'minors'],
          properties: {
            upgradePath: rule,
            minors: rows({
              type: 'object',
              required: ['newestPatch', 'kubernetes', 'source'],
              properties: {
                newestPatch: version,
                kubernetes: {type: 'object', required: ['min', 'max'], properties: {min: version, max: version}},
                source: text,
              },
            }),
          },
        },
        kubernetes: {
          type: 'object',
          required: ['upgradePath', 'minors'],
          properties: {
            upgradePath: rule,
            minors: rows({type: 'object', required: ['newestPatch', 'source'], properties: {newestPatch: version, source: text}}),
          },
        },
        cilium: {
          type: 'object',
          required: ['upgradePath', 'minors', 'charts'],
          properties: {
            upgradePath: rule,
            minors: rows({
              type: 'object',
              required: ['testedKubernetes', 'source'],
              properties: {testedKubernetes: {type: 'object', required: ['oldest', 'newest'], properties: {oldest: minor, newest: minor}}, source: text},
            }),
            charts: {
              type: 'array',
              minItems: 1,
              items: {
                type: 'object',
                required: ['version', 'sha256', 'source'],
                properties: {version, sha256: {type: 'string', pattern: '^[0-9a-f]{64}$'}, source: text},
              },
            },
          },
        },
      },
    },
  },
}

/** sha256 of the data as the file claims it: JSON.stringify of its `data`, in the file's key order. */
export function compatibilityDigest(data: unknown): string {
  return createHash('sha256').update(JSON.stringify(data)).digest('hex')
}

/**
 * The parsed file, or an error (exit 2) naming `where` and what does not match: its schema name
 * and the sha256 it claims. Its shape is checked once, where it comes in from outside
 * (`checkCompatibilityShape`, when fetched); the embedded file's by the unit tests. So a run
 * that reads the data pays no JSON Schema compile.
 */
export function parseCompatibilityFile(raw: string, where: string): CompatibilityFile {
  let doc: CompatibilityFile
  try {
    doc = JSON.parse(raw) as CompatibilityFile
  } catch (e) {
    throw refusal(`${where}: not JSON (${(e as Error).message})`)
  }
  const schema = (doc as {schema?: unknown} | null)?.schema
  if (schema !== COMPATIBILITY_SCHEMA) throw refusal(`${where}: schema is ${JSON.stringify(schema)}, this ichor reads ${COMPATIBILITY_SCHEMA}`)
  const actual = compatibilityDigest(doc.data)
  if (actual !== doc.sha256) throw refusal(`${where}: its data's sha256 is ${actual}, not the ${doc.sha256} it claims`)
  return doc
}

/** Refuses (exit 2) a file whose shape is not compatibility.json's, naming the first field that is wrong. */
export async function checkCompatibilityShape(doc: CompatibilityFile, where: string): Promise<void> {
  const {Ajv} = await import('ajv')
  const validate = new Ajv({allErrors: false}).compile(SCHEMA)
  if (validate(doc)) return
  const e = validate.errors?.[0]
  throw refusal(`${where}: ${e?.instancePath || '/'} ${e?.message ?? 'is not a compatibility file'}`)
}

function refusal(message: string): IchorError {
  return new IchorError(`compatibility data ${message}`, {exitCode: EXIT.usage})
}

let cached: {key: string; value: Compatibility} | undefined

/**
 * The compatibility data this run decides by: a fetched file in the assets folder when its
 * revision is newer than the embedded one, else the embedded file. A fetched file whose sha256
 * does not check out is an error naming it (its shape was checked when fetched, so it has been changed).
 */
export function compatibility(): Compatibility {
  const fetched = join(assetsDir(), COMPATIBILITY_FILE)
  if (cached?.key === fetched) return cached.value
  const embedded = parseCompatibilityFile(readPackagedAsset(COMPATIBILITY_FILE).toString('utf8'), 'embedded assets/compatibility.json')
  let chosen: CompatibilityFile = embedded
  let origin = 'embedded'
  if (existsSync(fetched)) {
    const file = parseCompatibilityFile(readFileSync(fetched, 'utf8'), fetched)
    if (file.revision > embedded.revision) {
      chosen = file
      origin = fetched
    }
  }
  cached = {key: fetched, value: {...chosen.data, revision: chosen.revision, origin}}
  return cached.value
}

export interface CompatibilityFetch {
  status: 'taken' | 'not newer' | 'absent'
  /** The mirror's file, when it has one. */
  source?: string
  /** Where it was stored (taken), or where the data in use comes from. */
  path?: string
  revision: number
}

/**
 * `ichor assets fetch --from DIR`: the mirror's compatibility.json, stored in the assets folder
 * when its revision is newer than the one in use. A file whose schema or sha256 does not match
 * what it claims is refused (exit 2), and nothing is stored.
 */
export async function takeCompatibilityFrom(mirror: string, dir: string = assetsDir()): Promise<CompatibilityFetch> {
  const source = join(mirror, COMPATIBILITY_FILE)
  const inUse = compatibility()
  if (!existsSync(source)) return {status: 'absent', revision: inUse.revision, path: inUse.origin}
  const raw = readFileSync(source, 'utf8')
  const file = parseCompatibilityFile(raw, source)
  await checkCompatibilityShape(file, source)
  if (file.revision <= inUse.revision) return {status: 'not newer', source, revision: inUse.revision, path: inUse.origin}
  const target = join(dir, COMPATIBILITY_FILE)
  mkdirSync(dir, {recursive: true})
  const tmp = `${target}.${process.pid}.tmp`
  writeFileSync(tmp, raw)
  renameSync(tmp, target)
  cached = undefined
  return {status: 'taken', source, path: target, revision: file.revision}
}
