// What user data may hold before it becomes JavaScript objects: no key that reaches an
// object's prototype, a bounded depth (the merge, clone and schema walks recurse), and
// no integer JavaScript cannot hold exactly (it would be rounded, e.g. to 1e26, and helm
// would then render something else than the user wrote).
import type {Issue} from '../errors/errors.js'
import {FORBIDDEN_KEYS, forbiddenKeyMessage, formatPath, isMap} from './path.js'

/** Deepest nesting accepted in values; Cilium's own values go about 8 levels deep. */
export const MAX_VALUES_DEPTH = 64
/** Refused issues reported at once; more only repeat the point. */
const MAX_ISSUES = 20

export function unsafeIntegerMessage(shown: string): string {
  return `${shown} is an integer beyond ±${Number.MAX_SAFE_INTEGER} (2^53-1), which ichor cannot carry exactly; quote it if it is meant as a string`
}

/**
 * Checks a parsed values tree and returns it with BigInt integers turned into numbers.
 * Problems are appended to `issues`, each with its path.
 */
export function checkValuesTree(value: unknown, issues: Issue[], path: (string | number)[] = []): unknown {
  if (issues.length >= MAX_ISSUES) return value
  if (typeof value === 'bigint') {
    if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < BigInt(-Number.MAX_SAFE_INTEGER)) {
      issues.push({path: formatPath(path), message: unsafeIntegerMessage(value.toString())})
      return value
    }
    return Number(value)
  }
  if (typeof value === 'number' && Number.isInteger(value) && !Number.isSafeInteger(value)) {
    issues.push({path: formatPath(path), message: unsafeIntegerMessage(String(value))})
    return value
  }
  if (value === null || typeof value !== 'object') return value
  if (path.length >= MAX_VALUES_DEPTH) {
    issues.push({path: formatPath(path.slice(0, 3)) + '…', message: `nests deeper than ${MAX_VALUES_DEPTH} levels`})
    return value
  }
  if (Array.isArray(value)) return value.map((item, i) => checkValuesTree(item, issues, [...path, i]))
  if (!isMap(value)) return value
  const out: Record<string, unknown> = {}
  for (const [key, item] of Object.entries(value)) {
    if (FORBIDDEN_KEYS.has(key)) {
      issues.push({path: formatPath([...path, key]), message: forbiddenKeyMessage(key)})
      continue
    }
    out[key] = checkValuesTree(item, issues, [...path, key])
  }
  return out
}
