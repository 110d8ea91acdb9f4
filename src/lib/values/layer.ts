// What the operator asked for in a `values set|diff|edit` of any component, and the new user
// layer it makes from the stored one. Shared by `cni values` and `stack values`.
import {readValuesFile} from './input.js'
import {deepMerge} from './merge.js'
import type {Values} from './path.js'
import {applySetFlags, type SetInput} from './set-flags.js'

export type ValuesInput =
  | {kind: 'edit'; files: string[]; sets: SetInput[]; replace: boolean}
  /** The files and flags of an `edit`, read once (readValuesInput): what later steps merge. */
  | {kind: 'given'; given: Values; replace: boolean}
  /** A whole user layer (the edited buffer); `base` is the layer the editor started from. */
  | {kind: 'layer'; user: Values; base?: Values}

/** A values input whose files were read (no `edit`). */
export type ReadValuesInput = Exclude<ValuesInput, {kind: 'edit'}>

/** Reads the files and applies the flags now, as helm makes its values: an `edit` becomes `given`, read once. */
export function readValuesInput(input: ValuesInput): ReadValuesInput {
  if (input.kind !== 'edit') return input
  let files: Values = {}
  for (const f of input.files) files = deepMerge(files, readValuesFile(f))
  return {kind: 'given', given: applySetFlags(files, input.sets), replace: input.replace}
}

/** The values the operator gave: the read files and flags, or the whole layer. */
export function givenValues(input: ReadValuesInput): Values {
  return input.kind === 'given' ? input.given : input.user
}

export function newUserLayer(current: Values, input: ValuesInput): Values {
  const read = readValuesInput(input)
  if (read.kind === 'layer') return structuredClone(read.user)
  // Merged onto the stored layer as `helm upgrade --reuse-values` merges onto the release's values.
  return read.replace ? structuredClone(read.given) : deepMerge(structuredClone(current), read.given)
}
