// `ichor status`: the whole cluster at a glance, read-only and fast. Every read is a GET or a
// LIST of what the other status commands read in depth (`cni status`, `stack status`, `talos
// status`), plus one `talosctl version` for all nodes when this machine has a talosconfig; no
// helm, no registry, no dry-run apply, no Lease. What is unhealthy is named in `problems`.
import {CILIUM_RELEASE} from '../constants.js'
import {readCiliumRelease} from '../cilium/reads.js'
import type {Kube} from '../kube/client.js'
import {readLease} from '../kube/lease.js'
import {listObjects} from '../kube/objects.js'
import {readWorkloadRollout} from '../kube/reads.js'
import {isReady, type NodeObject} from '../nodes/kube-nodes.js'
import {readApplication} from '../stack/delivery.js'
import {readAwaitingApproval} from '../stack/promote.js'
import {STACK_COMPONENTS, type KubeProxyMode, type PromotionMode, type StackComponent} from '../state/installation-types.js'
import type {TalosAccess} from '../talos/access.js'
import {getTalosVersions} from '../talos/talosctl.js'
import {oldestOf, planToDefault} from '../upgrade-path/planner.js'

export interface NodeStatus {
  address: string
  role: 'controlplane' | 'worker'
  /** The Node's name; undefined when no Node carries the address. */
  name?: string
  ready: boolean
  /** What the node's Talos says it runs; undefined when it was not asked (no talosconfig) or did not answer. */
  talos?: string
  /** The kubelet version the Node reports. */
  kubelet?: string
}

export interface ComponentOverview {
  component: StackComponent
  sync?: string
  health?: string
  /** The bundle revision (Preparation digest) the Application serves. */
  served?: string
  /** Promotion Manual: the Preparation that waits for `ichor stack promote`. */
  waitsForApproval?: string
}

export interface ClusterStatus {
  healthy: boolean
  cluster: {name: string; endpoint: string}
  nodes: NodeStatus[]
  /** The API server's version (`kubectl version`'s server), without the `v`. */
  kubernetes?: string
  cilium: {
    chart?: string
    release?: string
    revision?: number
    kubeProxy: KubeProxyMode
    agents?: {ready: number; desired: number}
    operator?: {ready: number; desired: number}
  }
  stack: {promotion: PromotionMode; components: ComponentOverview[]}
  /** The ichor command that holds the Lease now, if any. */
  lease?: {holder: string; expiresAt?: string}
  /** The first hop of `ichor upgrade plan` toward the default set; undefined when there is none. */
  nextUpgrade?: {command: string; why: string}
  /** What makes the cluster unhealthy (exit 1), each naming the thing. */
  problems: string[]
  /** What was not read, and why (the verdict stands without it). */
  warnings: string[]
}

export async function readClusterStatus(p: {kube: Kube; talos: TalosAccess}): Promise<ClusterStatus> {
  const {kube} = p
  const cr = await p.talos.installation()
  const spec = cr.spec.talos
  const addresses = [...spec.controlPlanes, ...spec.workers]
  const warnings: string[] = []
  const talosconfig = await p.talos.localTalosconfig()
  if (!talosconfig) warnings.push('Talos versions not read: no talosconfig on this machine (--talosconfig FILE or --state-dir DIR)')
  const ns = CILIUM_RELEASE.namespace
  const [nodes, talosVersions, release, agents, operator, lease, components] = await Promise.all([
    listObjects<NodeObject & {status?: {nodeInfo?: {kubeletVersion?: string}}}>(kube, {apiVersion: 'v1', kind: 'Node'}),
    talosconfig ? getTalosVersions({nodes: addresses, talosconfig}) : Promise.resolve(undefined),
    readCiliumRelease(kube),
    readWorkloadRollout(kube, 'DaemonSet', ns, 'cilium'),
    readWorkloadRollout(kube, 'Deployment', ns, 'cilium-operator'),
    readLease(kube),
    Promise.all(STACK_COMPONENTS.map((c) => readComponent(kube, c))),
  ])
  const problems: string[] = []
  const nodeStatus = addresses.map((address): NodeStatus => {
    const node = nodes.find((n) => n.status?.addresses?.some((a) => a.type === 'InternalIP' && a.address === address))
    const talos = talosVersions?.get(address)
    const role = spec.controlPlanes.includes(address) ? 'controlplane' : 'worker'
    if (!node) problems.push(`node ${address} (${role}) has no Node in Kubernetes`)
    else if (!isReady(node)) problems.push(`node ${address} (${node.metadata.name}) is not Ready`)
    if (talos instanceof Error) problems.push(`node ${address}: Talos did not answer (${talos.message.split('\n')[0]})`)
    return {
      address,
      role,
      ...(node ? {name: node.metadata.name} : {}),
      ready: node ? isReady(node) : false,
      ...(typeof talos === 'string' ? {talos} : {}),
      ...(node?.status?.nodeInfo?.kubeletVersion ? {kubelet: node.status.nodeInfo.kubeletVersion.replace(/^v(?=\d)/, '')} : {}),
    }
  })
  // What `kubectl version` calls the server's.
  const serverVersion = kube.serverVersion ?? (await kube.request<{gitVersion?: string}>('GET', '/version')).gitVersion
  const kubernetes = serverVersion ? releaseOf(serverVersion) : undefined

  if (!release) problems.push(`no Helm release ${ns}/${CILIUM_RELEASE.name}: run ichor init`)
  else if (release.status !== 'deployed') problems.push(`Cilium release revision ${release.revision} is ${release.status}: see ichor cni status`)
  for (const [what, w] of [
    ['the Cilium agents (DaemonSet cilium)', agents],
    ['the Cilium operator', operator],
  ] as const)
    if (!w?.rolledOut) problems.push(`${what} ${w ? `${w.ready}/${w.desired} ready (${w.state})` : 'do not exist'}: see ichor cni status`)

  for (const c of components) {
    if (c.health !== 'Healthy' || c.sync !== 'Synced')
      problems.push(`Application argocd/${c.component} is ${c.sync ?? 'absent'}/${c.health ?? 'absent'}: see ichor stack status`)
  }
  const held = lease?.holder && lease.expiresAt && lease.expiresAt.getTime() > Date.now() ? lease : undefined
  const chart = release?.chartVersion ?? cr.status?.cni?.chartVersion
  // An upgrade starts from the oldest of what runs (the API server and the kubelets; the nodes' Talos).
  const oldestKubernetes = oldestOf([kubernetes, ...nodeStatus.map((n) => n.kubelet && releaseOf(n.kubelet))]) ?? spec.kubernetesVersion
  const hop = chart
    ? planToDefault({talos: oldestOf(nodeStatus.map((n) => n.talos)) ?? spec.talosVersion, kubernetes: oldestKubernetes, cilium: chart}).hops[0]
    : undefined
  return {
    healthy: problems.length === 0,
    cluster: {name: spec.clusterName, endpoint: spec.endpoint},
    nodes: nodeStatus,
    ...(kubernetes ? {kubernetes} : {}),
    cilium: {
      ...(chart ? {chart} : {}),
      ...(release ? {release: release.status, revision: release.revision} : {}),
      kubeProxy: cr.spec.cni.kubeProxy,
      ...(agents ? {agents: {ready: agents.ready, desired: agents.desired}} : {}),
      ...(operator ? {operator: {ready: operator.ready, desired: operator.desired}} : {}),
    },
    stack: {promotion: cr.spec.stack.promotion ?? 'Automatic', components},
    ...(held ? {lease: {holder: held.holder!, ...(held.expiresAt ? {expiresAt: held.expiresAt.toISOString()} : {})}} : {}),
    ...(hop ? {nextUpgrade: {command: hop.command, why: hop.why}} : {}),
    problems,
    warnings,
  }
}

/** "1.36.3" of "v1.36.3" or "v1.36.3+k3s1"; undefined for what is no release version (a fake kubelet's "kwok-0.8.0"). */
function releaseOf(version: string): string | undefined {
  return /^v?(\d+\.\d+\.\d+)(?:[+-].*)?$/.exec(version)?.[1]
}

async function readComponent(kube: Kube, component: StackComponent): Promise<ComponentOverview> {
  const [app, waiting] = await Promise.all([readApplication(kube, component), readAwaitingApproval(kube, component)])
  return {
    component,
    ...(app?.sync ? {sync: app.sync} : {}),
    ...(app?.health ? {health: app.health} : {}),
    ...(app?.revision ? {served: app.revision} : {}),
    ...(waiting ? {waitsForApproval: waiting.preparation} : {}),
  }
}
