// Sets up the Talos node SIMULATOR (talosctl-simulator.mjs) for a test: a temp state dir
// with the declared nodes, a temp bin dir where `talosctl` is a symlink to the simulator,
// and the environment the product's wrapper reads (ICHOR_TALOSCTL) and the simulator
// reads (TALOS_SIM_*). cleanup() stops the nodes' background manifest runs, restores the
// environment and removes the temp dirs.
import {cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync} from 'node:fs'
import {setTimeout as sleep} from 'node:timers/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'
import {execa} from 'execa'
import {realTalosctlPath} from '../harness/talosctl.js'

export const SIMULATOR = fileURLToPath(new URL('./talosctl-simulator.mjs', import.meta.url))

export interface SimNode {
  /** A loopback address (127.0.0.x): the simulator never connects to it. */
  ip: string
  role: 'controlplane' | 'worker'
  /** The Talos version the node runs, e.g. v1.13.0. */
  talosVersion: string
  /** What `talosctl get disks` lists: device paths, or Disk specs (the simulator's default: /dev/sda and /dev/nvme0n1). */
  disks?: (string | {dev_path: string; [field: string]: unknown})[]
}

export interface SimulatedNodes {
  stateDir: string
  /** The `talosctl` symlink to the simulator. */
  talosctl: string
  /** A scratch dir for the test's files (configs, talosconfig, kubeconfig). */
  workDir: string
  /** Runs the simulator as talosctl; never throws. */
  run(args: string[]): Promise<{exitCode: number; stdout: string; stderr: string}>
  /** Resolves once no node has a manifest run going (they end on their own timer, TALOS_SIM_MANIFEST_RUN_MS). */
  manifestRunsDone(timeoutMs?: number): Promise<void>
  /**
   * For a failed run's message: each node's config version beside its ManifestStatus, the run in
   * flight, who holds its controller loop and the manifest mutex (alive or not), and the runners' logs.
   */
  describeManifestRuns(): string
  cleanup(): void
  /** Once no manifest run is going: copies the nodes' state to `dir` (for `restoreFrom`), then cleans up. */
  save(dir: string): Promise<void>
  /**
   * Every machine lost its disk (a total loss): once no manifest run is going, each declared
   * machine is a new one in maintenance mode, and nothing was ever bootstrapped.
   */
  loseAll(): Promise<void>
}

const ENV_KEYS = [
  'ICHOR_TALOSCTL',
  'TALOS_SIM_STATE',
  'TALOS_SIM_KUBECONFIG',
  'TALOS_SIM_REAL_TALOSCTL',
  'TALOS_SIM_ETCD_ENDPOINT',
  'TALOS_SIM_ETCDUTL',
] as const

/**
 * `restoreFrom`: a folder `save()` wrote. The nodes are the ones it holds, with their configs, modes
 * and manifest statuses (the folder itself is never changed).
 */
export function startSimulatedNodes(
  nodes: SimNode[],
  opts: {kubeconfigPath?: string; restoreFrom?: string; etcd?: {endpoint: string; etcdutl: string}} = {},
): SimulatedNodes {
  const root = mkdtempSync(join(tmpdir(), 'ichor-talos-sim-'))
  const stateDir = join(root, 'state')
  const binDir = join(root, 'bin')
  const workDir = join(root, 'work')
  for (const dir of [stateDir, binDir, workDir]) mkdirSync(dir, {recursive: true})
  if (opts.restoreFrom) cpSync(opts.restoreFrom, stateDir, {recursive: true})
  else writeFileSync(join(stateDir, 'nodes.json'), JSON.stringify(nodes, null, 2))
  const talosctl = join(binDir, 'talosctl')
  symlinkSync(SIMULATOR, talosctl)

  const saved = Object.fromEntries(ENV_KEYS.map((k) => [k, process.env[k]]))
  process.env.ICHOR_TALOSCTL = talosctl
  process.env.TALOS_SIM_STATE = stateDir
  if (opts.kubeconfigPath) process.env.TALOS_SIM_KUBECONFIG = opts.kubeconfigPath
  else delete process.env.TALOS_SIM_KUBECONFIG
  // The real etcd behind the control plane, for `etcd snapshot` and `bootstrap --recover-from`.
  if (opts.etcd) Object.assign(process.env, {TALOS_SIM_ETCD_ENDPOINT: opts.etcd.endpoint, TALOS_SIM_ETCDUTL: opts.etcd.etcdutl})
  else for (const k of ['TALOS_SIM_ETCD_ENDPOINT', 'TALOS_SIM_ETCDUTL'] as const) delete process.env[k]
  // gen/validate always go to the real talosctl (built from Go modules), never a stand-in.
  process.env.TALOS_SIM_REAL_TALOSCTL = realTalosctlPath()

  const self: SimulatedNodes = {
    stateDir,
    talosctl,
    workDir,
    async run(args) {
      const r = await execa(talosctl, args, {reject: false, timeout: 60_000})
      return {exitCode: r.exitCode ?? -1, stdout: r.stdout, stderr: r.stderr}
    },
    async manifestRunsDone(timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs
      while (liveManifestRunners(stateDir, {runnersOnly: false}).length > 0) {
        if (Date.now() > deadline) throw new Error(`simulated Talos manifest runs still going after ${timeoutMs} ms (${stateDir})`)
        await sleep(50)
      }
    },
    describeManifestRuns() {
      return describeManifestRuns(stateDir)
    },
    cleanup() {
      // The runners are detached (they outlive the talosctl call that started them), never the test.
      for (const pid of liveManifestRunners(stateDir)) {
        try {
          process.kill(pid, 'SIGKILL')
        } catch {
          // already gone
        }
      }
      for (const k of ENV_KEYS) {
        if (saved[k] === undefined) delete process.env[k]
        else process.env[k] = saved[k]
      }
      rmSync(root, {recursive: true, force: true})
    },
    async loseAll() {
      await self.manifestRunsDone()
      for (const file of readdirSync(stateDir)) if (file !== 'nodes.json') rmSync(join(stateDir, file), {recursive: true, force: true})
    },
    async save(dir) {
      await self.manifestRunsDone()
      // A finished run's pid file names a process that is gone: it means nothing in a copy.
      cpSync(stateDir, dir, {recursive: true, filter: (src) => !/manifest-runner-.*\.pid$/.test(src)})
      self.cleanup()
    },
  }
  return self
}

/**
 * Pids held in the nodes' manifest-runner pid files whose process still runs: with
 * `runnersOnly`, only runners of this state dir (a runner names it in its arguments), so a pid
 * file left behind never makes cleanup() signal another process; without it also the talosctl
 * call that is about to start one.
 */
function liveManifestRunners(stateDir: string, opts: {runnersOnly?: boolean} = {runnersOnly: true}): number[] {
  if (!existsSync(stateDir)) return []
  const pids: number[] = []
  for (const file of readdirSync(stateDir).filter((f) => /^manifest-runner-.*\.pid$/.test(f))) {
    let pid: number
    let args: string[]
    try {
      pid = Number(readFileSync(join(stateDir, file), 'utf8').trim())
      args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')
    } catch {
      continue // the run ended meanwhile, or a pid file left by a process that is gone
    }
    const runner = args.includes('__manifest-runner') && args.includes(stateDir)
    if (runner || (!opts.runnersOnly && args.some((a) => a.includes('talosctl')))) pids.push(pid)
  }
  return pids
}

function describeManifestRuns(stateDir: string): string {
  const read = (file: string): string | undefined => {
    try {
      return readFileSync(join(stateDir, file), 'utf8').trim()
    } catch {
      return undefined
    }
  }
  const holder = (file: string) => {
    const pid = read(file)
    if (pid === undefined) return 'none'
    let cmd: string
    try {
      cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').slice(1, 4).join(' ')
    } catch {
      return `${pid} (gone)`
    }
    return `${pid} (alive: ${cmd})`
  }
  let declared: SimNode[] = []
  try {
    declared = JSON.parse(read('nodes.json') ?? '[]') as SimNode[]
  } catch {
    // a lost state dir says so below
  }
  const lines = [`simulated Talos manifest runs at ${new Date().toISOString()} (${stateDir}); mutex held by ${holder('manifest-apply.mutex')}`]
  for (const {ip, role} of declared) {
    const node = JSON.parse(read(`node-${ip}.json`) ?? '{}') as {mode?: string; configVersion?: number; rebootUntil?: number}
    const status = read(`manifeststatus-${ip}.json`)?.replace(/\s+/g, ' ')
    const run = read(`manifest-run-${ip}.json`)
    const due = run ? (JSON.parse(run) as {dueAt: number; configVersion: number}) : undefined
    lines.push(
      `  ${ip} ${role} ${node.mode ?? 'unknown'} config v${node.configVersion ?? '?'}${node.rebootUntil ? ` rebootUntil ${new Date(node.rebootUntil).toISOString()}` : ''}; status ${status ?? 'none'}; ` +
        `run in flight ${due ? `for config v${due.configVersion}, due ${new Date(due.dueAt).toISOString()}` : 'none'}; loop ${holder(`manifest-runner-${ip}.pid`)}`,
    )
    const log = read(`manifest-runner-${ip}.log`)
    if (log)
      lines.push(
        ...log
          .split('\n')
          .slice(-6)
          .map((l) => `    runner log: ${l}`),
      )
  }
  return lines.join('\n')
}

/** A new machine booted from Talos media into maintenance mode beside the declared ones (node replace's NEW). */
export function declareMachine(nodes: Pick<SimulatedNodes, 'stateDir'>, node: SimNode): void {
  const path = join(nodes.stateDir, 'nodes.json')
  const declared = JSON.parse(readFileSync(path, 'utf8')) as SimNode[]
  writeFileSync(path, JSON.stringify([...declared.filter((n) => n.ip !== node.ip), node], null, 2))
}
