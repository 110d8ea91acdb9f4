// Flags of the `ichor stack` commands, with the names and meaning of the shared flags being
// added to src/lib/cli/flags.ts (--kubeconfig/--context, -o yaml|json, --timeout 90s|15m|1h),
// so they can be swapped for those once merged.
import {Flags} from '@oclif/core'

export const kubeFlags = {
  kubeconfig: Flags.string({description: 'kubeconfig of the cluster (default: $KUBECONFIG or ~/.kube/config)', helpValue: 'FILE'}),
  context: Flags.string({description: 'kubeconfig context to use instead of its current-context', helpValue: 'NAME'}),
}

export const outputFormatFlag = {
  output: Flags.string({char: 'o', description: 'print the result as yaml or json', options: ['yaml', 'json']}),
}

export const registryEndpointFlag = {
  'registry-endpoint': Flags.string({description: "reach Kokumi's registry at this URL instead of a port-forward (e.g. http://127.0.0.1:5000)", helpValue: 'URL'}),
}

/** `90s`, `15m`, `1h` or plain seconds. */
export const timeoutFlag = {
  timeout: Flags.custom<number>({
    description: 'how long to wait for each readiness step (90s, 15m, 1h)',
    helpValue: 'DURATION',
    default: 900_000,
    async parse(input) {
      const m = /^(\d+)(s|m|h)?$/.exec(input.trim())
      if (!m || Number(m[1]) === 0) throw new Error(`--timeout ${JSON.stringify(input)}: expected a positive duration such as 90s, 15m or 1h`)
      return Number(m[1]) * {s: 1000, m: 60_000, h: 3_600_000}[(m[2] ?? 's') as 's' | 'm' | 'h']
    },
  })(),
}

export const lockFlags = {
  'break-lock': Flags.boolean({description: 'delete the ichor-system Lease left by a command that is no longer running, then take it'}),
}
