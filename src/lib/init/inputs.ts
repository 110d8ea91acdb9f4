// `ichor init` inputs: every flag checked before anything touches a node, all problems
// reported together, each naming its flag and what is accepted.
import {ValidationError, IchorError, type Issue} from '../errors/errors.js'
import {KUBE_PROXY_MODES, type KubeProxyMode, TUNNEL_PROTOCOLS, type TunnelProtocol} from '../state/installation-types.js'
import {
  DEFAULT_TALOS_VERSION,
  defaultKubernetesVersion,
  parseKubernetesVersion,
  parseTalosVersion,
  requireCompatibleKubernetesVersion,
  requireSupportedTalosVersion,
  type KubernetesVersion,
  type TalosVersion,
} from '../talos/versions.js'
import {describeSelector} from '../talos/disk-selector.js'
import {installDiskFlag, installDiskFor, readMachineConfigFlags, type MachineConfigFlags, type TalosClusterSpec} from '../talos/machine-config.js'
import {nodeProblem} from '../talos/node-address.js'

export interface InitFlags {
  clusterName?: string
  endpoint?: string
  controlPlanes: string[]
  workers: string[]
  talosVersion?: string
  kubernetesVersion?: string
  kubeProxy?: string
  tunnel?: string
  /** --install-disk, --install-image, --config-patch*, --node-patch. */
  machineConfig?: MachineConfigFlags
}

/** The cluster's Talos side (machine-config inputs included), and the CNI modes. */
export interface InitInputs extends TalosClusterSpec {
  kubeProxy: KubeProxyMode
  tunnel: TunnelProtocol
}

const CLUSTER_NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/

export function checkInitInputs(flags: InitFlags, opts: {requireNodes: boolean; ciliumVersion?: string}): InitInputs {
  const issues: Issue[] = []
  const issue = (path: string, message: string) => issues.push({path, message})

  const nameProblem = clusterNameProblem(flags.clusterName)
  if (nameProblem) issue('--cluster-name', nameProblem)

  let endpoint = ''
  const endpointCheck = checkEndpoint(flags.endpoint)
  if ('problem' in endpointCheck) issue('--endpoint', endpointCheck.problem)
  else endpoint = endpointCheck.endpoint

  const controlPlanes = splitNodeList(flags.controlPlanes)
  const workers = splitNodeList(flags.workers)
  const seen = new Map<string, string>()
  for (const [flag, list] of [
    ['--control-plane', controlPlanes],
    ['--worker', workers],
  ] as const) {
    for (const node of list) {
      const problem = nodeProblem(node)
      if (problem) issue(flag, problem)
      else if (seen.has(node)) issue(flag, `"${node}" is given twice (already as ${seen.get(node)})`)
      else seen.set(node, flag)
    }
  }
  if (opts.requireNodes && controlPlanes.length === 0) issue('--control-plane', 'at least one control-plane node is required (repeat the flag for more)')

  let talosVersion: TalosVersion | undefined
  let kubernetesVersion: KubernetesVersion | undefined
  try {
    talosVersion = requireSupportedTalosVersion(parseTalosVersion(flags.talosVersion ?? DEFAULT_TALOS_VERSION))
  } catch (error) {
    issue('--talos-version', stripFlag(error, '--talos-version'))
  }
  try {
    kubernetesVersion = parseKubernetesVersion(flags.kubernetesVersion ?? defaultKubernetesVersion(talosVersion?.tag, opts.ciliumVersion))
    if (talosVersion) kubernetesVersion = requireCompatibleKubernetesVersion(talosVersion, kubernetesVersion)
  } catch (error) {
    issue('--kubernetes-version', stripFlag(error, '--kubernetes-version'))
  }
  const kubeProxy = flags.kubeProxy ?? 'replaced'
  if (!KUBE_PROXY_MODES.includes(kubeProxy as KubeProxyMode)) issue('--kube-proxy', `"${kubeProxy}" is not a mode (accepted: ${KUBE_PROXY_MODES.join(', ')})`)
  const tunnel = flags.tunnel ?? 'vxlan'
  if (!TUNNEL_PROTOCOLS.includes(tunnel as TunnelProtocol)) issue('--tunnel', `"${tunnel}" is not a tunnel protocol (accepted: ${TUNNEL_PROTOCOLS.join(', ')})`)

  const machineConfig = readMachineConfigFlags(flags.machineConfig ?? {}, {controlPlanes, workers}, issues)

  if (issues.length > 0) throw new ValidationError('ichor init: invalid input', issues)
  return {
    machineConfig,
    clusterName: flags.clusterName!,
    endpoint,
    controlPlanes,
    workers,
    talosVersion: talosVersion!,
    kubernetesVersion: kubernetesVersion!,
    kubeProxy: kubeProxy as KubeProxyMode,
    tunnel: tunnel as TunnelProtocol,
  }
}

/**
 * What is accepted but unwise, said on stderr and in the --json result's `warnings`. An even
 * number of control planes: etcd needs a majority, so n+1 members (n odd) tolerate no more
 * failed members than n do (etcd-io/etcd Documentation/faq.md, "Why an odd number of cluster members?").
 */
export function initInputWarnings(inputs: Pick<InitInputs, 'controlPlanes'>): string[] {
  const n = inputs.controlPlanes.length
  if (n === 0 || n % 2 !== 0) return []
  const tolerated = Math.floor((n - 1) / 2)
  return [
    `--control-plane: ${n} control planes tolerate ${tolerated} failed (etcd needs a majority), no more than ${n - 1} do; an odd number (${n - 1} or ${n + 1}) is advised`,
  ]
}

// Per-field checks, shared by the flags (above) and the prompts (prompts.ts) so both accept
// the same forms. Each returns what is wrong and what is accepted, or undefined.

export function clusterNameProblem(name: string | undefined): string | undefined {
  if (!name) return 'is required (lower-case letters, digits and "-", at most 63, e.g. homelab)'
  if (!CLUSTER_NAME.test(name))
    return `"${name}" is not a DNS-1123 label (lower-case letters, digits and "-", at most 63 characters, starting and ending alphanumeric)`
  return undefined
}

/** The endpoint normalised to https://HOST:PORT, or what is wrong with it. */
export function checkEndpoint(input: string | undefined): {endpoint: string} | {problem: string} {
  if (!input) return {problem: 'is required: the Kubernetes API endpoint, e.g. https://192.0.2.10:6443'}
  try {
    const url = new URL(input)
    if (url.protocol !== 'https:') return {problem: `"${input}" must use https:// (the Kubernetes API is served over TLS)`}
    if (url.pathname !== '/' || url.search || url.hash) return {problem: `"${input}" must be scheme://host[:port] with no path`}
    return {endpoint: `https://${url.host}${url.port ? '' : ':6443'}`}
  } catch {
    return {problem: `"${input}" is not a URL (expected https://HOST:PORT, e.g. https://192.0.2.10:6443)`}
  }
}

/** Node lists as flags (repeated, or comma lists) and prompts (commas or spaces) give them. */
export function splitNodeList(values: readonly string[] | string): string[] {
  return (typeof values === 'string' ? [values] : values).flatMap((v) => v.split(/[\s,]+/)).filter(Boolean)
}

function stripFlag(error: unknown, flag: string): string {
  if (!(error instanceof IchorError)) throw error
  return error.message.replace(new RegExp(`^${flag}:\\s*`), '')
}

/**
 * Install disks Talos would refuse or never install onto (machine.install beside v1.14's
 * UnattendedInstallConfig, an UnattendedInstallConfig deleted with no machine.install), per node:
 * offline, so a run refuses them (exit 2) before it asks to go ahead.
 */
export function installDiskProblems(inputs: InitInputs): Issue[] {
  const nodes = [...inputs.controlPlanes.map((n) => [n, 'controlplane'] as const), ...inputs.workers.map((n) => [n, 'worker'] as const)]
  const issues = nodes.flatMap(([node, role]) => {
    const {problem, from} = installDiskFor(inputs.machineConfig, node, role, inputs.talosVersion)
    return problem ? [{path: installDiskFlag(from), message: problem}] : []
  })
  const seen = new Set<string>()
  return issues.filter((i) => !seen.has(i.message) && seen.add(i.message))
}

/** "Talos will be installed onto DISK of NODE; its contents are erased", one line per node (configured nodes keep theirs). */
export function installDiskLines(inputs: InitInputs): string[] {
  const nodes = [...inputs.controlPlanes.map((n) => [n, 'controlplane'] as const), ...inputs.workers.map((n) => [n, 'worker'] as const)]
  return nodes.map(([node, role]) => {
    const {disk, selector, from} = installDiskFor(inputs.machineConfig, node, role, inputs.talosVersion)
    return disk
      ? `Talos will be installed onto ${disk} of ${node} (${from}); its contents are erased (a node already configured keeps its installation)`
      : `Talos will be installed onto the disk that ${selector ? describeSelector(selector) : 'nothing'} (${from}) selects on ${node}; its contents are erased`
  })
}
