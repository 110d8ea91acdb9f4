// `ichor talos status`: what each node runs (its Talos version, the Kubernetes version of its
// machine config) against what the IchorInstallation records, so a node upgraded by hand or one
// that does not answer shows before an init rerun or an upgrade trips on it. Read-only: one
// `talosctl version` call and one `get machineconfig` call for all the nodes.
import {parseAllDocuments} from 'yaml'
import type {Installation} from '../state/installation.js'
import type {TalosAccess} from './access.js'
import {TalosctlError} from './talosctl.js'
import {kubernetesVersionOfConfig} from './versions.js'

export interface TalosNodeStatus {
  node: string
  role: 'controlplane' | 'worker'
  /** The Talos version the node says it runs (`talosctl version`). */
  talosVersion?: string
  /** A control plane's API server version, a worker's kubelet version, from its machine config. */
  kubernetesVersion?: string
  /** Why the node could not be read. */
  error?: string
}

export interface TalosProblem {
  /** error: a node does not answer (exit 1); warning: the nodes and the record disagree. */
  severity: 'error' | 'warning'
  what: string
  fix: string
}

export interface TalosStatusReport {
  healthy: boolean
  cluster: string
  /** What the IchorInstallation records: init installs new nodes at these. */
  recorded: {talosVersion: string; kubernetesVersion: string}
  nodes: TalosNodeStatus[]
  problems: TalosProblem[]
}

/** Reads the nodes the IchorInstallation names through the run's Talos access. */
export async function readTalosStatus(talos: TalosAccess): Promise<TalosStatusReport> {
  const cr = await talos.installation()
  const nodes = [...cr.spec.talos.controlPlanes, ...cr.spec.talos.workers]
  // Both calls at once; the configs of all the nodes go out as one talosctl call (node-reads.ts).
  const [versions, configs] = await Promise.all([
    talos.runningVersions(nodes),
    Promise.all(nodes.map((node) => talos.machineConfig(node).catch((error: unknown) => errorOf(error)))),
  ])
  return talosStatusOf(cr, new Map(versions), new Map(nodes.map((node, i) => [node, configs[i]!])))
}

function errorOf(error: unknown): TalosctlError {
  if (error instanceof TalosctlError) return error
  throw error
}

/** The report from what the nodes answered: each node's versions, and what disagrees with the record. */
export function talosStatusOf(
  cr: Pick<Installation, 'spec'>,
  versions: Map<string, string | TalosctlError>,
  configs: Map<string, string | TalosctlError>,
): TalosStatusReport {
  const {talos} = cr.spec
  const recorded = {talosVersion: talos.talosVersion, kubernetesVersion: talos.kubernetesVersion}
  const nodes: TalosNodeStatus[] = [
    ...talos.controlPlanes.map((node) => ({node, role: 'controlplane' as const})),
    ...talos.workers.map((node) => ({node, role: 'worker' as const})),
  ].map(({node, role}) => {
    const version = versions.get(node)
    const config = configs.get(node)
    const status: TalosNodeStatus = {node, role}
    if (typeof version === 'string') status.talosVersion = version
    if (typeof config === 'string') status.kubernetesVersion = role === 'controlplane' ? kubernetesVersionOfConfig(config) : kubeletVersionOfConfig(config)
    const failed = [version, config].find((x) => x instanceof TalosctlError) ?? (version === undefined ? 'no answer in time' : undefined)
    if (failed) status.error = failed instanceof TalosctlError ? failed.talosctlMessage : failed
    return status
  })
  const problems: TalosProblem[] = []
  for (const n of nodes.filter((n) => n.error))
    problems.push({
      severity: 'error',
      what: `${n.role} ${n.node} does not answer: ${n.error}`,
      fix: `check the node and its address (talosctl -n ${n.node} version)`,
    })
  problems.push(...disagreements(nodes, 'talosVersion', recorded.talosVersion, 'Talos'))
  problems.push(...disagreements(nodes, 'kubernetesVersion', recorded.kubernetesVersion, 'Kubernetes'))
  return {healthy: !problems.some((p) => p.severity === 'error'), cluster: talos.clusterName, recorded, nodes, problems}
}

/**
 * Nodes whose Talos version (as `talosctl version` answered) is not the recorded one, with the
 * command that records it: `cni status` says it too, from the same rule.
 */
export function talosVersionDisagreements(cr: Pick<Installation, 'spec'>, versions: Map<string, string | TalosctlError>): TalosProblem[] {
  const nodes = [...cr.spec.talos.controlPlanes, ...cr.spec.talos.workers].map((node) => {
    const v = versions.get(node)
    return {node, talosVersion: typeof v === 'string' ? v : undefined}
  })
  return disagreements(nodes, 'talosVersion', cr.spec.talos.talosVersion, 'Talos')
}

/** Nodes that run another version than the recorded one, grouped by the version they run. */
function disagreements(
  nodes: Pick<TalosNodeStatus, 'node' | 'talosVersion' | 'kubernetesVersion'>[],
  key: 'talosVersion' | 'kubernetesVersion',
  recorded: string,
  what: 'Talos' | 'Kubernetes',
): TalosProblem[] {
  const bare = (v: string) => v.replace(/^v/, '')
  const byVersion = new Map<string, string[]>()
  for (const n of nodes) {
    const v = n[key]
    if (v !== undefined && bare(v) !== bare(recorded)) byVersion.set(v, [...(byVersion.get(v) ?? []), n.node])
  }
  return [...byVersion].map(([version, on]) => ({
    severity: 'warning' as const,
    what: `${on.join(', ')} ${on.length > 1 ? 'run' : 'runs'} ${what} ${version}; the IchorInstallation records ${recorded} (changed outside ichor)`,
    fix:
      what === 'Talos'
        ? `an init rerun installs new nodes at ${recorded}: ichor talos upgrade --to ${version} records the version these nodes run (without touching them) and brings the others to it`
        : `ichor kubernetes upgrade --to ${bare(version)} records it (talosctl upgrade-k8s alone does not)`,
  }))
}

/**
 * A worker's Kubernetes version: its kubelet image's tag, from Talos v1.14's KubeletConfig
 * document (`image`, as talosctl v1.14.1 gen config writes it) or v1alpha1's machine.kubelet.image.
 */
export function kubeletVersionOfConfig(configYaml: string): string | undefined {
  type Doc = {kind?: unknown; image?: string; machine?: {kubelet?: {image?: string}}}
  const docs = parseAllDocuments(configYaml).map((d) => d.toJS() as Doc | null)
  const image = docs.find((d) => d?.kind === 'KubeletConfig')?.image ?? docs.find((d) => d && !d.kind)?.machine?.kubelet?.image
  return image ? /:v?(\d+\.\d+\.\d+)(?:@.*)?$/.exec(image)?.[1] : undefined
}
