// Value paths: arrays of keys, printed the way a user would write them with --set
// (dots between keys, a key that itself holds a dot or slash quoted in brackets).

import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'

export type Values = {[key: string]: unknown}
export type Path = readonly string[]

/** Keys that name an object's prototype machinery instead of data. */
export const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype'])

export function forbiddenKeyMessage(key: string): string {
  return `the key ${JSON.stringify(key)} is not accepted (${[...FORBIDDEN_KEYS].join(', ')} name JavaScript's object machinery, not values)`
}

export function isMap(v: unknown): v is Values {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/** A path as typed with --set; a number is a list index. */
export function formatPath(path: readonly (string | number)[]): string {
  if (path.length === 0) return '(root)'
  return path.map((k, i) => (typeof k === 'number' ? `[${k}]` : /^[A-Za-z0-9_-]+$/.test(k) ? (i === 0 ? k : `.${k}`) : `[${JSON.stringify(k)}]`)).join('')
}

export function getPath(values: unknown, path: Path): unknown {
  let cur: unknown = values
  for (const key of path) {
    if (!isMap(cur)) return undefined
    cur = cur[key]
  }
  return cur
}

export function hasPath(values: unknown, path: Path): boolean {
  let cur: unknown = values
  for (const key of path) {
    if (!isMap(cur) || !Object.prototype.hasOwnProperty.call(cur, key)) return false
    cur = cur[key]
  }
  return true
}

/** Sets a value, creating maps on the way (replacing a non-map in the way). */
export function setPath(values: Values, path: Path, value: unknown): void {
  // A prototype key would write onto Object.prototype instead of into the values.
  const bad = path.find((k) => FORBIDDEN_KEYS.has(k))
  if (bad !== undefined) throw new IchorError(`values ${formatPath(path)}: ${forbiddenKeyMessage(bad)}`, {exitCode: EXIT.usage})
  let cur: Values = values
  path.forEach((key, i) => {
    if (i === path.length - 1) {
      cur[key] = value
      return
    }
    if (!isMap(cur[key])) cur[key] = {}
    cur = cur[key] as Values
  })
}

/** Every leaf path of a values tree (a map's leaves; a list or scalar is a leaf). */
export function leafPaths(values: unknown, prefix: string[] = []): string[][] {
  if (!isMap(values) || (Object.keys(values).length === 0 && prefix.length > 0)) return [prefix]
  return Object.entries(values).flatMap(([k, v]) => leafPaths(v, [...prefix, k]))
}
