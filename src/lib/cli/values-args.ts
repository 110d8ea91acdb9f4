// The one values syntax of every values command (`cni values validate|set|diff|edit`,
// `stack values set|diff|edit`), as helm has it: repeatable -f FILE ("-" for stdin) and
// repeatable --set KEY=VALUE, plus positional KEY=VALUE as a shorthand. Applied in that order:
// files, then --set, then the positional ones (helm applies -f before --set:
// helm v3.12.3 pkg/cli/values/options.go, Options.MergeValues). Checked before anything runs.
import {Flags} from '@oclif/core'
import type {ValuesInput} from '../values/layer.js'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import {parseSetFlag} from '../values/set-flags.js'

// One value per occurrence, as helm: `-f a.yaml x=y` leaves x=y a positional KEY=VALUE.
export const valuesFlags = {
  values: Flags.string({
    char: 'f',
    description: 'YAML file with values ("-" for stdin); may repeat, later files win',
    helpValue: 'FILE',
    multiple: true,
    multipleNonGreedy: true,
  }),
  set: Flags.string({
    description: "set a value on top of the files, helm's syntax (a.b=c; a.b=null removes it); may repeat",
    helpValue: 'KEY=VALUE',
    multiple: true,
    multipleNonGreedy: true,
  }),
}

/** The commands that change a stored user layer: merge onto it, or replace it. */
export const valuesChangeFlags = {
  ...valuesFlags,
  replace: Flags.boolean({description: 'the files and values replace the stored user layer instead of being merged onto it'}),
}

/** USAGE line of a values command: the flags, then the KEY=VALUE shorthand. */
export function valuesUsage(id: string, component = false): string {
  return `${id}${component ? ' COMPONENT' : ''} [KEY=VALUE...] [-f FILE...] [--set KEY=VALUE...] [FLAGS]`
}

export const VALUES_SYNTAX_HELP =
  "Values: -f FILE and --set KEY=VALUE may repeat; positional KEY=VALUE is a shorthand for --set. Files apply first, then --set, then KEY=VALUE (helm's order)."

export function valuesInputFrom(argv: unknown[], flags: {values?: string[]; set?: string[]; replace?: boolean}): ValuesInput {
  const positional = argv.map(String)
  for (const s of positional) {
    if (!s.includes('='))
      throw new IchorError(`argument "${s}": expected KEY=VALUE in helm's --set syntax (e.g. hubble.relay.enabled=true)`, {exitCode: EXIT.usage})
  }
  const sets = [...(flags.set ?? []), ...positional]
  for (const s of sets) parseSetFlag(s)
  return {kind: 'edit', files: flags.values ?? [], sets, replace: flags.replace ?? false}
}
