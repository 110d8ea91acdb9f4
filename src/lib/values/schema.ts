// JSON-schema validation of values against a chart's values.schema.json with ajv,
// compiled once per chart digest and reused by every later call.
import {Ajv, type ErrorObject, type ValidateFunction} from 'ajv'
import type {ChartArchive} from '../chart/archive.js'
import type {Issue} from '../errors/errors.js'
import {formatPath, isMap, type Values} from './path.js'

type Schema = Record<string, unknown>

/**
 * A chart schema, compiled lazily. Compiling Cilium's whole 147 KB schema costs about
 * 1.5 s; when the root is a plain `type: object` with `properties` and no references,
 * validating each top-level key against its own sub-schema is the same check, so only
 * the keys a call actually carries are compiled (once per chart digest, then reused).
 */
interface ChartSchema {
  root: Schema
  splittable: boolean
  compiled: Map<string, ValidateFunction>
}

const schemas = new Map<string, ChartSchema | null>()
let ajv: Ajv | undefined

function compile(schema: Schema): ValidateFunction {
  ajv ??= new Ajv({allErrors: true, strict: false, validateSchema: false})
  return ajv.compile(schema)
}

function chartSchema(chart: ChartArchive): ChartSchema | null {
  if (schemas.has(chart.sha256)) return schemas.get(chart.sha256)!
  const raw = chart.files.get('values.schema.json')
  let entry: ChartSchema | null = null
  if (raw) {
    const text = raw.toString('utf8')
    const root = JSON.parse(text) as Schema
    delete root.$schema // draft-07 is ajv's default; the meta-schema URL need not resolve
    delete root.$id
    const rootKeys = Object.keys(root).filter((k) => !['type', 'properties', 'title', 'description'].includes(k))
    const splittable = root.type === 'object' && isMap(root.properties) && rootKeys.length === 0 && !text.includes('"$ref"')
    entry = {root, splittable, compiled: new Map()}
  }
  schemas.set(chart.sha256, entry)
  return entry
}

function validatorFor(schema: ChartSchema, key: string | null): ValidateFunction {
  const id = key ?? '\u0000root'
  let fn = schema.compiled.get(id)
  if (!fn) {
    fn = compile(key === null ? schema.root : ((schema.root.properties as Schema)[key] as Schema))
    schema.compiled.set(id, fn)
  }
  return fn
}

function runSchema(schema: ChartSchema, data: Values): ErrorObject[] {
  if (!schema.splittable) {
    const fn = validatorFor(schema, null)
    return fn(data) ? [] : [...(fn.errors ?? [])]
  }
  const props = schema.root.properties as Schema
  const errors: ErrorObject[] = []
  for (const [key, value] of Object.entries(data)) {
    if (!Object.prototype.hasOwnProperty.call(props, key)) continue
    const fn = validatorFor(schema, key)
    if (fn(value)) continue
    const prefix = `/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`
    for (const e of fn.errors ?? []) errors.push({...e, instancePath: prefix + e.instancePath})
  }
  return errors
}

/** Helm drops keys set to null while coalescing, before it checks the schema; so do we. */
function withoutNulls(values: unknown): unknown {
  if (Array.isArray(values)) return values.map(withoutNulls)
  if (!isMap(values)) return values
  const out: Values = {}
  for (const [k, v] of Object.entries(values)) if (v !== null) out[k] = withoutNulls(v)
  return out
}

export function validateAgainstSchema(chart: ChartArchive, values: Values): Issue[] {
  const schema = chartSchema(chart)
  if (!schema) return []
  const data = withoutNulls(values) as Values
  const errors = runSchema(schema, data)
  if (errors.length === 0) return []
  return dedupe(errors.filter((e) => !['anyOf', 'oneOf', 'if'].includes(e.keyword)).map((e) => toIssue(e, data)))
}

function toIssue(error: ErrorObject, data: unknown): Issue {
  const path = error.instancePath
    .split('/')
    .slice(1)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
  const got = path.reduce<unknown>((cur, k) => (cur as Record<string, unknown> | undefined)?.[k], data)
  const shown = got === undefined ? '' : ` (got ${describe(got)})`
  let message: string
  switch (error.keyword) {
    case 'type': {
      const want = String(error.params.type).split(',').join(' or ')
      message = `must be ${want}${shown}`
      break
    }
    case 'enum':
      message = `must be one of ${(error.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}${shown}`
      break
    case 'required':
      return {path: formatPath([...path, String(error.params.missingProperty)]), message: 'is required by the chart schema'}
    default:
      message = `${error.message ?? error.keyword}${shown}`
  }
  return {path: formatPath(path), message: `${message} (chart schema)`}
}

function describe(v: unknown): string {
  if (v === null) return 'null'
  if (Array.isArray(v)) return 'a list'
  if (typeof v === 'object') return 'a map'
  if (typeof v === 'string') return `string ${JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v)}`
  return `${typeof v} ${String(v)}`
}

function dedupe(issues: Issue[]): Issue[] {
  const seen = new Set<string>()
  return issues.filter((i) => {
    const key = `${i.path}\u0000${i.message}`
    if (seen.has(key)) return false
    seen.add(key)
    return true
  })
}
