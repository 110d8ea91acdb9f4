// Whether the helm that wrote a pending release record can still be running, when it ran on
// this machine: each helm ichor starts labels its revision with a mark of the machine (and
// PID namespace) it runs in, and its command line carries ichor's timeout label. A pending
// record marked as this machine's, with no such helm among this machine's processes, was left
// by a helm that is gone: nothing needs waiting out. Any other record (another laptop, a
// machine without /proc) is waited out as its --timeout says (see pending.ts).
import {createHash} from 'node:crypto'
import {readdirSync, readFileSync, readlinkSync} from 'node:fs'

/** The release Secret label naming the machine whose helm wrote a revision. */
export const HELM_MACHINE_LABEL = 'ichor.maesh.dev/helm-machine'

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
 * A helm process on this machine working on the release: its command line names the
 * release and namespace and carries ichor's timeout label (`--labels`), as every helm
 * ichor starts does. True when /proc cannot be read (nothing is proven then).
 */
export function helmRunningHere(release: string, namespace: string, timeoutLabel: string): boolean {
  let pids: string[]
  try {
    pids = readdirSync('/proc').filter((p) => /^\d+$/.test(p))
  } catch {
    return true
  }
  for (const pid of pids) {
    let argv: string[]
    try {
      argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')
    } catch {
      continue // gone meanwhile, or not ours to read
    }
    if (!argv.some((a) => a.includes(`${timeoutLabel}=`))) continue
    const ns = argv[argv.indexOf('--namespace') + 1]
    if (argv.includes(release) && (argv.indexOf('--namespace') < 0 || ns === namespace)) return true
  }
  return false
}
