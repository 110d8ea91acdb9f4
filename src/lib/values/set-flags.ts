// `--set` and its siblings, parsed as helm parses them (helm's strvals, v3.18 and v4 alike), so a
// user types what they type for helm and gets what helm would render:
//   a.b=c,d=e    several assignments       a.b={x,y}   a list ({} is [""], as helm)
//   a[0].b=c     a list index              a\.b=c      a backslash keeps the next character
// --set types true/false/null in any case and int64 integers without a leading zero; everything
// else, floats included, stays a string. --set-string types nothing, --set-json takes a JSON value
// per key (or, as Helm 4, one JSON object merged in), --set-file a file's content as a string and
// --set-literal the whole rest of the flag as one string. What helm refuses is refused here, exit 2,
// naming the flag and its text. Two additions of ichor's own: a prototype key is refused, and an
// integer beyond 2^53 (which helm keeps as int64 but JavaScript would round) is refused with the
// --set-string that keeps its digits.
import {IchorError, type Issue} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import {checkValuesTree, MAX_VALUES_DEPTH} from './guard.js'
import {readValueFileText} from './input.js'
import {deepMerge} from './merge.js'
import {FORBIDDEN_KEYS, forbiddenKeyMessage, formatPath, isMap, type Values} from './path.js'

/** The value flags in the order helm applies them (pkg/cli/values/options.go, MergeValues), after the -f files. */
export const SET_FLAG_NAMES = ['set-json', 'set', 'set-string', 'set-file', 'set-literal'] as const
export type SetFlagName = (typeof SET_FLAG_NAMES)[number]

/** One occurrence of a value flag; a bare string is a `--set`. */
export interface SetFlag {
  flag: SetFlagName
  text: string
}
export type SetInput = SetFlag | string

/** helm's limits: dots in one key (MaxNestedNameLevel) and the largest list index (MaxIndex). */
const MAX_NESTED_NAMES = 30
const MAX_INDEX = 65_536
const INT64_MAX = 2n ** 63n - 1n
const INT64_MIN = -(2n ** 63n)

const EXAMPLE: Record<SetFlagName, string> = {
  set: '--set hubble.relay.enabled=true',
  'set-string': '--set-string image.tag=1.19',
  'set-json': `--set-json 'tolerations=[{"operator":"Exists"}]'`,
  'set-file': '--set-file ca.crt=./ca.pem',
  'set-literal': '--set-literal password=a,b=c',
}

function asSetFlag(input: SetInput): SetFlag {
  return typeof input === 'string' ? {flag: 'set', text: input} : input
}

/** Applies the flags onto `values` (changed in place, as helm does onto its base) and returns the result. */
export function applySetFlags(values: Values, inputs: readonly SetInput[]): Values {
  let out = values
  for (const input of inputs) out = applyOne(out, asSetFlag(input))
  return out
}

/** Checks one flag alone, as it would be applied (a --set-file reads its files). Throws the exit-2 error. */
export function checkSetFlag(input: SetInput): void {
  applyOne({}, asSetFlag(input))
}

function applyOne(values: Values, set: SetFlag): Values {
  const trimmed = set.text.trim()
  if (set.flag === 'set-json' && trimmed.startsWith('{')) {
    // Helm 4: a whole JSON object, merged as a values file is.
    let parsed: unknown
    try {
      parsed = JSON.parse(trimmed)
    } catch (error) {
      throw usage(set, `not a valid JSON object: ${(error as Error).message}`)
    }
    if (!isMap(parsed)) throw usage(set, 'not a valid JSON object')
    return deepMerge(values, checkedJson(set, parsed, []) as Values)
  }
  new StrvalsParser(set).parse(values)
  return values
}

function usage(set: SetFlag, why: string): IchorError {
  return new IchorError(`--${set.flag} ${set.text}: ${why} (expected KEY=VALUE, e.g. ${EXAMPLE[set.flag]})`, {exitCode: EXIT.usage})
}

function checkedJson(set: SetFlag, value: unknown, path: (string | number)[]): unknown {
  const issues: Issue[] = []
  const checked = checkValuesTree(value, issues, path)
  if (issues.length > 0) throw usage(set, issues.map((i) => `${i.path}: ${i.message}`).join('; '))
  return checked
}

/** Quoted for a POSIX shell, so a suggested command can be pasted as it is. */
function shellQuote(text: string): string {
  return /^[\w./=:@+-]+$/.test(text) ? text : `'${text.replaceAll("'", `'\\''`)}'`
}

/** A path written back in --set syntax (dots, brackets and backslashes in keys escaped). */
function setSyntax(path: readonly (string | number)[]): string {
  return path.map((seg, i) => (typeof seg === 'number' ? `[${seg}]` : `${i === 0 ? '' : '.'}${seg.replace(/[\\.[,=]/g, '\\$&')}`)).join('')
}

/** helm's strings.EqualFold against an ASCII word: ASCII case, and ſ (U+017F) folds to s. */
function foldsTo(text: string, word: string): boolean {
  return text.length === word.length && text.replaceAll('ſ', 's').toLowerCase() === word
}

/** Go's unicode.IsSpace. */
function isGoSpace(c: string): boolean {
  return c === '\u0085' || (c !== '\ufeff' && /\s/u.test(c))
}

type Step = 'more' | 'end'
type Path = (string | number)[]

/**
 * One flag's text, read rune by rune. The shape follows helm's grammar: a key runs to `=`, `[`,
 * `,` or `.`; after `=` comes a `{list}` or a value up to the next unescaped comma. Reaching the
 * end of the text where helm's reader meets EOF ends the flag quietly, as in helm (`a[0` sets
 * nothing, `a.` too); any other surprise is an error.
 */
class StrvalsParser {
  private readonly runes: string[]
  private pos = 0
  private readonly literal: boolean

  constructor(private readonly set: SetFlag) {
    this.runes = Array.from(set.text)
    this.literal = set.flag === 'set-literal'
  }

  parse(data: Values): void {
    while (this.key(data, 0, []) === 'more');
  }

  private fail(why: string): never {
    throw usage(this.set, why)
  }

  /** Runes up to one of `stops` (consumed, returned as `stop`), or to the end (`stop` undefined). */
  private until(stops: string): {text: string; stop?: string} {
    let text = ''
    while (this.pos < this.runes.length) {
      const c = this.runes[this.pos++]!
      if (stops.includes(c)) return {text, stop: c}
      if (c === '\\' && !this.literal) {
        if (this.pos >= this.runes.length) return {text}
        text += this.runes[this.pos++]
      } else text += c
    }
    return {text}
  }

  private key(data: Values, nested: number, at: Path): Step {
    const {text: k, stop} = this.until(this.literal ? '=[.' : '=[,.')
    if (stop === undefined) {
      if (k === '') return 'end'
      this.fail(`key "${k}" has no value`)
    }
    if (FORBIDDEN_KEYS.has(k)) this.fail(forbiddenKeyMessage(k))
    const path = [...at, k]
    if (path.length > MAX_VALUES_DEPTH) this.fail(`the key path is deeper than ${MAX_VALUES_DEPTH} levels`)
    switch (stop) {
      case '[': {
        const index = this.index()
        if (index === 'end') return 'end'
        let list: unknown[] = []
        if (Object.hasOwn(data, k)) {
          const existing = data[k]
          if (!Array.isArray(existing)) this.fail(`${formatPath(path)} is ${describe(existing)}, not a list`)
          list = existing
        }
        const r = this.listItem(list, index, nested, path)
        assign(data, k, r.list)
        return r.step
      }
      case '=': {
        const v = this.value(path)
        assign(data, k, v.value)
        // `a=` is "" and ends the flag (helm's reader met EOF); `a[0]=` reads on.
        return v.atEnd ? 'end' : 'more'
      }
      case ',':
        this.fail(`key "${k}" has no value (cannot end with ,)`)
      // falls through: fail never returns
      default: {
        nested++
        if (nested > MAX_NESTED_NAMES) this.fail(`the key nests more than ${MAX_NESTED_NAMES} levels`)
        let inner: Values = {}
        if (Object.hasOwn(data, k)) {
          const existing = data[k]
          if (!isMap(existing)) this.fail(`${formatPath(path)} is ${describe(existing)}, not a map`)
          inner = existing
        }
        const step = this.key(inner, nested, path)
        const empty = Object.keys(inner).length === 0
        if (step === 'more' && empty) this.fail(`key map "${k}" has no value`)
        if (!empty) assign(data, k, inner)
        return step
      }
    }
  }

  /** What follows `=`, by the flag's kind; `atEnd` when the text ends right after the `=`. */
  private value(path: Path): {value: unknown; atEnd?: boolean} {
    if (this.set.flag === 'set-json') {
      if (this.emptyJsonValue()) return {value: null}
      const value = this.json(path)
      this.emptyJsonValue()
      return {value}
    }
    if (this.literal) {
      const value = this.runes.slice(this.pos).join('')
      this.pos = this.runes.length
      return {value}
    }
    if (this.pos >= this.runes.length) return {value: '', atEnd: true}
    return {value: this.listOrScalar(path)}
  }

  private listOrScalar(path: Path): unknown {
    if (this.runes[this.pos] === '{') {
      this.pos++
      const list: unknown[] = []
      for (;;) {
        const {text, stop} = this.until(',}')
        if (stop === undefined) this.fail(`list must terminate with '}'`)
        list.push(this.scalar(text, [...path, list.length]))
        if (stop === '}') {
          if (this.runes[this.pos] === ',') this.pos++
          return list
        }
      }
    }
    return this.scalar(this.until(',').text, path)
  }

  private scalar(text: string, path: Path): unknown {
    switch (this.set.flag) {
      case 'set-string':
        return text
      case 'set-file':
        return readValueFileText(text, `--set-file ${this.set.text}`)
      default:
        return this.typed(text, path)
    }
  }

  private typed(text: string, path: Path): unknown {
    if (foldsTo(text, 'true')) return true
    if (foldsTo(text, 'false')) return false
    if (foldsTo(text, 'null')) return null
    if (text === '0') return 0
    if (!/^[+-]?\d+$/.test(text) || text.startsWith('0')) return text
    const n = BigInt(text)
    // Past int64 helm keeps the text; within it, an integer.
    if (n > INT64_MAX || n < INT64_MIN) return text
    if (n > BigInt(Number.MAX_SAFE_INTEGER) || n < BigInt(-Number.MAX_SAFE_INTEGER)) {
      this.fail(
        `${formatPath(path)}: ${text} is an integer beyond ±${Number.MAX_SAFE_INTEGER} (2^53-1), which ichor cannot carry exactly; ` +
          `to keep its digits as a string, pass --set-string ${shellQuote(`${setSyntax(path)}=${text}`)}`,
      )
    }
    return Number(n)
  }

  /** The list index between `[` and `]`: a decimal integer as Go's strconv.Atoi reads it. */
  private index(): number | 'end' {
    const {text, stop} = this.until(']')
    if (stop === undefined) return 'end'
    if (!/^[+-]?\d+$/.test(text) || !Number.isSafeInteger(Number(text))) this.fail(`error parsing index: "${text}" is not an integer`)
    return Number(text)
  }

  private listItem(list: unknown[], i: number, nested: number, at: Path): {list: unknown[]; step: Step} {
    if (i < 0) this.fail(`negative ${i} index not allowed`)
    const path = [...at, i]
    if (path.length > MAX_VALUES_DEPTH) this.fail(`the key path is deeper than ${MAX_VALUES_DEPTH} levels`)
    const {text, stop} = this.until('[.=')
    if (text.length > 0) this.fail(`unexpected data at end of array index: "${text}"`)
    if (stop === undefined) return {list, step: 'end'}
    if (stop === '=') return {list: this.setIndex(list, i, this.value(path).value), step: 'more'}
    if (stop === '[') {
      const next = this.index()
      if (next === 'end') return {list, step: 'end'}
      let inner: unknown[] = []
      const existing = list[i]
      if (existing !== undefined && existing !== null) {
        if (!Array.isArray(existing)) this.fail(`${formatPath(path)} is ${describe(existing)}, not a list`)
        inner = existing
      }
      const r = this.listItem(inner, next, nested, path)
      if (r.step === 'end') return {list, step: 'end'}
      return {list: this.setIndex(list, i, r.list), step: 'more'}
    }
    // `.`: a map in the list; whatever else held that slot is replaced, as in helm.
    let inner: Values = {}
    if (i < list.length) {
      if (!isMap(list[i])) list[i] = {}
      inner = list[i] as Values
    }
    if (this.key(inner, nested, path) === 'end') return {list, step: 'end'}
    return {list: this.setIndex(list, i, inner), step: 'more'}
  }

  private setIndex(list: unknown[], i: number, value: unknown): unknown[] {
    if (i > MAX_INDEX) this.fail(`index of ${i} is greater than maximum supported index of ${MAX_INDEX}`)
    while (list.length <= i) list.push(null)
    list[i] = value
    return list
  }

  /** Skips spaces, then a comma or the end means "no value" (consumed); anything else is left. */
  private emptyJsonValue(): boolean {
    while (this.pos < this.runes.length) {
      const c = this.runes[this.pos]!
      if (c === ',') {
        this.pos++
        return true
      }
      if (!isGoSpace(c)) return false
      this.pos++
    }
    return true
  }

  /** One JSON value at the cursor, read to its natural end as Go's json.Decoder does; what follows is left. */
  private json(path: Path): unknown {
    const start = this.pos
    const end = jsonValueEnd(this.runes, start)
    if (typeof end !== 'number') this.fail(`${formatPath(path)}: ${end.refused ?? `not valid JSON: ${end.invalid}`}`)
    const source = this.runes.slice(start, end).join('')
    let value: unknown
    try {
      value = JSON.parse(source)
    } catch (error) {
      this.fail(`${formatPath(path)}: not valid JSON: ${(error as Error).message}`)
    }
    this.pos = end
    return checkedJson(this.set, value, path)
  }
}

function assign(data: Values, key: string, value: unknown): void {
  // helm skips an empty key: `=x` and `.a=1` set nothing.
  if (key !== '') data[key] = value
}

function describe(v: unknown): string {
  if (v === null) return 'null'
  if (isMap(v)) return 'a map'
  if (Array.isArray(v)) return 'a list'
  return `the ${typeof v} ${JSON.stringify(v)}`
}

const JSON_SPACE = ' \t\n\r'

/** Where the JSON value starting at `p` ends (an index), or why it is not one, or why ichor refuses it. */
function jsonValueEnd(r: readonly string[], p: number): number | {invalid?: string; refused?: string} {
  let refused: string | undefined
  const end = scanJsonValue(r, p, (why) => (refused ??= why))
  if (refused !== undefined) return {refused}
  return typeof end === 'number' ? end : {invalid: end}
}

function scanJsonValue(r: readonly string[], p: number, refuse: (why: string) => void): number | string {
  const ws = (q: number) => {
    while (q < r.length && JSON_SPACE.includes(r[q]!)) q++
    return q
  }
  const digits = (q: number) => {
    while (q < r.length && r[q]! >= '0' && r[q]! <= '9') q++
    return q
  }
  const isDigit = (q: number) => q < r.length && r[q]! >= '0' && r[q]! <= '9'
  const value = (q: number, depth: number): number | string => {
    if (depth > 10_000) return 'nests too deeply'
    q = ws(q)
    if (q >= r.length) return 'unexpected end of the value'
    const c = r[q]!
    if (c === '"') {
      for (q++; q < r.length; q++) {
        if (r[q] === '\\') q++
        else if (r[q] === '"') return q + 1
      }
      return 'unterminated string'
    }
    if (c === '{' || c === '[') {
      const close = c === '{' ? '}' : ']'
      q = ws(q + 1)
      if (r[q] === close) return q + 1
      for (;;) {
        if (c === '{') {
          q = ws(q)
          if (r[q] !== '"') return 'an object key must be a string'
          const k = value(q, depth + 1)
          if (typeof k === 'string') return k
          q = ws(k)
          if (r[q] !== ':') return `expected ":" after an object key`
          q++
        }
        const v = value(q, depth + 1)
        if (typeof v === 'string') return v
        q = ws(v)
        if (r[q] === close) return q + 1
        if (r[q] !== ',') return q >= r.length ? 'unexpected end of the value' : `unexpected "${r[q]}"`
        q++
      }
    }
    for (const word of ['true', 'false', 'null']) {
      if (c === word[0]) return r.slice(q, q + word.length).join('') === word ? q + word.length : `invalid literal at "${r.slice(q, q + 8).join('')}"`
    }
    if (c === '-' || isDigit(q)) {
      const start = q
      if (c === '-') q++
      if (r[q] === '0') q++
      else if (isDigit(q)) q = digits(q)
      else return 'a number needs digits'
      if (r[q] === '.') {
        if (!isDigit(q + 1)) return 'a number needs digits after its decimal point'
        q = digits(q + 1)
      }
      if (r[q] === 'e' || r[q] === 'E') {
        q++
        if (r[q] === '+' || r[q] === '-') q++
        if (!isDigit(q)) return 'a number needs digits in its exponent'
        q = digits(q)
      }
      const token = r.slice(start, q).join('')
      // Go's decoder refuses what a float64 cannot hold (1e400).
      if (!Number.isFinite(Number(token))) return `the number ${token} is out of range`
      // Past 2^53 JSON.parse would round the digits before anything could see them.
      if (/^-?\d+$/.test(token) && !Number.isSafeInteger(Number(token))) {
        refuse(
          `${token} is an integer beyond ±${Number.MAX_SAFE_INTEGER} (2^53-1), which ichor cannot carry exactly; quote it ("${token}") to keep its digits as a string`,
        )
      }
      return q
    }
    return `unexpected "${c}"`
  }
  return value(p, 0)
}
