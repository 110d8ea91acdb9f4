// How long one request to the cluster (or to the registry behind it) may take, and whether
// the wait for the first answer is shown: set once per run from `--request-timeout`, `-v`
// and `--json` by the base command (src/lib/cli/base.ts), read by the Kubernetes and OCI
// clients, so no plan has to carry it. A module-level setting, not an environment variable:
// nothing leaks into the processes ichor starts.

/** kubectl's default is no timeout; ichor gives up on a silent server after 30 s. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000

export interface RequestSettings {
  /** Per request, the whole exchange (connect, headers and body); 0 = no timeout, as kubectl. */
  timeoutMs: number
  /** Show "connecting to …" while the first request waits: a line at once (-v), after a moment on a terminal, or never (--json, pipes). */
  announce: 'now' | 'terminal' | 'off'
  out: NodeJS.WritableStream
}

const settings: RequestSettings = {timeoutMs: DEFAULT_REQUEST_TIMEOUT_MS, announce: 'off', out: process.stderr}

export function configureRequests(options: Partial<RequestSettings>): void {
  Object.assign(settings, options)
}

export function requestSettings(): Readonly<RequestSettings> {
  return settings
}

/** `2.0s`: the time really waited, as the timeout message gives it. */
export function formatElapsed(ms: number): string {
  return `${(ms / 1000).toFixed(1)}s`
}

/** The error a request that ran out of time is rejected with; its message is kubectl-like. */
export class RequestTimeoutError extends Error {
  readonly elapsedMs: number
  readonly code = 'ETIMEDOUT'
  constructor(elapsedMs: number) {
    super(`request timed out after ${formatElapsed(elapsedMs)}`)
    this.name = 'RequestTimeoutError'
    this.elapsedMs = elapsedMs
  }
}

/** While the first request to `server` waits, "connecting to …" on stderr (see `announce`); returns the function that ends it. */
export function announceConnecting(server: string, context: string): () => void {
  const {announce, out} = settings
  if (announce === 'off') return () => {}
  const line = `connecting to ${server} (context ${context})…`
  if (announce === 'now') {
    out.write(`${line}\n`)
    return () => {}
  }
  // On a terminal only when the answer is slow, and wiped once it came: a fast cluster shows nothing.
  let shown = false
  const timer = setTimeout(() => {
    shown = true
    out.write(line)
  }, 500)
  timer.unref()
  return () => {
    clearTimeout(timer)
    if (shown) out.write('\r\x1b[2K')
  }
}
