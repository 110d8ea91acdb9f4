// The user layer from -f files and --set flags, merged in the order given (like helm).
import {applySetFlags} from '../values/set-flags.js'
import {readValuesFile} from '../values/input.js'
import {deepMerge} from '../values/merge.js'
import type {Values} from '../values/path.js'

export function loadUserValues(files: readonly string[] = [], sets: readonly string[] = []): Values {
  let user: Values = {}
  for (const file of files) user = deepMerge(user, readValuesFile(file))
  return applySetFlags(user, sets)
}
