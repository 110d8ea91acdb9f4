// A whole test "cluster" for `ichor init`: real kube-apiserver + etcd, real registry, real
// helm and talosctl (gen/validate); simulated Talos nodes, kubelet readiness, Cilium's
// operator registering its CRDs, and Kokumi/Argo CD turning Orders into healthy
// Applications. The CLI runs as a subprocess, exactly as an operator runs it.
import {spawn, type ChildProcess} from 'node:child_process'
import {realTalosctlPath} from './talosctl.js'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {startControlPlane, type ControlPlane} from './apiserver.js'
import {startCiliumOperatorSimulator, type CiliumOperatorSimulator} from './cilium-simulator.js'
import {kokumi017ManifestFixture} from './fixtures.js'
import {startReadinessSimulator, type ReadinessSimulator} from './readiness-simulator.js'
import {startRegistry, type RunningRegistry} from './registry.js'
import {startStackSimulator, type StackSimulator} from './stack-simulator.js'
import {startSimulatedNodes, type SimulatedNodes} from '../sim/simulated-nodes.js'
import {PROJECT_ROOT, UPSTREAM} from '../support/upstream.js'

export const CONTROL_PLANE = '127.0.0.11'
export const WORKER = '127.0.0.12'
export const TALOS_VERSION = 'v1.14.1'

export interface HarnessCluster {
  cp: ControlPlane
  registry: RunningRegistry
  nodes: SimulatedNodes
  stateDir: string
  kokumiManifest: string
  /** The readiness simulator: tests hold workloads unready through it. */
  readiness: ReadinessSimulator
  /** Environment for the CLI subprocess. */
  env: NodeJS.ProcessEnv
  /** The `ichor init` arguments for this cluster (add --json etc.). */
  initArgs: string[]
  stop(): Promise<void>
}

export async function startHarnessCluster(opts: {talosVersion?: string} = {}): Promise<HarnessCluster> {
  const talosVersion = opts.talosVersion ?? TALOS_VERSION
  const cp = await startControlPlane()
  const registry = await startRegistry()
  const nodes = startSimulatedNodes(
    [
      {ip: CONTROL_PLANE, role: 'controlplane', talosVersion},
      {ip: WORKER, role: 'worker', talosVersion},
    ],
    {kubeconfigPath: cp.kubeconfigPath},
  )
  const readiness: ReadinessSimulator = startReadinessSimulator({kubeconfigPath: cp.kubeconfigPath, nodes: 2})
  const operator: CiliumOperatorSimulator = startCiliumOperatorSimulator({kubeconfigPath: cp.kubeconfigPath})
  const stack: StackSimulator = startStackSimulator({kubeconfigPath: cp.kubeconfigPath, registryEndpoint: registry.endpoint})
  const work = mkdtempSync(join(tmpdir(), 'ichor-e2e-'))
  const stateDir = join(work, 'state')
  const kokumiManifest = kokumi017ManifestFixture(work)
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ICHOR_TALOSCTL: nodes.talosctl,
    TALOS_SIM_STATE: nodes.stateDir,
    TALOS_SIM_KUBECONFIG: cp.kubeconfigPath,
    TALOS_SIM_REAL_TALOSCTL: realTalosctlPath(),
    ICHOR_MIRROR: '',
  }
  const initArgs = [
    'init', '--cluster-name', 'e2e', '--endpoint', `https://${CONTROL_PLANE}:6443`,
    '--control-plane', CONTROL_PLANE, '--worker', WORKER, '--talos-version', talosVersion,
    '--state-dir', stateDir, '--registry-endpoint', registry.endpoint, '--yes', '--timeout', '120',
    '--cilium-chart', UPSTREAM.ciliumChart, '--argocd-chart', UPSTREAM.argocdChart, '--kokumi-manifest', kokumiManifest,
  ]
  return {
    cp, registry, nodes, stateDir, kokumiManifest, readiness, env, initArgs,
    async stop() {
      await stack.stop()
      await operator.stop()
      await readiness.stop()
      nodes.cleanup()
      await registry.stop()
      await cp.stop()
      rmSync(work, {recursive: true, force: true})
    },
  }
}

export interface CliRun {
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
  ms: number
}

/** Runs the built CLI. `killOn` SIGKILLs it when a --json event line matches. */
export function runIchor(args: string[], env: NodeJS.ProcessEnv, opts: {killOn?: (event: Record<string, unknown>) => boolean; onStart?: (child: ChildProcess) => void} = {}): Promise<CliRun> {
  const started = performance.now()
  return new Promise((resolve) => {
    const child = spawn(join(PROJECT_ROOT, 'bin', 'run.js'), args, {env, stdio: ['ignore', 'pipe', 'pipe']})
    opts.onStart?.(child)
    let stdout = ''
    let stderr = ''
    let pending = ''
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk
      if (!opts.killOn) return
      pending += chunk
      const lines = pending.split('\n')
      pending = lines.pop()!
      for (const line of lines) {
        try {
          if (opts.killOn(JSON.parse(line))) child.kill('SIGKILL')
        } catch {
          // not a JSON event line
        }
      }
    })
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk))
    child.on('close', (code, signal) => resolve({code, signal, stdout, stderr, ms: performance.now() - started}))
  })
}

/** The --json event lines of a run (other lines, e.g. the final result document, are skipped). */
export function jsonEvents(run: CliRun): Record<string, unknown>[] {
  return run.stdout.split('\n').flatMap((line) => {
    try {
      const e = JSON.parse(line) as unknown
      return e && typeof e === 'object' && 'event' in e ? [e as Record<string, unknown>] : []
    } catch {
      return []
    }
  })
}
