// `--set` in Helm's syntax (its strvals rules), so users type what they type for helm:
//   a.b=c,d=e   several assignments     a.b={x,y}   a list
//   a[0].b=c    a list index            a\.b=c      a key holding a dot
// Typing follows helm: integers, true/false and null are typed; everything else,
// floats included, stays a string.
import {IchorError} from '../errors/errors.js'
import {MAX_VALUES_DEPTH, unsafeIntegerMessage} from './guard.js'
import {formatPath, isMap, type Values, FORBIDDEN_KEYS, forbiddenKeyMessage} from './path.js'
import {EXIT} from '../errors/exit-codes.js'

type Segment = string | number

export function applySetFlags(values: Values, flags: readonly string[]): Values {
  for (const flag of flags) {
    for (const {path, value} of parseSetFlag(flag)) assign(values, path, value, flag)
  }
  return values
}

export function parseSetFlag(flag: string): {path: Segment[]; value: unknown}[] {
  const out: {path: Segment[]; value: unknown}[] = []
  let i = 0
  const fail = (why: string): never => {
    throw new IchorError(`--set ${flag}: ${why} (expected key.path=value, e.g. --set hubble.relay.enabled=true)`, {exitCode: EXIT.usage})
  }
  while (i < flag.length) {
    // key
    const path: Segment[] = []
    let key = ''
    // Checked as each segment is pushed, so a 20,000-segment path stops at the cap.
    const push = (seg: Segment) => {
      if (typeof seg === 'string' && FORBIDDEN_KEYS.has(seg)) fail(forbiddenKeyMessage(seg))
      if (path.length >= MAX_VALUES_DEPTH) fail(`the key path is deeper than ${MAX_VALUES_DEPTH} levels`)
      path.push(seg)
    }
    for (;;) {
      if (i >= flag.length) fail('missing "=value"')
      const c = flag[i]!
      if (c === '\\' && i + 1 < flag.length) {
        key += flag[i + 1]
        i += 2
      } else if (c === '.') {
        if (key === '') fail('empty key segment')
        push(key)
        key = ''
        i++
      } else if (c === '[') {
        if (key !== '') push(key)
        key = ''
        const close = flag.indexOf(']', i)
        if (close < 0) fail('unclosed "["')
        const index = Number(flag.slice(i + 1, close))
        if (!Number.isInteger(index) || index < 0 || index > 65_536) fail(`bad list index "${flag.slice(i + 1, close)}"`)
        push(index)
        i = close + 1
        if (flag[i] === '.') i++
      } else if (c === '=') {
        if (key !== '') push(key)
        else if (path.length === 0) fail('empty key')
        i++
        break
      } else if (c === ',') {
        fail(`"${key}" has no "=value"`)
      } else {
        key += c
        i++
      }
    }
    // value
    if (flag[i] === '{') {
      const close = flag.indexOf('}', i)
      if (close < 0) fail('unclosed "{"')
      const inner = flag.slice(i + 1, close)
      out.push({path, value: inner === '' ? [] : splitUnescaped(inner, ',').map((raw) => typeScalar(raw, path, fail))})
      i = close + 1
      if (i < flag.length && flag[i] !== ',') fail('unexpected text after "}"')
      i++
      continue
    }
    let raw = ''
    while (i < flag.length && flag[i] !== ',') {
      if (flag[i] === '\\' && i + 1 < flag.length) {
        raw += flag[i + 1]
        i += 2
      } else raw += flag[i++]
    }
    i++ // skip the comma
    out.push({path, value: typeScalar(raw, path, fail)})
  }
  return out
}

function splitUnescaped(text: string, sep: string): string[] {
  const parts: string[] = []
  let cur = ''
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '\\' && i + 1 < text.length) cur += text[++i]
    else if (text[i] === sep) {
      parts.push(cur)
      cur = ''
    } else cur += text[i]
  }
  parts.push(cur)
  return parts
}

function typeScalar(raw: string, path: Segment[], fail: (why: string) => never): unknown {
  if (raw === 'true') return true
  if (raw === 'false') return false
  if (raw === 'null') return null
  // helm types integers only (no leading zeros), never floats
  if (/^[-+]?(0|[1-9]\d*)$/.test(raw)) {
    const n = Number(raw)
    // Beyond 2^53 a number is rounded (helm keeps int64, or a string past it): refuse rather than guess.
    if (!Number.isSafeInteger(n)) fail(`${formatPath(path)}: ${unsafeIntegerMessage(raw)}`)
    return n
  }
  return raw
}

function assign(root: Values, path: Segment[], value: unknown, flag: string): void {
  let cur: unknown = root
  for (let i = 0; i < path.length; i++) {
    const seg = path[i]!
    const last = i === path.length - 1
    const nextIsIndex = !last && typeof path[i + 1] === 'number'
    if (typeof seg === 'number') {
      if (!Array.isArray(cur)) throw new IchorError(`--set ${flag}: index [${seg}] used on something that is not a list`, {exitCode: EXIT.usage})
      while (cur.length <= seg) cur.push(null)
      if (last) cur[seg] = value
      else {
        if (nextIsIndex ? !Array.isArray(cur[seg]) : !isMap(cur[seg])) cur[seg] = nextIsIndex ? [] : {}
        cur = cur[seg]
      }
    } else {
      const map = cur as Values
      if (last) map[seg] = value
      else {
        if (nextIsIndex ? !Array.isArray(map[seg]) : !isMap(map[seg])) map[seg] = nextIsIndex ? [] : {}
        cur = map[seg]
      }
    }
  }
}
