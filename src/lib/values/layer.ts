// What the operator asked for in a `values set|diff|edit` of any component, and the new user
// layer it makes from the stored one. Shared by `cni values` and `stack values`.
import {readValuesFile} from './input.js'
import {deepMerge} from './merge.js'
import type {Values} from './path.js'
import {applySetFlags, type SetInput} from './set-flags.js'

export type ValuesInput =
  | {kind: 'edit'; files: string[]; sets: SetInput[]; replace: boolean}
  /** A whole user layer (the edited buffer); `base` is the layer the editor started from. */
  | {kind: 'layer'; user: Values; base?: Values}

export function newUserLayer(current: Values, input: ValuesInput): Values {
  if (input.kind === 'layer') return structuredClone(input.user)
  let files: Values = {}
  for (const f of input.files) files = deepMerge(files, readValuesFile(f))
  const base = input.replace ? files : deepMerge(structuredClone(current), files)
  return applySetFlags(base, input.sets)
}
