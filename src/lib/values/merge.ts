// Helm-style deep merge: maps merge key by key, anything else (lists, scalars, null)
// replaces. A null from the overlay is kept, so helm removes that chart default.
import {isMap, type Values} from './path.js'

export function deepMerge(base: Values, overlay: Values): Values {
  const out: Values = {...base}
  for (const [key, value] of Object.entries(overlay)) {
    const prev = out[key]
    out[key] = isMap(prev) && isMap(value) ? deepMerge(prev, value) : cloneValue(value)
  }
  return out
}

export function cloneValue<T>(value: T): T {
  return value === undefined ? value : (structuredClone(value) as T)
}
