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
 * validating each key against its own sub-schema is the same check, so only the paths a
 * call actually carries are compiled, down through every such plain object node (see
 * `splittable`; once per chart digest, then reused).
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

/**
 * A node that says only "an object with these properties" (plus title/description): checking
 * a map against it is checking each key the map carries against that key's own sub-schema,
 * so it is split, at the root and below, down to the nodes that say more (a leaf's type, a
 * list, an enum, required, additionalProperties...).
 */
function splittable(node: unknown): node is Schema & {properties: Schema} {
  if (!isMap(node) || node.type !== 'object' || !isMap(node.properties)) return false
  return Object.keys(node).every((k) => ['type', 'properties', 'title', 'description'].includes(k))
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
    // A reference may point anywhere in the document: such a schema is compiled whole.
    entry = {root, splittable: splittable(root) && !text.includes('"$ref"'), compiled: new Map()}
  }
  schemas.set(chart.sha256, entry)
  return entry
}

function validatorFor(schema: ChartSchema, path: string[], node: Schema): ValidateFunction {
  const id = path.length === 0 ? '\u0000root' : path.join('\u0000')
  let fn = schema.compiled.get(id)
  if (!fn) {
    fn = compile(node)
    schema.compiled.set(id, fn)
  }
  return fn
}

const pointer = (path: string[]) => path.map((k) => `/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`).join('')

function runNode(schema: ChartSchema, node: Schema, path: string[], data: unknown, errors: ErrorObject[]): void {
  if (splittable(node) && isMap(data)) {
    for (const [key, value] of Object.entries(data)) {
      if (Object.prototype.hasOwnProperty.call(node.properties, key)) runNode(schema, node.properties[key] as Schema, [...path, key], value, errors)
    }
    return
  }
  const fn = validatorFor(schema, path, node)
  if (fn(data)) return
  const prefix = pointer(path)
  for (const e of fn.errors ?? []) errors.push({...e, instancePath: prefix + e.instancePath})
}

function runSchema(schema: ChartSchema, data: Values): ErrorObject[] {
  const errors: ErrorObject[] = []
  if (!schema.splittable) {
    const fn = validatorFor(schema, [], schema.root)
    return fn(data) ? [] : [...(fn.errors ?? [])]
  }
  runNode(schema, schema.root, [], data, errors)
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

/** The schema paths compiled so far for `chart` ("(root)" for the whole schema): what a check has cost. */
export function compiledSchemaPaths(chart: ChartArchive): string[] {
  return [...(schemas.get(chart.sha256)?.compiled.keys() ?? [])].map((id) => (id === '\u0000root' ? '(root)' : id.split('\u0000').join('.')))
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
