// The user layer from -f files and the --set flags, in helm's order: the files merged in the
// order given, then the flags applied onto them (sets, as valuesInputFrom orders them).
import {applySetFlags, type SetInput} from '../values/set-flags.js'
import {readValuesFile} from '../values/input.js'
import {deepMerge} from '../values/merge.js'
import type {Values} from '../values/path.js'

export function loadUserValues(files: readonly string[] = [], sets: readonly SetInput[] = []): Values {
  let user: Values = {}
  for (const file of files) user = deepMerge(user, readValuesFile(file))
  return applySetFlags(user, sets)
}
