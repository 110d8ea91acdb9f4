// The one way a read command prints its result: `-o json|yaml` as in kubectl, its human view
// without -o, nothing under --json (oclif prints the returned document with its schemaVersion),
// and the exit code of a failed result (a degraded status) set here, the same in every format.
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import {toYaml} from '../yaml/emit.js'
import {OUTPUT_FORMATS} from './flags.js'

export interface PrintOptions<T> {
  /** The -o/--output flag: 'json', 'yaml', or undefined for the human view. */
  format: string | undefined
  /** --json is on (this.jsonEnabled()). */
  json: boolean
  /** The text without -o: a table, a report, or YAML for a values document. */
  human: (result: T) => string
  /** Scripts gate on it: exit 1 (EXIT.failed) when true, whatever the format. */
  failed?: (result: T) => boolean
  out?: NodeJS.WritableStream
}

/** Prints `result` as asked and returns the text printed ('' under --json), for tests. */
export async function printResult<T>(result: T, options: PrintOptions<T>): Promise<string> {
  const {format, json, human, failed, out = process.stdout} = options
  let text: string
  if (json) text = ''
  // -o yaml is the -o json document (key order kept), through the one YAML emitter.
  else if (format === 'json') text = `${JSON.stringify(result, null, 2)}\n`
  else if (format === 'yaml') text = toYaml(JSON.parse(JSON.stringify(result)) as unknown, {sortKeys: false})
  else if (format === undefined) text = ensureNewline(human(result))
  else throw new IchorError(`--output: "${format}" is not a format (accepted: ${OUTPUT_FORMATS.join(', ')})`, {exitCode: EXIT.usage})
  if (failed?.(result)) process.exitCode = EXIT.failed
  if (text) out.write(text)
  return text
}

function ensureNewline(text: string): string {
  return text.endsWith('\n') || text === '' ? text : `${text}\n`
}
