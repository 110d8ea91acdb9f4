// The layered values engine shared by every chart ichor renders:
// effective = ichor defaults ⟶ user values (deep merge) ⟶ ichor-owned keys.
// All problems are collected and reported together, each naming its path.
import type {ChartArchive} from '../chart/archive.js'
import type {Issue} from '../errors/errors.js'
import {knownKeys, suggestKeys, type KeyNode} from './known-keys.js'
import {layeredValues} from './merge.js'

import {formatPath, hasPath, getPath, isMap, type Path, type Values} from './path.js'
import {validateAgainstSchema} from './schema.js'

export interface OwnedKey {
  path: Path
  /** Why ichor owns it and where the user changes it instead. */
  reason: string
}

export interface LayeredValuesSpec {
  chart: ChartArchive
  defaults: Values
  /** Values ichor sets last; they always win. */
  owned: Values
  ownedKeys: readonly OwnedKey[]
  /** Cap on the serialised effective values (they are stored on the CR). */
  maxBytes?: number
}

export interface LayeredValuesResult {
  effective: Values
  issues: Issue[]
}

const DEFAULT_MAX_VALUES_BYTES = 64 * 1024

export function checkLayeredValues(spec: LayeredValuesSpec, user: Values): LayeredValuesResult {
  const issues: Issue[] = []
  issues.push(...ownedKeyIssues(spec.ownedKeys, user))
  const ownedPaths = spec.ownedKeys.map((k) => formatPath(k.path))
  issues.push(...unknownKeyIssues(knownKeys(spec.chart), user, [], ownedPaths))
  const effective = layeredValues(spec, user)
  const max = spec.maxBytes ?? DEFAULT_MAX_VALUES_BYTES
  const size = Buffer.byteLength(JSON.stringify(effective))
  if (size > max) {
    issues.push({path: '(values)', message: `the merged values are ${size} bytes; at most ${max} bytes (${max / 1024} KiB) are accepted`})
  }
  issues.push(...validateAgainstSchema(spec.chart, effective))
  return {effective, issues}
}

export function ownedKeyIssues(owned: readonly OwnedKey[], user: Values): Issue[] {
  const issues: Issue[] = []
  const reportedPrefixes = new Set<string>()
  for (const key of owned) {
    if (hasPath(user, key.path)) {
      issues.push({path: formatPath(key.path), message: `is owned by ichor and cannot be set: ${key.reason}`})
      continue
    }
    // A scalar, list or null on the way replaces the map holding the owned key.
    for (let i = 1; i < key.path.length; i++) {
      const prefix = key.path.slice(0, i)
      if (hasPath(user, prefix) && !isMap(getPath(user, prefix))) {
        const shown = formatPath(prefix)
        if (!reportedPrefixes.has(shown)) {
          reportedPrefixes.add(shown)
          issues.push({path: shown, message: `must be a map: it holds ichor-owned keys (${formatPath(key.path)}: ${key.reason})`})
        }
        break
      }
    }
  }
  return issues
}

function unknownKeyIssues(node: KeyNode, user: unknown, path: string[], ownedPaths: string[]): Issue[] {
  if (!isMap(user) || node.freeForm) return []
  const issues: Issue[] = []
  for (const [key, value] of Object.entries(user)) {
    const here = [...path, key]
    if (ownedPaths.includes(formatPath(here))) continue
    const known = node.children.get(key)
    if (!known) {
      const suggestions = suggestKeys(node, key)
      const hint = suggestions.length > 0 ? `; did you mean ${suggestions.map((s) => formatPath([...path, s])).join(' or ')}?` : ''
      const where = path.length === 0 ? 'the chart' : formatPath(path)
      issues.push({path: formatPath(here), message: `is not a key ${where} knows (not in its values.yaml, its documented options or its templates)${hint}`})
      continue
    }
    // A default that is a scalar or list with no known children: the schema judges the type.
    if (known.leaf && known.children.size === 0) continue
    issues.push(...unknownKeyIssues(known, value, here, ownedPaths))
  }
  return issues
}
