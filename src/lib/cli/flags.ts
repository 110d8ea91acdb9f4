// Flags every command shares, named and shaped as kubectl and helm users expect them.
import {Args, Flags} from '@oclif/core'
import {EXIT} from '../errors/exit-codes.js'
import {IchorError} from '../errors/errors.js'
import {DEFAULT_REQUEST_TIMEOUT_MS} from '../kube/request-settings.js'

/**
 * For every command that talks to a cluster. KUBECONFIG (colon list, first wins) is the kube
 * loader's job; the base command hands --request-timeout to the clients (kube/request-settings.ts).
 */
export const kubeFlags = {
  kubeconfig: Flags.string({
    description: 'kubeconfig file to use (default: KUBECONFIG, a colon-separated list merged first-wins, then ~/.kube/config)',
    helpValue: 'FILE',
  }),
  context: Flags.string({description: 'kubeconfig context to use instead of its current-context', helpValue: 'NAME'}),
  'request-timeout': Flags.custom<number>({
    description:
      "how long each request to the cluster (and to Kokumi's registry) may take before giving up, as kubectl's --request-timeout: e.g. 30s, 1m, or plain seconds; 0 waits forever",
    helpValue: 'DURATION',
    default: DEFAULT_REQUEST_TIMEOUT_MS,
    defaultHelp: async () => formatSeconds(DEFAULT_REQUEST_TIMEOUT_MS / 1000),
    parse: async (input) => parseRequestTimeout(input),
  })(),
}

/** For every command that reaches Kokumi's registry. */
export const registryEndpointFlag = {
  'registry-endpoint': Flags.string({
    description: "reach Kokumi's registry at this URL instead of a port-forward (e.g. http://127.0.0.1:5000)",
    helpValue: 'URL',
  }),
}

/** For every command that takes the ichor-system Lease. */
export const lockFlags = {
  'break-lock': Flags.boolean({description: 'delete the ichor-system Lease left by a command that is no longer running, then take it'}),
}

/** For every command that changes a cluster: the one confirmation rule (plans/consent.ts). */
export const yesFlag = {
  yes: Flags.boolean({char: 'y', description: 'do not ask for confirmation (required without a terminal and with --json)'}),
}

/** For commands that read the Talos control planes after init (the hand-over state). */
export const talosAccessFlags = {
  talosconfig: Flags.string({description: 'talosconfig for the control planes (default: the state directory of init)', helpValue: 'FILE'}),
  'state-dir': Flags.string({description: "init's local state directory (default: $XDG_STATE_HOME/ichor/<cluster>)", helpValue: 'DIR'}),
}

/**
 * For every command that reads or writes the Talos admin bundle ichor keeps in the cluster
 * (encrypted with age). Never the passphrase itself on argv: a file, or the named env var.
 */
export const statePassphraseFlags = {
  'state-passphrase-file': Flags.string({
    description:
      'file (0600) with the passphrase or age identity (AGE-SECRET-KEY-1…) the Talos admin bundle in the cluster is encrypted with (default: ICHOR_STATE_PASSPHRASE_FILE, else asked on a terminal)',
    helpValue: 'FILE',
  }),
}

/** node remove and node replace: the machine that goes is gone (a dead disk), nothing goes through it. */
export const unreachableFlag = {
  unreachable: Flags.boolean({
    description:
      'the machine is gone (a dead disk, a pulled plug): remove its etcd member through a control plane that stays and delete its Node, without a drain or a reset through it',
    default: false,
  }),
}

const DURATION_FORMS = 'a Go/helm duration such as 90s, 15m, 1h or 1h30m, or plain seconds'
const UNIT_MS: Record<string, number> = {ms: 1, s: 1000, m: 60_000, h: 3_600_000}

/**
 * A helm/Go duration (`90s`, `15m`, `1h30m`, `500ms`) or plain seconds (`900`), in
 * milliseconds. Throws an exit-2 error naming `flag` and the accepted forms.
 */
export function parseDuration(input: string, flag = '--timeout'): number {
  const text = input.trim()
  const bad = (why: string) => new IchorError(`${flag}: "${input}" ${why} (accepted: ${DURATION_FORMS})`, {exitCode: EXIT.usage})
  let ms: number
  if (/^\d+(\.\d+)?$/.test(text)) {
    ms = Number(text) * 1000
  } else {
    const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(ms|h|m|s)/g)]
    if (parts.length === 0 || parts.map((p) => p[0]).join('') !== text) throw bad('is not a duration')
    ms = parts.reduce((sum, p) => sum + Number(p[1]) * UNIT_MS[p[2]!]!, 0)
  }
  if (!(ms > 0) || !Number.isFinite(ms)) throw bad('must be longer than zero')
  return Math.round(ms)
}

/**
 * `--request-timeout`: a duration or plain seconds as `parseDuration`, and `0` (any unit) for
 * no timeout, as kubectl (k8s.io/client-go v0.36 tools/clientcmd/helpers.go, ParseTimeout).
 */
export function parseRequestTimeout(input: string): number {
  if (/^\s*0+(\.0+)?(ms|s|m|h)?\s*$/.test(input)) return 0
  try {
    return parseDuration(input, '--request-timeout')
  } catch (error) {
    if (error instanceof IchorError) error.message = error.message.replace(/\)$/, '; 0 for no timeout)')
    throw error
  }
}

/** `--timeout DURATION`, parsed to milliseconds. */
export function timeoutFlag(defaultSeconds: number, description = 'how long to wait for each readiness step') {
  return Flags.custom<number>({
    description: `${description} (e.g. 90s, 15m, 1h; plain seconds accepted)`,
    helpValue: 'DURATION',
    default: defaultSeconds * 1000,
    defaultHelp: async () => formatSeconds(defaultSeconds),
    parse: async (input) => parseDuration(input, '--timeout'),
  })()
}

function formatSeconds(seconds: number): string {
  const h = Math.floor(seconds / 3600)
  const m = Math.floor((seconds % 3600) / 60)
  const s = seconds % 60
  return `${h ? `${h}h` : ''}${m ? `${m}m` : ''}${s || (!h && !m) ? `${s}s` : ''}`
}

export const OUTPUT_FORMATS = ['yaml', 'json'] as const
export type OutputFormat = (typeof OUTPUT_FORMATS)[number]

/** `-o/--output yaml|json` on read commands, as in kubectl; a human table when omitted. */
export const outputFormatFlag = {
  output: Flags.string({char: 'o', description: 'print the result as yaml or json instead of a table', options: [...OUTPUT_FORMATS]}),
}

/** On every command (the base class adds them): -v/--verbose and --debug. */
export const verbosityFlags = {
  verbose: Flags.boolean({char: 'v', description: "show each probe's detail and every external command run (secrets redacted)", helpGroup: 'GLOBAL'}),
  debug: Flags.boolean({description: 'like --verbose, and print stack traces of errors', helpGroup: 'GLOBAL'}),
}

/**
 * Every command that changes a cluster: where (kubeFlags), how long, the Lease, --yes and, where
 * the command can preview, --dry-run in its own words. planOptions (bind.ts) reads them back.
 */
export function planFlags(o: {timeout: number; timeoutDescription?: string; dryRun?: string}) {
  return {
    ...kubeFlags,
    timeout: timeoutFlag(o.timeout, o.timeoutDescription),
    ...lockFlags,
    ...(o.dryRun === undefined ? {} : {'dry-run': Flags.boolean({description: o.dryRun})}),
    ...yesFlag,
  }
}

/** The stack component a command acts on (`stack values …`, `stack promote`). */
export const stackComponentArgs = {component: Args.string({description: 'the stack component', options: ['argocd', 'kokumi'], required: true})}
