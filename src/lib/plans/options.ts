// What every plan that talks to a cluster takes from its command's flags.
import type {Reporter} from '../log/reporter.js'
import type {OutputMode} from '../tasks/types.js'

export interface PlanOptions {
  /** --kubeconfig: the cluster the operator named. */
  kubeconfig?: string
  /** --context of that kubeconfig. */
  context?: string
  /** Per wait, in milliseconds (--timeout). */
  timeoutMs: number
  output: OutputMode
  /** Probe only, change nothing. */
  dryRun: boolean
  stream?: NodeJS.WritableStream
  /** --break-lock: delete a Lease left by a command that is gone, then take it. */
  breakLock?: boolean
  /** Where notes, warnings and previews go (the command's; none: silent). */
  report?: Reporter
}

/** What a read plan that may reach the nodes takes from its command's flags (`talos status`, `kubeconfig`). */
export interface ReadAccessOptions {
  kubeconfig?: string
  context?: string
  talosconfig?: string
  stateDir?: string
  statePassphraseFile?: string
  json: boolean
}
