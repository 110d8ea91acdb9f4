// Helm-style deep merge: maps merge key by key, anything else (lists, scalars, null)
// replaces. A null from the overlay is kept, so helm removes that chart default.
// A key such as __proto__ in the overlay would set the merged object's prototype: refused.
import {IchorError} from '../errors/errors.js'
import {formatPath, isMap, type Values, FORBIDDEN_KEYS, forbiddenKeyMessage} from './path.js'
import {EXIT} from '../errors/exit-codes.js'

export function deepMerge(base: Values, overlay: Values, at: string[] = []): Values {
  const out: Values = {...base}
  for (const [key, value] of Object.entries(overlay)) {
    if (FORBIDDEN_KEYS.has(key)) throw new IchorError(`values ${formatPath([...at, key])}: ${forbiddenKeyMessage(key)}`, {exitCode: EXIT.usage})
    const prev = Object.prototype.hasOwnProperty.call(out, key) ? out[key] : undefined
    out[key] = isMap(prev) && isMap(value) ? deepMerge(prev, value, [...at, key]) : cloneValue(value)
  }
  return out
}

/**
 * The merge order, alone: ichor defaults ⟶ user values ⟶ ichor-owned values. Here, not in
 * engine.ts, so commands that only compute effective values do not load the schema validator.
 */
export function layeredValues(spec: {defaults: Values; owned: Values}, user: Values): Values {
  return deepMerge(deepMerge(spec.defaults, user), spec.owned)
}

function cloneValue<T>(value: T): T {
  return value === undefined ? value : (structuredClone(value) as T)
}
