// A small YAML emitter for JSON-like data (what a parsed manifest is), written for one job:
// the bytes of a bundle. It is deterministic by construction (keys in insertion order, one
// style per value shape, no line folding) and an order of magnitude faster than a general
// emitter on the 1.9 MB Argo CD render. A string is written plain only when no YAML 1.1 or
// 1.2 reader could take it for anything else; otherwise double-quoted (JSON escapes are
// valid YAML escapes), or as a literal block when it spans lines.
import {IchorError} from '../errors/errors.js'

// Plain only if made of these characters, with single spaces between words, not starting with
// an indicator. ':' and '#' are allowed only where they cannot start a mapping value or comment.
const PLAIN_SAFE = /^[A-Za-z_./$][\w./$@+=,()~:-]*(?: [\w./$@+=,()~-][\w./$@+=,()~:-]*)*$/
const DASH_WORD = /^-[A-Za-z_][\w./$@+=,()~:-]*$/ // --leader-elect, -v=2
// Words YAML 1.1 reads as booleans or null (y, yes, on, ...), any case.
const RESERVED_WORD = /^(?:y|yes|n|no|true|false|on|off|null|nan|inf)$/i
// Characters YAML does not allow raw (C1 controls, DEL) or reads as line breaks in 1.1 (NEL, LS, PS), and the BOM.
const UNSAFE_RAW = /[\u007f-\u009f\u2028\u2029\ufeff]/g
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029\ufeff]/

export function emitYaml(value: unknown): string {
  const lines: string[] = []
  emitBlock(value, 0, lines, '(root)')
  return `${lines.join('\n')}\n`
}

function isMapping(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

function entries(map: Record<string, unknown>): Array<[string, unknown]> {
  return Object.entries(map).filter(([, v]) => v !== undefined)
}

function isEmptyCollection(v: unknown): boolean {
  return (Array.isArray(v) && v.length === 0) || (isMapping(v) && entries(v).length === 0)
}

/** Writes a mapping or sequence at `indent`, or a scalar as one line. */
function emitBlock(value: unknown, indent: number, lines: string[], path: string): void {
  const pad = ' '.repeat(indent)
  if (Array.isArray(value)) {
    if (value.length === 0) {
      lines.push(`${pad}[]`)
      return
    }
    value.forEach((item, i) => emitSequenceItem(item, indent, lines, `${path}[${i}]`))
    return
  }
  if (isMapping(value)) {
    const list = entries(value)
    if (list.length === 0) {
      lines.push(`${pad}{}`)
      return
    }
    for (const [key, child] of list) emitEntry(key, child, indent, lines, `${path}.${key}`)
    return
  }
  lines.push(pad + inlineScalar(value, indent, lines, path))
}

function emitEntry(key: string, child: unknown, indent: number, lines: string[], path: string): void {
  const pad = ' '.repeat(indent)
  const k = scalarString(key)
  if (isEmptyCollection(child)) {
    lines.push(`${pad}${k}: ${Array.isArray(child) ? '[]' : '{}'}`)
  } else if (Array.isArray(child)) {
    lines.push(`${pad}${k}:`)
    emitBlock(child, indent, lines, path) // sequences under a key are not indented, as kubectl writes them
  } else if (isMapping(child)) {
    lines.push(`${pad}${k}:`)
    emitBlock(child, indent + 2, lines, path)
  } else {
    const start = lines.length
    lines.push('') // placeholder: a block scalar appends its body lines after this one
    lines[start] = `${pad}${k}: ${inlineScalar(child, indent + 2, lines, path)}`
  }
}

function emitSequenceItem(item: unknown, indent: number, lines: string[], path: string): void {
  const pad = ' '.repeat(indent)
  if (isEmptyCollection(item)) {
    lines.push(`${pad}- ${Array.isArray(item) ? '[]' : '{}'}`)
    return
  }
  if (Array.isArray(item) || isMapping(item)) {
    // Write the child two columns in, then put the dash where its first line's indentation was.
    const start = lines.length
    emitBlock(item, indent + 2, lines, path)
    lines[start] = `${pad}- ${lines[start]!.slice(indent + 2)}`
    return
  }
  const start = lines.length
  lines.push('')
  lines[start] = `${pad}- ${inlineScalar(item, indent + 2, lines, path)}`
}

/** The scalar as it follows `key: ` or `- `; a literal block pushes its body lines (indented by `bodyIndent`). */
function inlineScalar(value: unknown, bodyIndent: number, lines: string[], path: string): string {
  if (value === null) return 'null'
  if (typeof value === 'boolean') return value ? 'true' : 'false'
  if (typeof value === 'number') return numberString(value, path)
  if (typeof value === 'string') {
    const block = literalBlock(value)
    if (block) {
      const pad = ' '.repeat(bodyIndent)
      for (const line of block.body) lines.push(line === '' ? '' : pad + line)
      return block.header
    }
    return scalarString(value)
  }
  throw new IchorError(`cannot write ${path} as YAML: ${typeof value} is not JSON data`)
}

function numberString(n: number, path: string): string {
  if (!Number.isFinite(n)) throw new IchorError(`cannot write ${path} as YAML: ${n} is not a finite number`)
  const s = String(n)
  // YAML 1.1 floats need a dot: 1e+21 would read back as a string there.
  return /e/.test(s) && !s.includes('.') ? s.replace('e', '.0e') : s
}

/** A one-line string: plain when unambiguous, else double-quoted. */
export function scalarString(s: string): string {
  const plain = (PLAIN_SAFE.test(s) || DASH_WORD.test(s)) && !RESERVED_WORD.test(s) && !/:$|: /.test(s) && !/^[.+-]?\d/.test(s) && !/^\.(?:inf|nan)$/i.test(s)
  if (plain) return s
  return JSON.stringify(s).replace(UNSAFE_RAW, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
}

/**
 * `|`, `|-` or `|+` and the lines, for a multi-line string a literal block keeps exactly:
 * no control characters or CR, no line with trailing blanks, and a first line that does
 * not start with a blank (it would need an indentation indicator). Otherwise undefined.
 */
function literalBlock(s: string): {header: string; body: string[]} | undefined {
  if (!s.includes('\n') || s.includes('\r') || CONTROL.test(s)) return undefined
  const content = s.replace(/\n+$/, '')
  const trailing = s.length - content.length
  if (content === '' || /^[ \t]/.test(content)) return undefined
  const body = content.split('\n')
  if (body.some((line) => /[ \t]$/.test(line))) return undefined
  const header = trailing === 0 ? '|-' : trailing === 1 ? '|' : '|+'
  // With keep chomping, the extra final line breaks become empty lines of the block.
  for (let i = 1; i < trailing; i++) body.push('')
  return {header, body}
}
