// Flags of the `cni` commands. kubeFlags, timeoutFlag and outputFormatFlag have exactly the
// names and meaning of the shared ones being added in src/lib/cli/flags.ts, so they can be
// swapped for those once it lands.
import {Flags} from '@oclif/core'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'

export const kubeFlags = {
  kubeconfig: Flags.string({description: "kubeconfig of the cluster (default: KUBECONFIG or ~/.kube/config)", helpValue: 'FILE'}),
  context: Flags.string({description: 'kubeconfig context to use instead of its current-context', helpValue: 'NAME'}),
}

/** 90s, 15m, 1h, or plain seconds. */
export function parseDuration(text: string, flag = '--timeout'): number {
  const m = /^(\d+)(s|m|h)?$/.exec(text.trim())
  if (!m) throw new IchorError(`${flag} ${text}: expected a duration such as 90s, 15m or 1h`, {exitCode: EXIT.usage})
  return Number(m[1]) * {s: 1000, m: 60_000, h: 3_600_000}[(m[2] ?? 's') as 's' | 'm' | 'h']
}

export const timeoutFlag = Flags.custom<number>({
  description: 'how long to wait for each readiness step (90s, 15m, 1h)',
  helpValue: 'DURATION',
  default: async () => 15 * 60_000,
  defaultHelp: async () => '15m',
  parse: async (input) => parseDuration(input),
})()

export type OutputFormat = 'yaml' | 'json'

export const outputFormatFlag = Flags.string({char: 'o', description: 'print the result as yaml or json', options: ['yaml', 'json']})

/** Where the Talos side is reached from: the talosconfig and the local machine configs of init's state directory. */
export const talosAccessFlags = {
  talosconfig: Flags.string({description: 'talosconfig for the control planes (default: the state directory of init)', helpValue: 'FILE'}),
  'state-dir': Flags.string({description: "init's local state directory (default: $XDG_STATE_HOME/ichor/<cluster>)", helpValue: 'DIR'}),
}
