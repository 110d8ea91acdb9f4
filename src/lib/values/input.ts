// Reading a user's values file: YAML 1.2 (so `yes`/`on` stay strings and a type error
// shows up in validation instead of silently becoming a boolean), one document, a map.
// The file is hostile until proven otherwise: its size is known before a byte is parsed,
// only regular files (or `-` for standard input) are read, and at most the cap is read.
import {closeSync, fstatSync, openSync, readSync, statSync} from 'node:fs'
import {isAlias, isMap as isYamlMap, isScalar, LineCounter, parseAllDocuments, visit, type Document} from 'yaml'
import {IchorError, ValidationError, type Issue} from '../errors/errors.js'
import {checkValuesTree} from './guard.js'
import {isMap, type Values} from './path.js'
import {EXIT} from '../errors/exit-codes.js'

/**
 * Cap on a values file as read. The merged values are capped at 64 KiB of JSON later; a file
 * may be larger (comments, a copy of the chart's whole values.yaml), so it gets four times that.
 */
export const MAX_VALUES_FILE_BYTES = 256 * 1024
/** Aliases one document may expand; a few legitimate ones, never a billion laughs. */
export const MAX_ALIAS_COUNT = 100

/** What a file of the operator's is read as, and at most how much of it (a values file, a Talos patch). */
export interface FileCap {
  /** In messages: "the values file is N bytes", "cannot read the patch". */
  what: string
  maxBytes: number
}

const VALUES_FILE: FileCap = {what: 'values file', maxBytes: MAX_VALUES_FILE_BYTES}

export function readValuesFile(file: string, flag = '-f'): Values {
  const label = `${flag} ${file}`
  const bytes = file === '-' ? readStdinCapped(label) : readRegularFileCapped(file, label, VALUES_FILE)
  return parseValuesText(bytes.toString('utf8'), label)
}

/** A file's whole content as text (`--set-file`), read as carefully and capped as a values file. */
export function readValueFileText(file: string, label: string): string {
  return (file === '-' ? readStdinCapped(label) : readRegularFileCapped(file, label, VALUES_FILE)).toString('utf8')
}

/** The text of an operator's file other than values (a Talos config patch): read as carefully, with its own cap; exit 2 naming `label`. */
export function readCappedFileText(file: string, label: string, cap: FileCap): string {
  return readRegularFileCapped(file, label, cap).toString('utf8')
}

const shownSize = (bytes: number) => (bytes % (1024 * 1024) === 0 ? `${bytes / 1024 / 1024} MiB` : `${bytes / 1024} KiB`)

/** The refusal of text over a cap, as a values file's: exported for text that came another way (an inline patch). */
export function tooLarge(label: string, size: number | string, cap: FileCap = VALUES_FILE): IchorError {
  return new IchorError(`${label}: the ${cap.what} is ${size} bytes; at most ${cap.maxBytes} bytes (${shownSize(cap.maxBytes)}) are read`, {
    exitCode: EXIT.usage,
  })
}

function cannotRead(label: string, error: unknown, cap: FileCap): IchorError {
  const code = (error as NodeJS.ErrnoException).code
  const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'is a directory' : code === 'EACCES' ? 'permission denied' : String(code ?? error)
  return new IchorError(`${label}: cannot read the ${cap.what}: ${why}`, {exitCode: EXIT.usage})
}

function readRegularFileCapped(file: string, label: string, cap: FileCap): Buffer {
  // stat before open: opening a FIFO with no writer would block forever.
  let kind: string | undefined
  try {
    const st = statSync(file)
    kind = st.isFile() ? undefined : st.isDirectory() ? 'is a directory' : 'is not a regular file (a device, FIFO or socket)'
    if (!kind && st.size > cap.maxBytes) throw tooLarge(label, st.size, cap)
  } catch (error) {
    if (error instanceof IchorError) throw error
    throw cannotRead(label, error, cap)
  }
  if (kind)
    throw new IchorError(`${label}: cannot read the ${cap.what}: ${kind}; give a regular file${cap === VALUES_FILE ? ', or - to read standard input' : ''}`, {
      exitCode: EXIT.usage,
    })
  let fd: number
  try {
    fd = openSync(file, 'r')
  } catch (error) {
    throw cannotRead(label, error, cap)
  }
  try {
    // The path may have been swapped between stat and open: judge what was opened.
    if (!fstatSync(fd).isFile()) throw new IchorError(`${label}: cannot read the ${cap.what}: is not a regular file`, {exitCode: EXIT.usage})
    return readCapped(fd, label, cap)
  } finally {
    closeSync(fd)
  }
}

// Standard input can be read once: a command that checks `-f -` before it connects and reads it
// again for the change gets the same bytes both times.
let stdinBytes: Buffer | undefined

function readStdinCapped(label: string): Buffer {
  return (stdinBytes ??= readCapped(0, label, VALUES_FILE))
}

/** Reads at most cap + 1 bytes: one more than allowed is enough to refuse. */
function readCapped(fd: number, label: string, cap: FileCap): Buffer {
  const buf = Buffer.alloc(cap.maxBytes + 1)
  let length = 0
  while (length < buf.length) {
    let n: number
    try {
      n = readSync(fd, buf, length, buf.length - length, null)
    } catch (error) {
      // A non-blocking stdin pipe with nothing in it yet.
      if ((error as NodeJS.ErrnoException).code === 'EAGAIN') {
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10)
        continue
      }
      throw cannotRead(label, error, cap)
    }
    if (n === 0) break
    length += n
  }
  if (length > cap.maxBytes) throw tooLarge(label, `more than ${cap.maxBytes}`, cap)
  return buf.subarray(0, length)
}

export function parseValuesText(text: string, label: string): Values {
  const size = Buffer.byteLength(text)
  if (size > MAX_VALUES_FILE_BYTES) throw tooLarge(label, size)
  const lineCounter = new LineCounter()
  // uniqueKeys is checked below in linear time; the library's own check is quadratic in the keys of a map.
  // Integers come as BigInt so one beyond 2^53 is seen as such, not silently rounded.
  const docs = parseAllDocuments(text, {version: '1.2', uniqueKeys: false, intAsBigInt: true, prettyErrors: true, lineCounter})
  if (!Array.isArray(docs)) return {}
  const nonEmpty = docs.filter((d) => d.errors.length > 0 || d.contents !== null)
  if (nonEmpty.length > 1) {
    throw new IchorError(`${label}: holds ${nonEmpty.length} YAML documents; a values file is one document (a map)`, {exitCode: EXIT.usage})
  }
  const doc = nonEmpty[0]
  if (!doc) return {}
  if (doc.errors.length > 0) {
    const first = doc.errors[0]!
    const where = first.linePos?.[0] ? ` at line ${first.linePos[0].line}, column ${first.linePos[0].col}` : ''
    const message = first.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '')
    const why = /Maximum call stack/.test(message) ? 'it nests too deeply' : message
    throw new IchorError(`${label}: not valid YAML${where}: ${why}`, {exitCode: EXIT.usage})
  }
  checkUniqueKeys(doc, label, lineCounter)
  let value: unknown
  try {
    value = doc.toJS({maxAliasCount: MAX_ALIAS_COUNT})
  } catch (error) {
    const message = (error as Error).message ?? String(error)
    if (/alias count/i.test(message)) throw aliasBomb(label, 'the values')
    if (error instanceof RangeError) throw new IchorError(`${label}: not valid YAML: it nests too deeply`, {exitCode: EXIT.usage})
    throw new IchorError(`${label}: not valid YAML: ${message}`, {exitCode: EXIT.usage})
  }
  if (value === null || value === undefined) return {}
  if (!isMap(value)) {
    const kind = Array.isArray(value) ? 'a list' : `a ${typeof value === 'bigint' ? 'number' : typeof value}`
    throw new IchorError(`${label}: the document is ${kind}; a values file must be a map of keys (e.g. "hubble:\\n  enabled: true")`, {exitCode: EXIT.usage})
  }
  const issues: Issue[] = []
  const checked = checkValuesTree(value, issues) as Values
  if (issues.length > 0) throw new ValidationError(label, issues)
  return checked
}

/** The refusal of a document whose aliases expand past MAX_ALIAS_COUNT (yaml's toJS throws "Excessive alias count"). */
export function aliasBomb(label: string, what: string): IchorError {
  return new IchorError(
    `${label}: its aliases (*name) expand too much (more than ${MAX_ALIAS_COUNT}, e.g. a "billion laughs" document); write ${what} out instead`,
    {exitCode: EXIT.usage},
  )
}

/** Refuses a key repeated in one map (helm would silently keep the last), in one pass over the document. */
export function checkUniqueKeys(doc: Document.Parsed, label: string, lineCounter: LineCounter): void {
  let problem: {message: string; offset: number} | undefined
  visit(doc, {
    Map(_, map) {
      if (!isYamlMap(map)) return undefined
      const seen = new Set<string>()
      for (const pair of map.items) {
        const key = pair.key
        const offset = (key as {range?: [number, number, number]} | null)?.range?.[0] ?? map.range?.[0] ?? 0
        if (!isScalar(key) || isAlias(key)) {
          problem = {message: 'a map key must be a plain string, not a list, map or alias', offset}
          return visit.BREAK
        }
        const name = String(key.value)
        if (seen.has(name)) {
          problem = {message: `map keys must be unique; ${JSON.stringify(name)} is repeated`, offset}
          return visit.BREAK
        }
        seen.add(name)
      }
      return undefined
    },
  })
  if (problem) {
    const pos = lineCounter.linePos(problem.offset)
    throw new IchorError(`${label}: not valid YAML at line ${pos.line}, column ${pos.col}: ${problem.message}`, {exitCode: EXIT.usage})
  }
}
