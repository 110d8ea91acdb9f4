// `k=v …` arguments and -f files of `cni values set|diff` and `stack values diff`, checked before anything runs.
import {Flags} from '@oclif/core'
import type {ValuesInput} from '../values/layer.js'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import {parseSetFlag} from '../values/set-flags.js'

export const valuesChangeFlags = {
  values: Flags.string({char: 'f', description: 'YAML file with values ("-" for stdin); merged onto the stored user layer unless --replace', helpValue: 'FILE', multiple: true}),
  replace: Flags.boolean({description: 'the files and KEY=VALUE arguments replace the stored user layer instead of being merged onto it'}),
}

export function valuesInputFrom(argv: unknown[], flags: {values?: string[]; replace?: boolean}): ValuesInput {
  const sets = argv.map(String)
  for (const s of sets) {
    if (!s.includes('=')) throw new IchorError(`argument "${s}": expected KEY=VALUE in helm's --set syntax (e.g. hubble.relay.enabled=true)`, {exitCode: EXIT.usage})
    parseSetFlag(s)
  }
  return {kind: 'edit', files: flags.values ?? [], sets, replace: flags.replace ?? false}
}
