// The one YAML emitter: js-yaml's dump. bench/yaml.mjs measured it on the Argo CD render
// against the `yaml` package, which is about three times slower there and writes DEL and
// C1 characters (NEL) raw, so that the Go YAML reader under helm, kubectl and Argo CD
// refuses the whole file; js-yaml escapes every character that is not printable.
import jsyaml from 'js-yaml'
import {IchorError} from '../errors/errors.js'

/**
 * YAML 1.1 readers (go-yaml, under helm, kubectl and Argo CD) read `1_000` or `0b1_0` as
 * numbers; js-yaml's 1.2 schema does not, so it would write them plain. A type that only
 * resolves makes the dumper see those strings as ambiguous and quote them; it matches no
 * value, so it never writes a tag. (The 1.1 booleans `yes`/`on`/`y` and sexagesimal `1:20`
 * are quoted by js-yaml's own compatibility mode, `0644` and `1e3` by its 1.2 schema.)
 */
const YAML11_NUMBER_WITH_UNDERSCORES = new jsyaml.Type('tag:ichor,2025:yaml-1.1-number', {
  kind: 'scalar',
  resolve: (s: string | null) => s !== null && s.includes('_') && readsAsNumber(s.replaceAll('_', '')),
})

function readsAsNumber(scalar: string): boolean {
  if (!/^[-+]?[\d.]/.test(scalar)) return false
  try {
    return typeof jsyaml.load(scalar, {schema: jsyaml.CORE_SCHEMA}) === 'number'
  } catch {
    return false
  }
}
const SCHEMA = jsyaml.DEFAULT_SCHEMA.extend({implicit: [YAML11_NUMBER_WITH_UNDERSCORES]})

export interface ToYamlOptions {
  /** Keys in sorted order (the default: the bytes then depend only on the data), or in the order they have. */
  sortKeys?: boolean
}

/**
 * JSON-like data as one YAML document, deterministically: no line folding, no anchors or
 * aliases (a shared object is written out each time), strings a YAML 1.1 or 1.2 reader
 * could take for anything else double-quoted, multi-line strings as literal blocks.
 * `undefined` map values are left out, as JSON.stringify does; anything not JSON data is an error.
 */
export function toYaml(value: unknown, {sortKeys = true}: ToYamlOptions = {}): string {
  try {
    return jsyaml.dump(value, {schema: SCHEMA, sortKeys, noRefs: true, lineWidth: -1, quotingType: '"', noCompatMode: false})
  } catch (error) {
    throw new IchorError(`cannot write YAML: ${(error as Error).message}`)
  }
}
