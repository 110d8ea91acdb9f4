// Whether the helm that wrote a pending release record can still be running, when it ran on
// this machine: each helm ichor starts labels its revision with a mark of the machine (and
// PID namespace) it runs in and a token of its own, which is also on its command line. A
// pending record marked as this machine's, with no process carrying its token, was left by
// a helm that is gone: nothing needs waiting out. Any other record (another laptop, a
// machine without /proc) is waited out as its --timeout says (see pending.ts).
//
// The token, not the release's name, identifies the process: helm copies a revision's labels
// to the next (pkg/action/upgrade.go, mergeCustomLabels(lastRelease.Labels, ...)), so an
// operator's plain `helm upgrade` carries ichor's labels too, and a helm of another cluster
// may work on a release of the same name. pending.ts tells copied labels from fresh ones.
import {createHash, randomBytes} from 'node:crypto'
import {readdirSync, readFileSync, readlinkSync} from 'node:fs'

/** The release Secret label naming the machine whose helm wrote a revision. */
export const HELM_MACHINE_LABEL = 'ichor.maesh.dev/helm-machine'

/** The release Secret label carrying the token of the one helm process ichor started to write it. */
export const HELM_RUN_LABEL = 'ichor.maesh.dev/helm-run'

/** A token for one helm process, new for each. */
export function newRunToken(): string {
  return randomBytes(8).toString('hex')
}

let mark: string | undefined | null = null

/**
 * This machine's mark: a hash of the kernel's boot id and this process's PID namespace, so
 * a reboot or another container is another machine. Undefined where /proc does not say.
 */
export function machineMark(): string | undefined {
  if (mark !== null) return mark
  try {
    const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()
    const pidNamespace = readlinkSync('/proc/self/ns/pid')
    mark = createHash('sha256').update(`${boot}\n${pidNamespace}`).digest('hex').slice(0, 16)
  } catch {
    mark = undefined
  }
  return mark
}

/**
 * A process on this machine started with the token in its `--labels` (the helm ichor started
 * to write the record carrying it). True when /proc cannot be read (nothing is proven then).
 */
export function helmRunningHere(token: string): boolean {
  let pids: string[]
  try {
    pids = readdirSync('/proc').filter((p) => /^\d+$/.test(p))
  } catch {
    return true
  }
  const label = `${HELM_RUN_LABEL}=${token}`
  for (const pid of pids) {
    let argv: string[]
    try {
      argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')
    } catch {
      continue // gone meanwhile, or not ours to read
    }
    if (argv.some((arg, i) => argv[i - 1] === '--labels' && arg.split(',').includes(label))) return true
  }
  return false
}
