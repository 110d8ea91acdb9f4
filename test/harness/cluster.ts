// A whole test "cluster" for `ichor init`: a real control plane (kube-apiserver, etcd,
// kube-controller-manager, kube-scheduler), real registry, real helm and talosctl
// (gen/validate); simulated machines: the Talos nodes (talosctl-simulator.mjs), whose kubelets
// register kwok Nodes that kwok and the pod-start simulator play; Cilium's operator registering
// its CRDs, and Kokumi/Argo CD turning Orders into Applications. The CLI runs as a subprocess,
// exactly as an operator runs it.
import {spawn, type ChildProcess} from 'node:child_process'
import {generateIdentity} from 'age-encryption'
import {realTalosctlPath} from './talosctl.js'
import {appendFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {startApiProxy} from './api-proxy.js'
import {startControlPlane, type ControlPlane} from './apiserver.js'
import {startCiliumOperatorSimulator, type CiliumOperatorSimulator} from './cilium-simulator.js'
import {kokumi017ManifestFixture, type KokumiVariant} from './fixtures.js'
import {loadKubeConfig} from './kube.js'
import {startKwok} from './kwok.js'
import {startPodStartSimulator, type PodStartSimulator} from './pod-start-simulator.js'
import {startRegistry, type RunningRegistry} from './registry.js'
import {startStackSimulator, type StackSimulator} from './stack-simulator.js'
import {startSimulatedNodes, type SimulatedNodes} from '../sim/simulated-nodes.js'
import {PROJECT_ROOT, UPSTREAM} from '../support/upstream.js'

export const CONTROL_PLANE = '127.0.0.11'
export const WORKER = '127.0.0.12'
export const TALOS_VERSION = 'v1.14.1'
/** Further node addresses for clusters with more than one control plane or worker (3+2: HA). */
const MORE_CONTROL_PLANES = ['127.0.0.21', '127.0.0.22', '127.0.0.23', '127.0.0.24']
/** Workers beyond the first: 127.0.0.31 on, enough for the node-count benchmark's 3+30. */
const MORE_WORKERS = Array.from({length: 40}, (_, i) => `127.0.0.${31 + i}`)

export interface HarnessCluster {
  cp: ControlPlane
  registry: RunningRegistry
  nodes: SimulatedNodes
  stateDir: string
  /** The node addresses, first control plane (the endpoint and the bootstrap node) first. */
  controlPlanes: string[]
  workers: string[]
  /** The Kokumi install.yaml `ichor init` installs (real 0.14.0 unless the 0.17 fixture was asked for). */
  kokumiManifest: string
  /** The pod-start simulator: tests make pods unready, crash-loop or fail their pull through it. */
  pods: PodStartSimulator
  /** The Kokumi/Argo CD simulator (stack-simulator.ts): `restart()`, `tick()`, `promote()`, its `events`. */
  stack: StackSimulator
  /**
   * The 0600 key file the Talos bundle is sealed with in the cluster (ICHOR_STATE_PASSPHRASE_FILE
   * in env): an age X25519 identity by default, a passphrase when `stateKey: 'passphrase'` was asked for.
   */
  stateKeyFile: string
  /** Environment for the CLI subprocess. */
  env: NodeJS.ProcessEnv
  /** The `ichor init` arguments for this cluster (add --json etc.). */
  initArgs: string[]
  stop(): Promise<void>
  /**
   * Stops everything and keeps what makes this cluster in `dir`, for `restoreFrom`: etcd's data
   * and the control plane's credentials, the simulated nodes' state, the registry's storage and
   * this machine's side (ichor's state folder, the key file). The simulators keep nothing of their
   * own between rounds (they read every object again, as a restarted controller does).
   */
  save(dir: string): Promise<void>
  /**
   * A total loss: every control plane's etcd and API server gone with their data, every machine a
   * new one in maintenance mode. From then on, a simulated `talosctl bootstrap --recover-from
   * FILE` restores the real etcd from FILE and starts the control plane again on the same
   * addresses with the same credentials (the cluster's identity, which the Talos secrets bundle
   * carries on a real cluster).
   */
  loseEverything(): Promise<void>
}

export interface HarnessOptions {
  talosVersion?: string
  kokumi?: KokumiVariant
  controlPlanes?: number
  workers?: number
  /**
   * What the key file holds. An identity by default: a passphrase is age's scrypt (work factor
   * 18, some seconds of pure JS per seal and per open, on every init and kube-proxy command);
   * the tests about passphrases ask for one.
   */
  stateKey?: 'identity' | 'passphrase'
  /**
   * Where init's Cilium chart comes from: the mirror's 1.18.0 by --cilium-chart (the day-2 and
   * upgrade-from tests), or `mirror`: no --cilium-chart, init finds the pinned chart in the
   * mirror as a user's default run does (the tests whose subject is the default).
   */
  cilium?: 'mirror'
  /** Extra kube-apiserver flags (the benchmark's audit log). */
  apiServerArgs?: string[]
  /**
   * A folder `save()` wrote: the cluster it holds comes back on new ports and in new folders (the
   * saved folder is only read), with the nodes, versions and key it was saved with; the other
   * options are taken from it.
   */
  restoreFrom?: string
}

/** What `save()` writes beside the parts, to start the same cluster again. */
interface SavedCluster {
  controlPlanes: string[]
  workers: string[]
  talosVersion: string
  kokumiManifest: string
  /** The work folder and the proxy's server as they were: a restored copy's files name its own. */
  work: string
  proxyServer: string
}

export async function startHarnessCluster(opts: HarnessOptions = {}): Promise<HarnessCluster> {
  const from = opts.restoreFrom
  const saved = from ? (JSON.parse(readFileSync(join(from, SAVED_MANIFEST), 'utf8')) as SavedCluster) : undefined
  const talosVersion = saved?.talosVersion ?? opts.talosVersion ?? TALOS_VERSION
  const controlPlanes = saved?.controlPlanes ?? [CONTROL_PLANE, ...MORE_CONTROL_PLANES].slice(0, opts.controlPlanes ?? 1)
  const workers = saved?.workers ?? [WORKER, ...MORE_WORKERS].slice(0, opts.workers ?? 1)
  const cp = await startControlPlane({apiServerArgs: opts.apiServerArgs, restoreFrom: from && join(from, 'control-plane')})
  const registry = await startRegistry({restoreFrom: from && join(from, 'registry')})
  const nodes = startSimulatedNodes(
    [...controlPlanes.map((ip) => ({ip, role: 'controlplane' as const, talosVersion})), ...workers.map((ip) => ({ip, role: 'worker' as const, talosVersion}))],
    {kubeconfigPath: cp.kubeconfigPath, restoreFrom: from && join(from, 'nodes'), etcd: {endpoint: cp.etcdEndpoint, etcdutl: cp.etcdutl}},
  )
  const nodeIps = [...controlPlanes, ...workers]
  let kwok = await startKwok({kubeconfigPath: cp.kubeconfigPath, restored: saved && loadKubeConfig(cp.kubeconfigPath), nodeIps})
  const pods = startPodStartSimulator(loadKubeConfig(cp.kubeconfigPath))
  const operator: CiliumOperatorSimulator = startCiliumOperatorSimulator({kubeconfigPath: cp.kubeconfigPath})
  const stack: StackSimulator = startStackSimulator({kubeconfigPath: cp.kubeconfigPath, registryEndpoint: registry.endpoint})
  const work = mkdtempSync(join(tmpdir(), 'ichor-e2e-'))
  const stateDir = join(work, 'state')
  // What the operator's kubeconfig reaches: nothing until bootstrap, then the apiserver (api-proxy.ts).
  // A restored cluster was bootstrapped long ago: its API server answers at once.
  const apiProxy = await startApiProxy({kubeconfigPath: cp.kubeconfigPath, simState: nodes.stateDir, outDir: work, delayMs: saved ? 0 : 1000})
  // The real Kokumi 0.14.0 manifest and CRDs by default; the 0.17 fixture on request.
  const kokumiManifest =
    saved?.kokumiManifest.replace(saved.work, work) ?? (opts.kokumi === 'fixture-0.17' ? kokumi017ManifestFixture(work) : UPSTREAM.kokumiManifest)
  // Every init seals the Talos bundle it keeps in the cluster: scripts give the key as a file.
  const stateKeyFile = join(work, 'state-key')
  if (saved) {
    // This machine's side as it was (ichor's state folder, the key), naming this copy's folder and proxy.
    cpSync(join(from!, 'work'), work, {recursive: true})
    renameInTextFiles(work, [
      [saved.work, work],
      [saved.proxyServer, apiProxy.server],
    ])
  } else {
    const key = opts.stateKey === 'passphrase' ? 'harness passphrase, not a secret' : `# harness identity, not a secret\n${await generateIdentity()}`
    writeFileSync(stateKeyFile, `${key}\n`, {mode: 0o600})
  }
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ICHOR_STATE_PASSPHRASE_FILE: stateKeyFile,
    ICHOR_TALOSCTL: nodes.talosctl,
    TALOS_SIM_STATE: nodes.stateDir,
    TALOS_SIM_KUBECONFIG: cp.kubeconfigPath,
    TALOS_SIM_ETCD_ENDPOINT: cp.etcdEndpoint,
    TALOS_SIM_ETCDUTL: cp.etcdutl,
    TALOS_SIM_REAL_TALOSCTL: realTalosctlPath(),
    ICHOR_MIRROR: '',
    TALOS_SIM_CLIENT_KUBECONFIG: apiProxy.kubeconfigPath,
    // The hand-over waits for the simulated manifest runs (about 1 s, talosctl-simulator.mjs)
    // before its edit: the 5 s settle period after them adds nothing here.
    ICHOR_TALOS_INVENTORY_SETTLE_MS: '100',
  }
  const initArgs = [
    'init',
    '--cluster-name',
    'e2e',
    '--endpoint',
    `https://${CONTROL_PLANE}:6443`,
    ...controlPlanes.flatMap((n) => ['--control-plane', n]),
    ...workers.flatMap((n) => ['--worker', n]),
    '--talos-version',
    talosVersion,
    '--state-dir',
    stateDir,
    '--registry-endpoint',
    registry.endpoint,
    '--yes',
    '--timeout',
    '120',
    ...(opts.cilium === 'mirror' ? ['--mirror', UPSTREAM.dir] : ['--cilium-chart', UPSTREAM.ciliumChart]),
    '--argocd-chart',
    UPSTREAM.argocdChart,
    '--kokumi-manifest',
    kokumiManifest,
    // The mirror's Argo CD chart (10.1.1) and Kokumi (0.14.0) are older than the pins: a real run needs it.
    '--allow-unpinned',
  ]
  // The nodes ask for a recovery by a request file (talosctl-simulator.mjs recoverEtcd); this process owns etcd.
  let recovery: NodeJS.Timeout | undefined
  const recoverOnRequest = () => {
    const request = join(nodes.stateDir, 'etcd-recover.request')
    let busy = false
    recovery = setInterval(() => {
      if (busy || !existsSync(request)) return
      busy = true
      const {snapshot} = JSON.parse(readFileSync(request, 'utf8')) as {snapshot: string}
      rmSync(request)
      cp.recover(snapshot)
        // The new machines' kubelets: a kwok of their own. The lost machines' kwok would resume its
        // watches at resource versions the restored etcd has not reached yet, and its Leases name it.
        .then(async () => void (kwok = await startKwok({kubeconfigPath: cp.kubeconfigPath, restored: loadKubeConfig(cp.kubeconfigPath), nodeIps})))
        .then(
          () => writeFileSync(join(nodes.stateDir, 'etcd-recover.done'), '{}'),
          (error: unknown) => writeFileSync(join(nodes.stateDir, 'etcd-recover.done'), JSON.stringify({error: String(error)})),
        )
    }, 100)
    recovery.unref()
  }
  return {
    cp,
    registry,
    nodes,
    stateDir,
    stateKeyFile,
    controlPlanes,
    workers,
    kokumiManifest,
    pods,
    stack,
    env,
    initArgs,
    async loseEverything() {
      await nodes.loseAll()
      // Every machine's kubelet goes with it.
      await kwok.stop()
      await apiProxy.close()
      // Kokumi's registry keeps its bundles in an emptyDir: they go with the nodes.
      await registry.restartEmpty()
      await cp.lose()
      recoverOnRequest()
    },
    async stop() {
      clearInterval(recovery)
      await apiProxy.stop()
      await stack.stop()
      await operator.stop()
      await pods.stop()
      await kwok.stop()
      nodes.cleanup()
      await registry.stop()
      await cp.stop()
      rmSync(work, {recursive: true, force: true})
    },
    async save(dir) {
      // The simulators and kwok first, so nothing writes while the parts are copied.
      await apiProxy.stop()
      await stack.stop()
      await operator.stop()
      await pods.stop()
      await kwok.stop()
      mkdirSync(dir, {recursive: true})
      await nodes.save(join(dir, 'nodes'))
      await registry.save(join(dir, 'registry'))
      await cp.save(join(dir, 'control-plane'))
      // The proxy's kubeconfig is written anew by the copy's own proxy.
      cpSync(work, join(dir, 'work'), {recursive: true, filter: (src) => !src.endsWith('kubeconfig-via-proxy')})
      rmSync(work, {recursive: true, force: true})
      const manifest: SavedCluster = {controlPlanes, workers, talosVersion, kokumiManifest, work, proxyServer: apiProxy.server}
      writeFileSync(join(dir, SAVED_MANIFEST), JSON.stringify(manifest, null, 2))
    },
  }
}

/** Written last by save(): a folder without it is not a whole saved cluster. */
export const SAVED_MANIFEST = 'cluster.json'

/** Replaces each pair's first string by its second in every UTF-8 text file under `dir`. */
function renameInTextFiles(dir: string, pairs: [string, string][]): void {
  for (const entry of readdirSync(dir, {withFileTypes: true, recursive: true})) {
    if (!entry.isFile()) continue
    const path = join(entry.parentPath, entry.name)
    const bytes = readFileSync(path)
    const text = bytes.toString('utf8')
    if (bytes.includes(0) || !Buffer.from(text, 'utf8').equals(bytes)) continue
    const renamed = pairs.reduce((t, [a, b]) => t.replaceAll(a, b), text)
    if (renamed !== text) writeFileSync(path, renamed)
  }
}

export interface CliRun {
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
  ms: number
}

/**
 * Runs the built CLI. `killOn` SIGKILLs it when a --json event line (stderr, or stdout) matches;
 * `onEvent` sees every event line with the process (e.g. to SIGSTOP it at a step).
 */
export function runIchor(
  args: string[],
  env: NodeJS.ProcessEnv,
  opts: {
    killOn?: (event: Record<string, unknown>) => boolean
    onEvent?: (event: Record<string, unknown>, child: ChildProcess) => void
    onStart?: (child: ChildProcess) => void
  } = {},
): Promise<CliRun> {
  const started = performance.now()
  return new Promise((resolve) => {
    const child = spawn(join(PROJECT_ROOT, 'bin', 'run.js'), args, {env, stdio: ['ignore', 'pipe', 'pipe']})
    opts.onStart?.(child)
    const out = {stdout: '', stderr: ''}
    const pending = {stdout: '', stderr: ''}
    for (const name of ['stdout', 'stderr'] as const) {
      child[name].on('data', (chunk: Buffer) => {
        out[name] += chunk
        if (!opts.killOn && !opts.onEvent) return
        pending[name] += chunk
        const lines = pending[name].split('\n')
        pending[name] = lines.pop()!
        for (const line of lines) {
          const event = parseEvent(line)
          if (event) opts.onEvent?.(event, child)
          if (event && opts.killOn?.(event)) child.kill('SIGKILL')
        }
      })
    }
    child.on('close', (code, signal) => {
      const ms = performance.now() - started
      logRun(args, ms, code, signal)
      resolve({code, signal, stdout: out.stdout, stderr: out.stderr, ms})
    })
  })
}

/** ICHOR_E2E_RUN_LOG=FILE: one line per CLI run (command, ms, exit), to see where a suite's time goes. */
function logRun(args: string[], ms: number, code: number | null, signal: NodeJS.Signals | null): void {
  const file = process.env.ICHOR_E2E_RUN_LOG
  if (!file) return
  const firstFlag = args.findIndex((a) => a.startsWith('-'))
  const command = args.slice(0, firstFlag === -1 ? args.length : firstFlag).join(' ')
  appendFileSync(file, `${process.env.VITEST_POOL_ID ?? ''}\t${command}\t${Math.round(ms)}\t${signal ?? code}\n`)
}

function parseEvent(line: string): Record<string, unknown> | undefined {
  try {
    const e = JSON.parse(line) as unknown
    return e && typeof e === 'object' && 'event' in e ? (e as Record<string, unknown>) : undefined
  } catch {
    return undefined
  }
}

/** The --json event lines of a run: on stderr only (README, "JSON output"); other stderr lines are skipped. */
export function jsonEvents(run: CliRun): Record<string, unknown>[] {
  return run.stderr.split('\n').flatMap((line) => {
    const event = parseEvent(line)
    return event ? [event] : []
  })
}

/** The command's result: stdout must be exactly one JSON document (README, "JSON output"), or this throws. */
export function jsonResult<T = Record<string, unknown>>(run: CliRun): T {
  return JSON.parse(run.stdout) as T
}
