// Thin wrapper of the `talosctl` binary (ICHOR_TALOSCTL or `talosctl` on PATH, resolved to an
// absolute path on disk before anything runs).
// Every node-facing call names the node and carries talosctl's own message, so an
// operator can rerun the same talosctl command by hand.
import {writeFile, access} from 'node:fs/promises'
import {join} from 'node:path'
import {parseAllDocuments, stringify} from 'yaml'
import {diskRecordOf, unattendedDiskMatch, type DiskRecord} from './disk-selector.js'
import {hasUnattendedInstallConfig} from './versions.js'
import {IchorError} from '../errors/errors.js'
import {withPrivateTempDir} from '../fs/private-files.js'
import {checkedOncePerPath, resolveBinary} from '../exec/resolve.js'
import {runProcess, startError, type RunResult} from '../exec/run.js'

export class TalosctlError extends IchorError {
  constructor(
    readonly node: string | undefined,
    readonly action: string,
    readonly talosctlMessage: string,
  ) {
    super(`${action}${node ? ` on node ${node}` : ''} failed: ${talosctlMessage}`)
    this.name = 'TalosctlError'
  }
}

const HINT = 'install talosctl matching your Talos version, or set ICHOR_TALOSCTL to its path'

/** The absolute path of the talosctl ichor runs; throws when there is none. */
export function talosctlPath(): string {
  return resolveBinary({name: 'talosctl', envVar: 'ICHOR_TALOSCTL', hint: HINT})
}

/**
 * Variables talosctl (or its client library) reads its target from: the client config file
 * and its context, endpoints and nodes. ichor always names the node, the endpoint and the
 * talosconfig on the command line, so an operator's own settings must not complete or
 * override them; they are stripped from talosctl's environment.
 */
const TALOS_TARGET_VARIABLES = ['TALOSCONFIG', 'TALOS_HOME', 'TALOS_CONTEXT', 'TALOS_ENDPOINTS', 'TALOS_NODES']

export function talosctlEnv(base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(base).filter(([name]) => !TALOS_TARGET_VARIABLES.includes(name)))
}

const talosctlCheck = checkedOncePerPath(talosctlPath, async (path) => {
  await talosctlVersionOf(path)
  return path
})

/** Checks once (per resolved path) that talosctl runs; resolves to its absolute path. */
export const findTalosctl: () => Promise<string> = talosctlCheck.get

/**
 * The Tag line of `talosctl version --client` ("Client:\n\tTag:  v1.14.1\n\tSHA: ..."), or
 * undefined when the output has none (a build without version information).
 */
export function parseTalosctlClientTag(stdout: string): string | undefined {
  return /^\s*Tag:\s*(v?\d+\.\d+\.\d+\S*)\s*$/m.exec(stdout)?.[1]
}

/** What `talosctl version --client` prints; an IchorError when talosctl does not run. */
export async function talosctlVersionOf(path: string): Promise<string> {
  const result = await exec(path, ['version', '--client'], 20_000)
  if (result.exitCode !== 0 || result.timedOut) {
    const why = result.timedOut ? 'no answer within 20s' : firstLine((result.stderr || result.stdout).trim())
    throw new IchorError(`cannot run talosctl at "${path}": ${why}`, {hint: HINT})
  }
  return result.stdout
}

/**
 * How many talosctl processes run at once. Each call is its own Go process (tens of MB and a
 * TLS handshake with the node); the nodes answer in parallel, so a few at once hide their
 * latency, while 33 at once on a 3+30 cluster would only crowd the operator's laptop (2 cores
 * here) and slow every call. 8 covers a homelab of up to 8 nodes in one wave.
 */
export const TALOSCTL_PARALLELISM = 8

let running = 0
const queued: (() => void)[] = []

/** Waits for one of the TALOSCTL_PARALLELISM places; the returned function frees it. */
async function place(): Promise<() => void> {
  if (running >= TALOSCTL_PARALLELISM) await new Promise<void>((resolve) => queued.push(resolve))
  else running++
  // A freed place passes straight to the next waiter: `running` stays counted for it.
  return () => {
    const next = queued.shift()
    if (next) next()
    else running--
  }
}

async function exec(bin: string, args: string[], timeoutMs: number, onLine?: (line: string) => void): Promise<RunResult> {
  const free = await place()
  try {
    return await runProcess(bin, args, {env: talosctlEnv(), timeoutMs, maxBuffer: 64 * 1024 * 1024, onLine})
  } catch (error: unknown) {
    talosctlCheck.forget(bin) // a binary that no longer starts is checked again next time
    throw startError('talosctl', bin, error, HINT)
  } finally {
    free()
  }
}

interface RunOptions {
  node?: string
  action: string
  timeoutMs?: number
  onLine?: (line: string) => void
  /** Return stderr after stdout (talosctl writes some answers there). */
  withStderr?: boolean
}

async function run(args: string[], opts: RunOptions): Promise<string> {
  // The binary is resolved on disk first; whether it runs at all (`version --client`) is asked
  // only when the call fails, so a working talosctl costs one process per call, not two.
  const bin = talosctlPath()
  const result = await exec(bin, args, opts.timeoutMs ?? 120_000, opts.onLine)
  if (result.exitCode === 0 && !result.timedOut) return opts.withStderr ? `${result.stdout}${result.stderr}` : result.stdout
  await findTalosctl() // a talosctl that does not run is said so, not blamed on the node
  if (result.timedOut) throw new TalosctlError(opts.node, opts.action, `no answer within ${(opts.timeoutMs ?? 120_000) / 1000}s`)
  throw new TalosctlError(opts.node, opts.action, talosctlMessage(result.stderr || result.stdout))
}

/** talosctl's message without its "error ...:" boilerplate lines collapsed away. */
export function talosctlMessage(stderr: string): string {
  return stderr
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !/^Usage:/.test(line))
    .join(' ')
    .trim()
}

function firstLine(s: string): string {
  return s.split('\n')[0] ?? s
}

/** Flags addressing one node with a client config (endpoint = the node itself). */
function nodeFlags(node: string, talosconfig: string): string[] {
  return ['--nodes', node, '--endpoints', node, '--talosconfig', talosconfig]
}

export async function genSecrets(outPath: string): Promise<void> {
  if (await exists(outPath)) {
    // Talos secrets must never be regenerated over an existing bundle.
    throw new IchorError(`refusing to overwrite the Talos secrets bundle at ${outPath}`)
  }
  await run(['gen', 'secrets', '--output-file', outPath], {action: 'talosctl gen secrets'})
}

export interface GenConfigOptions {
  clusterName: string
  /** Kubernetes API endpoint, https://host:6443. */
  endpoint: string
  secretsPath: string
  /** Talos version whose config contract to generate for, e.g. v1.13.0. */
  talosVersion: string
  kubernetesVersion: string
  /** YAML (one or more documents) applied to control planes only. */
  controlPlanePatch?: string
  /** YAML (one or more documents) applied to workers only. */
  workerPatch?: string
  /** The operator's: --install-disk, --install-image and patches after ichor's, in talosctl's order. */
  installDisk?: string
  installImage?: string
  userPatches?: {all: string[]; controlPlane: string[]; worker: string[]}
  outDir: string
}

export interface GeneratedConfigs {
  controlPlane: string
  worker: string
  talosconfig: string
}

export async function genConfig(opts: GenConfigOptions): Promise<GeneratedConfigs> {
  // The patches carry the Cilium manifest: a 0700 folder removed on every exit path.
  await withPrivateTempDir('ichor-talos-patch-', async (dir) => {
    const args = [
      'gen',
      'config',
      opts.clusterName,
      opts.endpoint,
      // Empty: a throwaway bundle (the dry run's configs, whose secrets are redacted anyway).
      ...(opts.secretsPath ? ['--with-secrets', opts.secretsPath] : []),
      '--talos-version',
      opts.talosVersion,
      '--kubernetes-version',
      opts.kubernetesVersion,
      '--output',
      opts.outDir,
      '--with-docs=false',
      '--with-examples=false',
      '--force',
    ]
    if (opts.controlPlanePatch) {
      const file = join(dir, 'controlplane-patch.yaml')
      await writeFile(file, opts.controlPlanePatch, {mode: 0o600})
      args.push('--config-patch-control-plane', `@${file}`)
    }
    if (opts.workerPatch) {
      const file = join(dir, 'worker-patch.yaml')
      await writeFile(file, opts.workerPatch, {mode: 0o600})
      args.push('--config-patch-worker', `@${file}`)
    }
    if (opts.installDisk) args.push('--install-disk', opts.installDisk)
    // gen config selects `disk.dev_path == "<disk>"`, which a /dev/disk/by-* link never equals:
    // a link is selected among the disk's symlinks instead, before the operator's patches.
    if (opts.installDisk?.startsWith('/dev/disk/') && hasUnattendedInstallConfig(opts.talosVersion)) {
      const file = join(dir, 'install-disk-patch.yaml')
      const match = unattendedDiskMatch(opts.installDisk)
      await writeFile(file, stringify({apiVersion: 'v1alpha1', kind: 'UnattendedInstallConfig', provisioning: {diskSelector: {match}}}), {mode: 0o600})
      args.push('--config-patch', `@${file}`)
    }
    if (opts.installImage) args.push('--install-image', opts.installImage)
    const user = opts.userPatches ?? {all: [], controlPlane: [], worker: []}
    for (const [flag, list] of [
      ['--config-patch', user.all],
      ['--config-patch-control-plane', user.controlPlane],
      ['--config-patch-worker', user.worker],
    ] as const) {
      for (const [n, text] of list.entries()) {
        const file = join(dir, `user${flag}-${n}.yaml`)
        await writeFile(file, text, {mode: 0o600})
        args.push(flag, `@${file}`)
      }
    }
    await run(args, {action: 'talosctl gen config'})
  })
  return {
    controlPlane: join(opts.outDir, 'controlplane.yaml'),
    worker: join(opts.outDir, 'worker.yaml'),
    talosconfig: join(opts.outDir, 'talosconfig'),
  }
}

/**
 * One node's config: the role's generated config with that node's patches applied, as talosctl
 * applies them offline (`talosctl machineconfig patch`), written to outPath.
 */
export async function patchConfigFile(opts: {base: string; patches: string[]; outPath: string}): Promise<void> {
  await withPrivateTempDir('ichor-talos-patch-', async (dir) => {
    const args = ['machineconfig', 'patch', opts.base, '--output', opts.outPath]
    for (const [n, text] of opts.patches.entries()) {
      const file = join(dir, `node-patch-${n}.yaml`)
      await writeFile(file, text, {mode: 0o600})
      args.push('--patch', `@${file}`)
    }
    await run(args, {action: 'talosctl machineconfig patch'})
  })
}

/** Talos's own validator, in metal mode and strict (warnings are errors). */
export async function validateConfig(path: string): Promise<void> {
  await run(['validate', '--config', path, '--mode', 'metal', '--strict'], {action: `talosctl validate ${path}`})
}

export type NodeState = 'maintenance' | 'configured' | 'unreachable'

export interface Reachability {
  node: string
  state: NodeState
  /** talosctl's message when the node did not answer, or refused the talosconfig. */
  message?: string
  /**
   * A configured node checked with a talosconfig: true when it accepted it (configured from
   * this bundle), false when the TLS handshake failed (configured from another bundle: Talos
   * speaks mutual TLS with the certificates of its own bundle only). Undefined when unchecked.
   */
  ours?: boolean
}

/** The handshake errors of a node whose CA is not the talosconfig's (either side may refuse). */
const OTHER_BUNDLE = /x509|certificate signed by unknown authority|bad certificate|authentication handshake failed/i

/**
 * Probes a node with a short timeout. An insecure `version` answers only in maintenance
 * mode; a configured node refuses the client without a certificate, which still proves
 * it is up. With a talosconfig, a configured node is confirmed with an authenticated call.
 */
export async function isReachable(node: string, opts: {talosconfig?: string; timeoutMs?: number} = {}): Promise<Reachability> {
  // Resolved on disk only: whether talosctl runs at all is asked when no node answered (below),
  // so a reachable node costs its own calls and no `version --client` besides.
  const bin = talosctlPath()
  const timeout = opts.timeoutMs ?? 10_000
  const insecure = await exec(bin, ['version', '--insecure', '--nodes', node, '--endpoints', node], timeout)
  if (insecure.exitCode === 0 && !insecure.timedOut) return {node, state: 'maintenance'}
  const insecureMessage = insecure.timedOut ? `no answer within ${timeout / 1000}s` : talosctlMessage(insecure.stderr)
  let refused: string | undefined
  if (opts.talosconfig) {
    const secure = await exec(bin, ['version', ...nodeFlags(node, opts.talosconfig)], timeout)
    if (secure.exitCode === 0 && !secure.timedOut) return {node, state: 'configured', ours: true}
    const message = secure.timedOut ? '' : talosctlMessage(secure.stderr || secure.stdout)
    if (OTHER_BUNDLE.test(message)) refused = message
  }
  // A configured node refuses a client without a certificate: up, and not in maintenance mode.
  if (/certificate required|PermissionDenied|Unauthenticated|not authorized/i.test(insecureMessage)) {
    return refused ? {node, state: 'configured', ours: false, message: refused} : {node, state: 'configured'}
  }
  await findTalosctl() // a talosctl that does not run is said so, not blamed on the node
  return {node, state: 'unreachable', message: insecureMessage}
}

export interface ApplyConfigOptions {
  node: string
  file: string
  /** Maintenance mode: no client certificate exists yet. */
  insecure: boolean
  /** Required when not insecure. */
  talosconfig?: string
  /** talosctl's --mode on a configured node (`auto` is what reboots a node below Talos v1.14 when it must). */
  mode?: 'auto' | 'no-reboot'
}

export async function applyConfig(opts: ApplyConfigOptions): Promise<void> {
  const args = ['apply-config', '--file', opts.file, ...(opts.mode ? ['--mode', opts.mode] : [])]
  if (opts.insecure) args.push('--insecure', '--nodes', opts.node, '--endpoints', opts.node)
  else {
    if (!opts.talosconfig) throw new IchorError(`applying a config to configured node ${opts.node} needs a talosconfig`)
    args.push(...nodeFlags(opts.node, opts.talosconfig))
  }
  await run(args, {node: opts.node, action: 'talosctl apply-config'})
}

/**
 * `talosctl apply-config --dry-run --mode auto`: whether the node would take the config with a
 * reboot. talosctl prints the node's ModeDetails on stderr ("Dry run summary:\nApplied
 * configuration with|without a reboot (skipped in dry-run).", cmd/talosctl/pkg/talos/helpers/mode.go
 * PrintApplyResults; v1alpha1_server.go ApplyConfiguration, Talos v1.13.0 and v1.14.0-rc.1).
 */
export async function applyConfigDryRun(opts: {node: string; file: string; talosconfig: string}): Promise<{reboot: boolean; summary: string}> {
  const out = await run(['apply-config', '--file', opts.file, '--mode', 'auto', '--dry-run', ...nodeFlags(opts.node, opts.talosconfig)], {
    node: opts.node,
    action: 'talosctl apply-config --dry-run',
    withStderr: true,
  })
  const summary = /Applied configuration (with|without) a reboot/.exec(out)
  if (!summary)
    throw new TalosctlError(
      opts.node,
      'talosctl apply-config --dry-run',
      `its answer says neither "with a reboot" nor "without a reboot": ${firstLine(out.trim())}`,
    )
  return {reboot: summary[1] === 'with', summary: summary[0]}
}

/**
 * Bootstraps etcd once; a node that is already bootstrapped counts as success. With `recoverFrom`
 * (an etcd snapshot file), etcd starts from it: talosctl v1.14 (cmd/talosctl/cmd/talos/bootstrap.go)
 * reads the file's status, uploads it (EtcdRecover), and Talos restores it into the empty data
 * folder as a one-member cluster before etcd starts.
 */
export async function bootstrap(opts: {node: string; talosconfig: string; recoverFrom?: string; timeoutMs?: number}): Promise<{alreadyBootstrapped: boolean}> {
  const recover = opts.recoverFrom ? ['--recover-from', opts.recoverFrom] : []
  try {
    await run(['bootstrap', ...recover, ...nodeFlags(opts.node, opts.talosconfig)], {
      node: opts.node,
      action: opts.recoverFrom ? 'talosctl bootstrap --recover-from' : 'talosctl bootstrap',
      timeoutMs: opts.timeoutMs,
    })
    return {alreadyBootstrapped: false}
  } catch (error) {
    // Talos answers a second bootstrap with gRPC AlreadyExists ("etcd data directory is not empty").
    if (error instanceof TalosctlError && /AlreadyExists/.test(error.talosctlMessage)) return {alreadyBootstrapped: true}
    throw error
  }
}

export async function kubeconfig(opts: {node: string; talosconfig: string; outPath: string}): Promise<string> {
  await run(['kubeconfig', opts.outPath, ...nodeFlags(opts.node, opts.talosconfig), '--force', '--merge=false'], {
    node: opts.node,
    action: 'talosctl kubeconfig',
  })
  return opts.outPath
}

/**
 * The node's active machine config as raw YAML (possibly several documents).
 * `get machineconfig -o yaml` prints the resource with the config as a string in `spec`.
 */
export async function getMachineConfig(opts: {node: string; talosconfig: string; timeoutMs?: number}): Promise<string> {
  const out = await run(['get', 'machineconfig', '--output', 'yaml', ...nodeFlags(opts.node, opts.talosconfig)], {
    node: opts.node,
    action: 'talosctl get machineconfig',
    timeoutMs: opts.timeoutMs,
  })
  const config = machineConfigsOf(out).get(opts.node) ?? machineConfigsOf(out).values().next().value
  if (config === undefined) throw new TalosctlError(opts.node, 'talosctl get machineconfig', 'the answer holds no machine config')
  return config
}

/** Per node, the active machine config in `get machineconfig -o yaml` output (documents start with `node: <ip>`, output/yaml.go). */
function machineConfigsOf(out: string): Map<string, string> {
  type Doc = {node?: unknown; metadata?: {id?: string}; spec?: unknown}
  const byNode = new Map<string, Doc[]>()
  for (const doc of parseAllDocuments(out)) {
    const r = doc.toJS() as Doc | null
    if (r === null || typeof r !== 'object') continue
    const node = typeof r.node === 'string' ? r.node : ''
    byNode.set(node, [...(byNode.get(node) ?? []), r])
  }
  const configs = new Map<string, string>()
  for (const [node, resources] of byNode) {
    const active = resources.find((r) => r.metadata?.id === 'v1alpha1') ?? resources[0]
    if (typeof active?.spec === 'string') configs.set(node, active.spec)
  }
  return configs
}

/**
 * The machine configs of several nodes in one talosctl call (`--nodes a,b,c`: one process, one
 * connection to the endpoint, whose apid forwards each request), as talosctl v1.14.1 answers
 * it (cmd/talosctl/cmd/talos/get.go listResources): node by node, a node that fails skipped
 * with "error listing resources on node <ip>: <error>" on stderr and exit 1; when the first
 * node fails, nothing at all. Per node: its config, or the error that node gave; a node the
 * answer says nothing about is absent (the caller asks it alone).
 */
export async function getMachineConfigs(opts: {nodes: string[]; talosconfig: string; timeoutMs?: number}): Promise<Map<string, string | TalosctlError>> {
  const action = 'talosctl get machineconfig'
  const [first] = opts.nodes
  if (first === undefined) return new Map()
  const bin = talosctlPath()
  const timeoutMs = opts.timeoutMs ?? 120_000
  const result = await exec(
    bin,
    ['get', 'machineconfig', '--output', 'yaml', '--nodes', opts.nodes.join(','), '--endpoints', first, '--talosconfig', opts.talosconfig],
    timeoutMs,
  )
  const answers = new Map<string, string | TalosctlError>()
  if (result.timedOut) return answers
  for (const [node, config] of machineConfigsOf(result.stdout)) if (opts.nodes.includes(node)) answers.set(node, config)
  for (const line of result.stderr.split('\n')) {
    const m = /^error listing resources on node (\S+): (.*)$/.exec(line.trim())
    if (m && opts.nodes.includes(m[1]!) && !answers.has(m[1]!)) answers.set(m[1]!, new TalosctlError(m[1], action, m[2]!))
  }
  // Nothing at all: the first node failed (its error is the command's).
  if (answers.size === 0 && result.exitCode !== 0 && result.stderr.trim()) answers.set(first, new TalosctlError(first, action, talosctlMessage(result.stderr)))
  return answers
}

/**
 * The Talos version each node runs, in one talosctl call (`version --nodes a,b,c`), as talosctl
 * v1.14.1 prints it (cmd/talosctl/cmd/talos/version.go): after "Server:", a block a node that
 * answered (`NODE: <ip>`, then `Tag: <version>`), and on stderr "error getting version from node
 * <ip>: <error>" for each that did not. A node named in neither (the call timed out) is absent.
 */
export async function getTalosVersions(opts: {nodes: string[]; talosconfig: string; timeoutMs?: number}): Promise<Map<string, string | TalosctlError>> {
  return askNodes(opts, {action: 'talosctl version', args: ['version'], errorPrefix: 'error getting version from node'}, (stdout) => {
    const answers: [string, string][] = []
    let node: string | undefined
    for (const line of (stdout.split(/^Server:$/m)[1] ?? '').split('\n')) {
      const [, key, value] = /^\s*([A-Za-z ]+):\s*(.*?)\s*$/.exec(line) ?? []
      if (key === 'NODE') node = value
      else if (key === 'Tag' && node) answers.push([node, value!])
    }
    return answers
  })
}

/**
 * One talosctl call for several nodes (`--nodes a,b,c`, talosctl's multiplexing): per node, what
 * `parse` read from stdout, or the error stderr gives it ("<errorPrefix> <ip>: <error>"). A node
 * named in neither (the call timed out) is absent; nothing at all (no talosctl, no talosconfig):
 * the command's error, as the first node's.
 */
async function askNodes<T>(
  opts: {nodes: string[]; talosconfig: string; timeoutMs?: number},
  call: {action: string; args: string[]; errorPrefix: string},
  parse: (stdout: string) => [string, T][],
): Promise<Map<string, T | TalosctlError>> {
  const [first] = opts.nodes
  const answers = new Map<string, T | TalosctlError>()
  if (first === undefined) return answers
  const result = await exec(
    talosctlPath(),
    [...call.args, '--nodes', opts.nodes.join(','), '--endpoints', first, '--talosconfig', opts.talosconfig],
    opts.timeoutMs ?? 30_000,
  )
  if (result.timedOut) return answers
  for (const [node, value] of parse(result.stdout)) if (opts.nodes.includes(node) && !answers.has(node)) answers.set(node, value)
  for (const line of result.stderr.split('\n')) {
    const m = new RegExp(`^${call.errorPrefix} (\\S+): (.*)$`).exec(line.trim())
    if (m && opts.nodes.includes(m[1]!) && !answers.has(m[1]!)) answers.set(m[1]!, new TalosctlError(m[1], call.action, m[2]!))
  }
  if (answers.size === 0 && result.exitCode !== 0) answers.set(first, new TalosctlError(first, call.action, talosctlMessage(result.stderr || result.stdout)))
  return answers
}

/**
 * The manifest ids the node's ManifestApplyController last ran with (`get manifeststatus`:
 * spec.manifestsApplied of the ManifestStatus resource, written after each run, Talos
 * v1.12 and later). Inline manifests are listed as `99-<name>`. Undefined when the node has
 * no status (a worker, or no run yet).
 */
export async function getManifestsApplied(opts: {node: string; talosconfig: string}): Promise<string[] | undefined> {
  const out = await run(['get', 'manifeststatus', '--output', 'yaml', ...nodeFlags(opts.node, opts.talosconfig)], {
    node: opts.node,
    action: 'talosctl get manifeststatus',
  })
  const status = parseAllDocuments(out)
    .map((doc) => doc.toJS() as {metadata?: {id?: string}; spec?: {manifestsApplied?: unknown}} | null)
    .find((r) => r?.metadata?.id === 'manifests')
  const applied = status?.spec?.manifestsApplied
  return Array.isArray(applied) ? applied.map(String) : status ? [] : undefined
}

/**
 * A node's disks (`get disks`: Disks.block.talos.dev; the spec's dev_path, size, model, serial,
 * wwid, transport, symlinks…). A node in maintenance mode answers without a client certificate
 * (the resource is non-sensitive).
 */
export async function listDisks(opts: {node: string; talosconfig?: string}): Promise<DiskRecord[]> {
  const target = opts.talosconfig ? nodeFlags(opts.node, opts.talosconfig) : ['--insecure', '--nodes', opts.node, '--endpoints', opts.node]
  const out = await run(['get', 'disks', '--output', 'yaml', ...target], {node: opts.node, action: 'talosctl get disks', timeoutMs: 20_000})
  return parseAllDocuments(out)
    .map((doc) => diskRecordOf(doc.toJS()))
    .filter((d): d is DiskRecord => d !== undefined)
}

export interface PatchMachineConfigOptions {
  node: string
  talosconfig: string
  /** A Talos config patch: YAML text (one or more documents, `$patch: delete` allowed). */
  patch: string
  mode: 'no-reboot'
}

export async function patchMachineConfig(opts: PatchMachineConfigOptions): Promise<void> {
  await withPrivateTempDir('ichor-talos-patch-', async (dir) => {
    const file = join(dir, 'patch.yaml')
    await writeFile(file, opts.patch, {mode: 0o600})
    await run(['patch', 'machineconfig', '--patch', `@${file}`, '--mode', opts.mode, ...nodeFlags(opts.node, opts.talosconfig)], {
      node: opts.node,
      action: 'talosctl patch machineconfig',
    })
  })
}

export interface UpgradeK8sOptions {
  /** The control plane talosctl talks to (it finds the other nodes through Kubernetes). */
  node: string
  talosconfig: string
  /** Kubernetes version without the `v`. */
  to: string
  dryRun: boolean
  timeoutMs: number
  /** Each line talosctl prints, as it prints it. */
  onLine?: (line: string) => void
}

/**
 * `talosctl upgrade-k8s --to VERSION` (with `--dry-run`: its plan, the manifest diffs and the
 * objects it would prune, nothing changed). What it printed (stdout, then stderr).
 */
export async function upgradeK8s(opts: UpgradeK8sOptions): Promise<string> {
  const args = ['upgrade-k8s', '--to', opts.to, ...nodeFlags(opts.node, opts.talosconfig)]
  if (opts.dryRun) args.push('--dry-run')
  return run(args, {
    node: opts.node,
    action: `talosctl upgrade-k8s${opts.dryRun ? ' --dry-run' : ''} --to ${opts.to}`,
    timeoutMs: opts.timeoutMs,
    onLine: opts.onLine,
  })
}

export interface UpgradeTalosOptions {
  node: string
  talosconfig: string
  /** The installer image at the target tag. */
  image: string
  /** The whole call: pull, install, drain, reboot, the wait for the Node, uncordon. */
  timeoutMs: number
  /** How long the drain may take (talosctl's --drain-timeout). */
  drainTimeoutMs: number
  onLine?: (line: string) => void
}

/**
 * `talosctl upgrade --image IMAGE` on one node, addressed through itself. talosctl v1.14
 * (cmd/talosctl/cmd/talos/upgrade.go, LifecycleService path) pulls and installs the image into
 * the other boot slot, cordons and drains the Node itself (--drain, on by default), reboots the
 * node, waits for it, waits for the Node to be Ready and uncordons it. Whether the node booted
 * the new version is not its concern: the caller asks the node afterwards.
 */
export async function upgradeTalos(opts: UpgradeTalosOptions): Promise<string> {
  const drainTimeout = `${Math.max(1, Math.round(opts.drainTimeoutMs / 1000))}s`
  return run(['upgrade', '--image', opts.image, '--drain-timeout', drainTimeout, ...nodeFlags(opts.node, opts.talosconfig)], {
    node: opts.node,
    action: `talosctl upgrade --image ${opts.image}`,
    timeoutMs: opts.timeoutMs,
    onLine: opts.onLine,
    withStderr: true,
  })
}

export interface EtcdMemberStatus {
  node: string
  member: string
  learner: boolean
  /** What etcd's Status answered in `errors` (an alarm, a raft problem); empty when healthy. */
  errors: string
}

/**
 * `talosctl etcd status` of the control planes in one call, as talosctl v1.14 prints it
 * (cmd/talosctl/cmd/talos/etcd.go etcdStatusCmd): a table of one row per node that answered
 * (columns NODE, MEMBER, DB SIZE, IN USE, LEADER, RAFT INDEX, RAFT TERM, RAFT APPLIED INDEX,
 * LEARNER, PROTOCOL, STORAGE, ERRORS, padded by at least 3 spaces), and on stderr "error from
 * node <ip>: <error>" for each that did not. A node named in neither is absent.
 */
export async function getEtcdStatus(opts: {nodes: string[]; talosconfig: string; timeoutMs?: number}): Promise<Map<string, EtcdMemberStatus | TalosctlError>> {
  return askNodes(opts, {action: 'talosctl etcd status', args: ['etcd', 'status'], errorPrefix: 'error from node'}, (stdout) =>
    parseEtcdStatusTable(stdout).map((row): [string, EtcdMemberStatus] => [row.node, row]),
  )
}

/**
 * The members of `nodes` that etcd would not count as started and voting, each with why: no
 * answer, talosctl's error, a learner, or the errors its Status reports.
 */
export function unhealthyEtcdMembers(nodes: readonly string[], status: Map<string, EtcdMemberStatus | TalosctlError>, learner = 'is a learner'): string[] {
  const sick: string[] = []
  for (const node of nodes) {
    const s = status.get(node)
    if (s === undefined) sick.push(`${node}: no answer in time`)
    else if (s instanceof TalosctlError) sick.push(`${node}: ${s.talosctlMessage}`)
    else if (s.learner) sick.push(`${node}: member ${s.member} ${learner}`)
    else if (s.errors) sick.push(`${node}: member ${s.member} reports ${s.errors}`)
  }
  return sick
}

/** The rows of `talosctl etcd status`'s table. */
export function parseEtcdStatusTable(stdout: string): EtcdMemberStatus[] {
  return tableRows(stdout, /^NODE\s+MEMBER\s+/).map((r) => ({node: r.NODE!, member: r.MEMBER!, learner: r.LEARNER === 'true', errors: r.ERRORS ?? ''}))
}

/** A talosctl tabwriter table (padding 3; a cell holds single spaces at most), each row by its header's column offsets. */
function tableRows(stdout: string, header: RegExp): Record<string, string>[] {
  const lines = stdout.split('\n')
  const at = lines.findIndex((l) => header.test(l))
  if (at < 0) return []
  const columns = [...lines[at]!.matchAll(/\S+(?: \S+)*/g)].map((m) => ({name: m[0], at: m.index}))
  return lines
    .slice(at + 1)
    .filter((l) => l.trim())
    .map((l) => Object.fromEntries(columns.map((c, i) => [c.name, l.slice(c.at, columns[i + 1]?.at ?? l.length).trim()])))
}

export interface EtcdMember {
  id: string
  hostname: string
  peerUrls: string[]
  learner: boolean
}

/**
 * `talosctl etcd members` asked of one control plane: its member's view of the cluster
 * (EtcdMemberList with QueryLocal), as talosctl v1.14 prints it (cmd/talosctl/cmd/talos/etcd.go
 * etcdMemberListCmd): columns NODE, ID, HOSTNAME, PEER URLS, CLIENT URLS, LEARNER.
 */
export async function getEtcdMembers(opts: {node: string; talosconfig: string; timeoutMs?: number}): Promise<EtcdMember[]> {
  const out = await run(['etcd', 'members', ...nodeFlags(opts.node, opts.talosconfig)], {
    node: opts.node,
    action: 'talosctl etcd members',
    timeoutMs: opts.timeoutMs ?? 30_000,
  })
  return tableRows(out, /^NODE\s+ID\s+/).map((r) => ({
    id: r.ID!,
    hostname: r.HOSTNAME!,
    peerUrls: (r['PEER URLS'] ?? '').split(',').filter(Boolean),
    learner: r.LEARNER === 'true',
  }))
}

/** What `talosctl etcd snapshot` says of the snapshot it saved (etcdutl's snapshot Status). */
export interface EtcdSnapshotInfo {
  bytes: number
  /** The snapshot's hash as talosctl prints it (%08x). */
  hash: string
  revision: number
  totalKeys: number
  totalSize: number
}

/**
 * `talosctl etcd snapshot PATH` from one control plane: machined streams its member's snapshot
 * (the etcd Maintenance API), talosctl writes it to PATH.part, checks etcd's sha256 trailer,
 * renames it to PATH and prints two lines (cmd/talosctl/cmd/talos/etcd.go etcdSnapshotCmd, v1.14):
 * `etcd snapshot saved to "PATH" (N bytes)` and `snapshot info: hash %08x, revision %d, total
 * keys %d, total size %d`.
 */
export async function etcdSnapshot(opts: {node: string; talosconfig: string; outPath: string; timeoutMs: number}): Promise<EtcdSnapshotInfo> {
  const out = await run(['etcd', 'snapshot', opts.outPath, ...nodeFlags(opts.node, opts.talosconfig)], {
    node: opts.node,
    action: 'talosctl etcd snapshot',
    timeoutMs: opts.timeoutMs,
  })
  return parseEtcdSnapshotOutput(out, opts.node)
}

export function parseEtcdSnapshotOutput(stdout: string, node?: string): EtcdSnapshotInfo {
  const saved = /etcd snapshot saved to ".*" \((\d+) bytes\)/.exec(stdout)
  const info = /snapshot info: hash ([0-9a-f]+), revision (\d+), total keys (\d+), total size (\d+)/.exec(stdout)
  if (!saved || !info)
    throw new TalosctlError(node, 'talosctl etcd snapshot', `its output does not say what it saved: ${firstLine(stdout.trim()) || '(nothing)'}`)
  return {bytes: Number(saved[1]), hash: info[1]!, revision: Number(info[2]), totalKeys: Number(info[3]), totalSize: Number(info[4])}
}

/**
 * `talosctl etcd leave` on the node itself: Talos removes its member, stops etcd and empties its
 * data (internal/pkg/etcd/etcd.go LeaveCluster, v1.14). etcd refuses when the members left would
 * lose quorum; the error is the caller's to stop on.
 */
export async function etcdLeave(opts: {node: string; talosconfig: string; timeoutMs: number}): Promise<void> {
  await run(['etcd', 'leave', ...nodeFlags(opts.node, opts.talosconfig)], {node: opts.node, action: 'talosctl etcd leave', timeoutMs: opts.timeoutMs})
}

/**
 * `talosctl etcd remove-member ID` asked of a control plane that stays: the member of a machine
 * that cannot leave itself (it no longer answers) is removed through the control planes' etcd
 * (machined EtcdRemoveMemberByID, v1.14). etcd refuses when the members left would lose quorum.
 */
export async function etcdRemoveMember(opts: {node: string; talosconfig: string; memberId: string; timeoutMs: number}): Promise<void> {
  await run(['etcd', 'remove-member', opts.memberId, ...nodeFlags(opts.node, opts.talosconfig)], {
    node: opts.node,
    action: 'talosctl etcd remove-member',
    timeoutMs: opts.timeoutMs,
  })
}

/**
 * `talosctl reset --graceful --reboot` through the node's own endpoint: Talos cordons and
 * drains, leaves etcd on a control plane, wipes the system disk and reboots into maintenance
 * mode; talosctl waits until the node answers there (cmd/talosctl/cmd/talos/reset.go, v1.14).
 */
export async function resetNode(opts: {node: string; talosconfig: string; timeoutMs: number; onLine?: (line: string) => void}): Promise<string> {
  return run(['reset', '--graceful', '--reboot', '--wait', ...nodeFlags(opts.node, opts.talosconfig)], {
    node: opts.node,
    action: 'talosctl reset --graceful --reboot',
    timeoutMs: opts.timeoutMs,
    onLine: opts.onLine,
    withStderr: true,
  })
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path)
    return true
  } catch {
    return false
  }
}
