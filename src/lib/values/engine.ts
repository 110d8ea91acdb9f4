// The layered values engine shared by every chart ichor renders:
// effective = ichor defaults ⟶ user values (deep merge) ⟶ ichor-owned keys.
// All problems are collected and reported together, each naming its path.
import type {ChartArchive} from '../chart/archive.js'
import type {Issue} from '../errors/errors.js'
import {knownKeys, suggestKeys, type KeyNode} from './known-keys.js'
import {layeredValues} from './merge.js'

import {isDeepStrictEqual} from 'node:util'
import {formatPath, hasPath, getPath, isMap, type Path, type Values} from './path.js'
import {validateAgainstSchema} from './schema.js'

export interface OwnedKey {
  path: Path
  /** Why ichor owns it and where the user changes it instead. */
  reason: string
  /**
   * Its value depends on the cluster (the kube-proxy mode, the chart, the first minor): a check
   * without the cluster cannot tell whether a user's value agrees, and leaves it to the full one.
   */
  dependsOnCluster?: boolean
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
  /** The user's values without the owned keys that agree with ichor's: what is stored. */
  user: Values
  /** One per owned key the user set to exactly ichor's value: accepted, and said. */
  notes: string[]
}

const DEFAULT_MAX_VALUES_BYTES = 64 * 1024

export function checkLayeredValues(spec: LayeredValuesSpec, given: Values): LayeredValuesResult {
  const issues: Issue[] = []
  const owned = checkOwnedKeys(spec.ownedKeys, given, spec.owned)
  issues.push(...owned.issues)
  const user = owned.user
  const ownedPaths = spec.ownedKeys.map((k) => formatPath(k.path))
  issues.push(...unknownKeyIssues(knownKeys(spec.chart), user, [], ownedPaths))
  const effective = layeredValues(spec, user)
  const max = spec.maxBytes ?? DEFAULT_MAX_VALUES_BYTES
  const size = Buffer.byteLength(JSON.stringify(effective))
  if (size > max) {
    issues.push({path: '(values)', message: `the merged values are ${size} bytes; at most ${max} bytes (${max / 1024} KiB) are accepted`})
  }
  issues.push(...validateAgainstSchema(spec.chart, effective))
  return {effective, issues, user, notes: owned.notes}
}

export interface OwnedKeysCheck {
  issues: Issue[]
  /** The given values without the owned keys that agree. */
  user: Values
  notes: string[]
}

/**
 * The owned keys among a user's values. One set to exactly the value ichor sets (the values file
 * of Talos's Cilium guide sets eight of them) is accepted with a note and left out of what is
 * stored, so a later change of ichor's value (a kube-proxy switch) never finds it disagreeing; any
 * other value is refused, named. `ownedValues` absent (a check before the cluster is read): only
 * keys that do not depend on the cluster are judged, against `constants`.
 */
export function checkOwnedKeys(owned: readonly OwnedKey[], user: Values, ownedValues?: Values, constants: Values = {}): OwnedKeysCheck {
  const issues: Issue[] = []
  const notes: string[] = []
  let kept = user
  const reportedPrefixes = new Set<string>()
  for (const key of owned) {
    if (hasPath(user, key.path)) {
      if (ownedValues === undefined && key.dependsOnCluster) continue
      const ichors = ownedValues ?? constants
      if (hasPath(ichors, key.path) && isDeepStrictEqual(getPath(user, key.path), getPath(ichors, key.path))) {
        notes.push(
          `${formatPath(key.path)}: ${JSON.stringify(getPath(ichors, key.path))} is the value ichor sets itself; accepted, not stored (it can be left out)`,
        )
        kept = withoutPath(kept, key.path)
        continue
      }
      const shown = hasPath(ichors, key.path) ? ` (ichor sets ${JSON.stringify(getPath(ichors, key.path))})` : ''
      issues.push({path: formatPath(key.path), message: `is owned by ichor and cannot be set${shown}: ${key.reason}`})
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
  return {issues, user: kept, notes}
}

/**
 * The values without any owned key: what is stored once they validated (an owned key left in them
 * then can only hold ichor's own value), and what a stored layer is compared with.
 */
export function withoutOwnedKeys(owned: readonly OwnedKey[], values: Values): Values {
  return owned.reduce((v, key) => withoutPath(v, key.path), values)
}

/** A copy of `values` without `path`, and without the maps that held only it. */
function withoutPath(values: Values, path: Path): Values {
  const [head, ...rest] = path
  if (head === undefined || !isMap(values) || !(head in values)) return values
  const copy: Values = {...values}
  if (rest.length === 0) delete copy[head]
  else {
    const inner = withoutPath(copy[head] as Values, rest)
    if (isMap(inner) && Object.keys(inner).length === 0) delete copy[head]
    else copy[head] = inner
  }
  return copy
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
