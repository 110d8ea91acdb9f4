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
  // What the files and flags say, made as helm makes it, then merged onto the stored layer as
  // `helm upgrade --reuse-values` merges onto the release's values.
  let files: Values = {}
  for (const f of input.files) files = deepMerge(files, readValuesFile(f))
  const given = applySetFlags(files, input.sets)
  return input.replace ? given : deepMerge(structuredClone(current), given)
}
