// The one values syntax of every values command (`cni values validate|set|diff|edit`,
// `stack values set|diff|edit`), as helm has it: repeatable -f FILE ("-" for stdin) and
// repeatable --set KEY=VALUE, plus positional KEY=VALUE as a shorthand, and helm's siblings of
// --set: --set-json, --set-string, --set-file and --set-literal. Applied in helm's order
// (pkg/cli/values/options.go, Options.MergeValues, v3.18 and v4): files, --set-json, --set (the
// positional ones after the flags), --set-string, --set-file, --set-literal. Checked before
// anything runs.
import {Flags} from '@oclif/core'
import type {ValuesInput} from '../values/layer.js'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import {checkSetFlag, type SetFlag, type SetFlagName} from '../values/set-flags.js'

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
  'set-string': Flags.string({
    description: 'like --set, but every value stays a string (no true/false/null/number typing); applied after --set; may repeat',
    helpValue: 'KEY=VALUE',
    multiple: true,
    multipleNonGreedy: true,
  }),
  'set-json': Flags.string({
    description: `set a JSON value at a key (a.b=[1,2], tolerations=[{"operator":"Exists"}]) or merge a JSON object ({"a":{"b":1}}); applied before --set; may repeat`,
    helpValue: 'KEY=JSON',
    multiple: true,
    multipleNonGreedy: true,
  }),
  'set-file': Flags.string({
    description: 'set a key to the content of a file, as a string ("-" for stdin); applied after --set-string; may repeat',
    helpValue: 'KEY=FILE',
    multiple: true,
    multipleNonGreedy: true,
  }),
  'set-literal': Flags.string({
    description: 'set a key to the rest of the text as one string, commas, braces and backslashes kept; applied last; may repeat',
    helpValue: 'KEY=VALUE',
    multiple: true,
    multipleNonGreedy: true,
  }),
}

/**
 * `ichor init`'s values of the chart it installs, Cilium, as helm install takes them: -f and the
 * --set family. `--cilium-values`, init's flag before it took them, stays as an alias of -f.
 */
export const initCiliumValuesFlags = {
  ...valuesFlags,
  values: Flags.string({
    char: 'f',
    aliases: ['cilium-values'],
    description: 'YAML file with Cilium values, the user layer ("-" for stdin); may repeat, later files win (also --cilium-values)',
    helpValue: 'FILE',
    multiple: true,
    multipleNonGreedy: true,
  }),
}

/** The Cilium values init was given (-f, --set…), or nothing when none was. */
export function initValuesInputFrom(flags: ValuesFlags): ValuesInput | undefined {
  const input = valuesInputFrom([], flags)
  return input.kind === 'edit' && input.files.length === 0 && input.sets.length === 0 ? undefined : input
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

type SetFlagValues = {[name in SetFlagName]?: string[]}

/** The parsed values flags (valuesFlags, valuesChangeFlags). */
export type ValuesFlags = SetFlagValues & {values?: string[]; replace?: boolean}

export function valuesInputFrom(argv: unknown[], flags: ValuesFlags): ValuesInput {
  const positional = argv.map(String)
  for (const s of positional) {
    if (!s.includes('='))
      throw new IchorError(`argument "${s}": expected KEY=VALUE in helm's --set syntax (e.g. hubble.relay.enabled=true)`, {exitCode: EXIT.usage})
  }
  const sets: SetFlag[] = [
    ...(flags['set-json'] ?? []).map((text) => ({flag: 'set-json' as const, text})),
    ...[...(flags.set ?? []), ...positional].map((text) => ({flag: 'set' as const, text})),
    ...(flags['set-string'] ?? []).map((text) => ({flag: 'set-string' as const, text})),
    ...(flags['set-file'] ?? []).map((text) => ({flag: 'set-file' as const, text})),
    ...(flags['set-literal'] ?? []).map((text) => ({flag: 'set-literal' as const, text})),
  ]
  for (const s of sets) checkSetFlag(s)
  return {kind: 'edit', files: flags.values ?? [], sets, replace: flags.replace ?? false}
}
