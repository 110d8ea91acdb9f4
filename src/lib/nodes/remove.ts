// What `ichor node remove ADDR` checks and the steps of its plan. Before the Lease: the address
// is a node of this cluster, not the last control plane nor the cluster endpoint, not the last
// worker when the control planes keep workloads off, and the etcd members that stay keep
// quorum. Then, each step proven by what the cluster and the node say now (so a rerun after a
// kill goes on where it stopped): drain the Node (PodDisruptionBudgets honoured), the member
// leaves etcd through the node itself (a failure stops everything, the node is never reset
// while still a member), reset the node through its own endpoint into maintenance mode, delete
// the Node, check Cilium and the stack, and only then forget the address and its per-node
// patches in the IchorInstallation, so an init rerun does not bring it back.
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import {serverSideApply} from '../kube/apply.js'
import type {Kube} from '../kube/client.js'
import {deleteObject, listObjects} from '../kube/objects.js'
import {waitFor} from '../kube/wait.js'
import type {Session} from '../session/session.js'
import {
  installationCrd,
  readInstallation,
  writeInstallationSpec,
  writeInstallationStatus,
  type Installation,
  type TalosUpgradeStatus,
} from '../state/installation.js'
import type {TalosAccess} from '../talos/access.js'
import {NO_MACHINE_CONFIG_INPUTS, storedMachineConfig} from '../talos/machine-config.js'
import {
  etcdLeave,
  etcdRemoveMember,
  getEtcdMembers,
  getEtcdStatus,
  isReachable,
  resetNode,
  TalosctlError,
  unhealthyEtcdMembers,
  type EtcdMemberStatus,
} from '../talos/talosctl.js'
import {holds, missing} from '../tasks/probe.js'
import type {Task} from '../tasks/types.js'
import {drainNode, podsToEvict, withEmptyDir} from './drain.js'
import {kubeNodeOf, type NodeObject} from './kube-nodes.js'

export interface NodeRemovalInput {
  session: Session
  talos: TalosAccess
  /** The address to remove, as the IchorInstallation names it. */
  node: string
  timeoutMs: number
  /** --unreachable: the machine is gone (a dead disk): its member goes through a control plane that stays, no drain or reset through it. */
  unreachable?: boolean
}

export type NodeRole = 'controlplane' | 'worker'

export interface NodeRemovalJudgement {
  node: string
  role: NodeRole
  /** Its Kubernetes Node's name, when one carries its address. */
  nodeName?: string
  /** The control planes that stay (the etcd members after the removal). */
  remainingControlPlanes: string[]
  /** Where the node is now: configured (to be reset), maintenance (an earlier run reset it), or unreachable (--unreachable). */
  state: 'configured' | 'maintenance' | 'unreachable'
  warnings: string[]
}

const CONTROL_PLANE_TAINT = 'node-role.kubernetes.io/control-plane'
const usage = (message: string, hint?: string) => new IchorError(message, {exitCode: EXIT.usage, hint})

/** What happens to the node that goes, for the question asked before anything runs. */
export function removalSummary(j: NodeRemovalJudgement): string {
  if (j.state === 'unreachable')
    return `it does not answer: ${j.role === 'controlplane' ? 'its etcd member is removed through a control plane that stays and ' : ''}its Node is deleted; the machine itself is not touched`
  return `it is drained${j.role === 'controlplane' ? ', leaves etcd' : ''} and reset to maintenance mode (its disk is wiped)`
}

/** The address rules, from the IchorInstallation and the control planes' Nodes alone (exit 2). */
export function checkNodeRemoval(p: {node: string; cr: Installation; controlPlanesSchedulable: boolean}): {role: NodeRole; remainingControlPlanes: string[]} {
  const {controlPlanes, workers, endpoint} = p.cr.spec.talos
  const role: NodeRole | undefined = controlPlanes.includes(p.node) ? 'controlplane' : workers.includes(p.node) ? 'worker' : undefined
  if (!role) throw usage(`${p.node} is not a node of this cluster (its nodes: ${[...controlPlanes, ...workers].join(', ')})`)
  if (role === 'controlplane' && controlPlanes.length === 1)
    throw usage(
      `${p.node} is the last control plane: removing it ends the cluster (etcd and the Kubernetes API run there)`,
      'add a control plane first (ichor init with one more --control-plane), then remove this one',
    )
  checkNotEndpoint(p.node, endpoint)
  if (role === 'worker' && workers.length === 1 && !p.controlPlanesSchedulable)
    throw usage(
      `${p.node} is the last worker and the control planes keep workloads off (the ${CONTROL_PLANE_TAINT}:NoSchedule taint): the stack would have nowhere to run`,
      'add a worker first (ichor init with one more --worker), then remove this one',
    )
  return {role, remainingControlPlanes: controlPlanes.filter((c) => c !== p.node)}
}

/** The node the cluster endpoint names cannot go: every kubeconfig and node reaches the API through it. */
export function checkNotEndpoint(node: string, endpoint: string): void {
  if (hostOf(endpoint) === node)
    throw usage(
      `${node} is the cluster endpoint (${endpoint}): every kubeconfig and every node reaches the Kubernetes API through it`,
      'move the endpoint to a shared address (a VIP or a DNS name of all control planes) first; ichor does not change the endpoint',
    )
}

/**
 * etcd's own rule for removing a voting member (etcdserver IsReadyToRemoveVotingMember): the
 * members that stay must have a quorum of started members. A member that does not answer, is a
 * learner or reports errors counts as not started.
 */
export function checkEtcdQuorum(
  node: string,
  remaining: string[],
  status: Map<string, EtcdMemberStatus | TalosctlError>,
  /** A member still to join (node replace): counted healthy here, proven a voting member before the leave. */
  joining?: string,
): void {
  const sick = unhealthyEtcdMembers(
    remaining.filter((n) => n !== joining),
    status,
  )
  const quorum = Math.floor(remaining.length / 2) + 1
  const healthy = remaining.length - sick.length
  if (healthy >= quorum) return
  throw usage(
    `removing ${node} would leave etcd without quorum: ${remaining.length} member(s) stay, ${quorum} must be healthy, ${healthy} ${healthy === 1 ? 'is' : 'are'} (${sick.join('; ')})`,
    'bring the members back first (talosctl -n NODE etcd status, talosctl -n NODE service etcd), then rerun',
  )
}

/** The rules, the node's answer and etcd's quorum, before anything runs: a refusal is exit 2. */
export async function judgeNodeRemoval(p: NodeRemovalInput): Promise<NodeRemovalJudgement> {
  const cr = await p.talos.installation()
  const kube = await p.session.kube()
  const nodes = await listObjects<NodeObject>(kube, {apiVersion: 'v1', kind: 'Node'})
  const controlPlaneNodes = nodes.filter((n) => n.metadata.labels?.[CONTROL_PLANE_TAINT] !== undefined)
  const controlPlanesSchedulable = controlPlaneNodes.some((n) => !n.spec?.taints?.some((t) => t.key === CONTROL_PLANE_TAINT && t.effect === 'NoSchedule'))
  const {role, remainingControlPlanes} = checkNodeRemoval({node: p.node, cr, controlPlanesSchedulable})
  return judgeLeavingNode(p, {cr, nodes, role, remainingControlPlanes})
}

/**
 * The node that goes, as it is now: it answers (or is coming back from an earlier run's reset),
 * from this bundle, etcd keeps quorum without it, and what its drain loses. Exit 2 otherwise.
 */
export async function judgeLeavingNode(
  p: NodeRemovalInput,
  o: {cr: Installation; nodes: NodeObject[]; role: NodeRole; remainingControlPlanes: string[]; joining?: string},
): Promise<NodeRemovalJudgement> {
  const {cr, nodes, role, remainingControlPlanes} = o
  const kube = await p.session.kube()
  const talosconfig = await p.talos.talosconfig()
  let reach = await isReachable(p.node, {talosconfig})
  if (p.unreachable && reach.state !== 'unreachable')
    throw usage(
      `${p.node} answers (${reach.state}): --unreachable is for a machine that is gone`,
      'leave out --unreachable: the node is drained, leaves etcd and is reset through its own Talos API',
    )
  // The node an earlier run was resetting may still be rebooting into maintenance mode.
  if (!p.unreachable && reach.state === 'unreachable' && cr.status?.talos?.removing === p.node) reach = await waitForAnswer(p.node, talosconfig, p.timeoutMs)
  if (!p.unreachable && reach.state === 'unreachable')
    throw usage(
      `${p.node} does not answer (${reach.message ?? 'no answer'}): ichor removes a node through its own Talos API (etcd leave, reset)`,
      'bring the machine up and rerun; for a machine that is gone for good (a dead disk) add --unreachable: its etcd member is removed through a control plane that stays and its Node deleted, without a drain or a reset',
    )
  if (reach.state === 'configured' && reach.ours === false) throw usage(`${p.node} was configured from another secrets bundle: it is not this cluster's node`)
  if (role === 'controlplane') {
    const asked = remainingControlPlanes.filter((n) => n !== o.joining)
    const status = asked.length > 0 ? await getEtcdStatus({nodes: asked, talosconfig}) : new Map<string, EtcdMemberStatus | TalosctlError>()
    checkEtcdQuorum(p.node, remainingControlPlanes, status, o.joining)
  }
  const kubeNode = nodes.find((n) => n.status?.addresses?.some((a) => a.type === 'InternalIP' && a.address === p.node))
  const warnings: string[] = []
  if (kubeNode && reach.state === 'unreachable')
    warnings.push(
      `the pods of ${kubeNode.metadata.name} start elsewhere once its Node is deleted; what they kept on the machine (emptyDir, local volumes) is lost with it`,
    )
  else if (kubeNode) {
    const lost = withEmptyDir(await podsToEvict(kube, kubeNode.metadata.name))
    if (lost.length > 0)
      warnings.push(`the drain deletes the emptyDir data of ${lost.join(', ')} (a registry's bundles among them come back with ichor stack sync)`)
  }
  if (role === 'controlplane' && remainingControlPlanes.length === 2 && !o.joining)
    warnings.push('two control planes stay: etcd then tolerates no failure (quorum 2 of 2); add a third soon')
  return {node: p.node, role, nodeName: kubeNode?.metadata.name, remainingControlPlanes, state: reach.state, warnings}
}

async function waitForAnswer(node: string, talosconfig: string, timeoutMs: number, onProgress?: (s: string) => void) {
  return waitFor(
    `${node} to answer after its reset`,
    async () => {
      const r = await isReachable(node, {talosconfig, timeoutMs: 5_000})
      return {done: r.state !== 'unreachable', state: r.state, value: r}
    },
    {timeoutMs, intervalMs: 500, onProgress},
  )
}

/** The status's node part changed over the latest read; the CRD applied first, so an older one takes the field. */
async function updateTalosStatus(kube: Kube, change: (t: TalosUpgradeStatus) => TalosUpgradeStatus): Promise<void> {
  await serverSideApply(kube, [installationCrd()], {crdWait: {timeoutMs: 60_000}})
  const cr = await readInstallation(kube)
  if (!cr) throw new IchorError('the IchorInstallation is gone')
  await writeInstallationStatus(kube, {cni: {}, stack: {}, ...cr.status, talos: change({...cr.status?.talos})}, {readAt: cr})
}

// ---------- the plan's steps ----------

export function checkRemovalTask(j: NodeRemovalJudgement): Task {
  return {
    id: 'check-removal',
    title: `Check that ${j.node} can go: a node of this cluster, not the last control plane, etcd keeps quorum`,
    mutating: false,
    check: true,
    async probe() {
      return holds(`${j.role === 'controlplane' ? 'control plane' : 'worker'} ${j.node}${j.nodeName ? ` (Node ${j.nodeName})` : ''}, ${j.state}`)
    },
    async run() {},
  }
}

export function drainTask(p: NodeRemovalInput, j: NodeRemovalJudgement): Task {
  return {
    id: `drain-${j.node}`,
    title: `Cordon and drain ${j.nodeName ?? j.node} (PodDisruptionBudgets honoured)`,
    async probe() {
      const kube = await p.session.kube()
      const k = await kubeNodeOf(kube, j.node)
      if (!k) return holds('no Node carries its address')
      if (!k.spec?.unschedulable) return missing(`${k.metadata.name} is schedulable`)
      const left = await podsToEvict(kube, k.metadata.name)
      return left.length === 0 ? holds(`${k.metadata.name} cordoned, nothing left to evict`) : missing(`${left.length} pod(s) to evict`)
    },
    async run(progress) {
      const kube = await p.session.kube()
      const k = await kubeNodeOf(kube, j.node)
      if (k) await drainNode(kube, k.metadata.name, {timeoutMs: p.timeoutMs, onProgress: progress})
    },
  }
}

/** Whether the node's etcd member is still in the cluster, asked of a control plane that stays. */
async function stillMember(p: NodeRemovalInput, j: NodeRemovalJudgement): Promise<boolean> {
  const talosconfig = await p.talos.talosconfig()
  const errors: string[] = []
  for (const cp of j.remainingControlPlanes) {
    try {
      const members = await getEtcdMembers({node: cp, talosconfig})
      return members.some((m) => m.peerUrls.some((u) => hostOf(u) === j.node))
    } catch (error) {
      if (!(error instanceof TalosctlError)) throw error
      errors.push(`${cp}: ${error.talosctlMessage}`)
    }
  }
  throw new IchorError(`no control plane that stays lists the etcd members: ${errors.join('; ')}`)
}

/** The host of a URL without IPv6 brackets; '' for text that is not a URL (it names no node). */
export function hostOf(url: string): string {
  try {
    return new URL(url).hostname.replace(/^\[|\]$/g, '')
  } catch {
    return ''
  }
}

export function leaveEtcdTask(p: NodeRemovalInput, j: NodeRemovalJudgement): Task {
  return {
    id: `etcd-leave-${j.node}`,
    title: `Take ${j.node}'s member out of etcd (talosctl etcd leave on the node itself)`,
    hint: `the node is not reset while its member is in etcd; fix what etcd says (talosctl -n ${j.node} etcd status), then rerun`,
    async probe() {
      return (await stillMember(p, j)) ? missing(`${j.node} is an etcd member`) : holds(`${j.node} is not an etcd member`)
    },
    async run() {
      await etcdLeave({node: j.node, talosconfig: await p.talos.talosconfig(), timeoutMs: p.timeoutMs})
      if (await stillMember(p, j)) throw new IchorError(`talosctl etcd leave on ${j.node} returned, yet the members still list it`)
    },
  }
}

/** A gone machine's member, removed through a control plane that stays (talosctl etcd remove-member). */
export function removeMemberTask(p: NodeRemovalInput, j: NodeRemovalJudgement): Task {
  return {
    id: `remove-member-${j.node}`,
    title: `Remove ${j.node}'s etcd member through a control plane that stays (talosctl etcd remove-member)`,
    hint: `fix what etcd says (talosctl -n ${j.remainingControlPlanes[0]} etcd status), then rerun`,
    async probe() {
      return (await stillMember(p, j)) ? missing(`${j.node} is an etcd member`) : holds(`${j.node} is not an etcd member`)
    },
    async run() {
      const talosconfig = await p.talos.talosconfig()
      const errors: string[] = []
      for (const cp of j.remainingControlPlanes) {
        try {
          const member = (await getEtcdMembers({node: cp, talosconfig})).find((m) => m.peerUrls.some((u) => hostOf(u) === j.node))
          if (member) await etcdRemoveMember({node: cp, talosconfig, memberId: member.id, timeoutMs: p.timeoutMs})
          if (await stillMember(p, j)) throw new IchorError(`talosctl etcd remove-member on ${cp} returned, yet the members still list ${j.node}`)
          return
        } catch (error) {
          if (!(error instanceof TalosctlError)) throw error
          errors.push(`${cp}: ${error.talosctlMessage}`)
        }
      }
      throw new IchorError(`no control plane that stays removed ${j.node}'s member: ${errors.join('; ')}`)
    },
  }
}

export function resetTask(p: NodeRemovalInput, j: NodeRemovalJudgement): Task {
  return {
    id: `reset-${j.node}`,
    title: `Reset ${j.node} through its own endpoint into maintenance mode (talosctl reset --graceful --reboot; its disk is wiped)`,
    hint: `rerun the same command: it waits for ${j.node} and resets it if it is still configured`,
    async probe() {
      const r = await isReachable(j.node, {talosconfig: await p.talos.talosconfig(), timeoutMs: 5_000})
      return r.state === 'maintenance' ? holds(`${j.node} is in maintenance mode`) : missing(`${j.node} is ${r.state}`)
    },
    async run(progress) {
      const kube = await p.session.kube()
      const talosconfig = await p.talos.talosconfig()
      await updateTalosStatus(kube, (t) => ({...t, removing: j.node}))
      const now = await waitForAnswer(j.node, talosconfig, p.timeoutMs, progress)
      if (now.state === 'configured') await resetNode({node: j.node, talosconfig, timeoutMs: p.timeoutMs, onLine: (l) => l.trim() && progress(l.trim())})
      const after = await waitForAnswer(j.node, talosconfig, p.timeoutMs, progress)
      if (after.state !== 'maintenance') throw new IchorError(`${j.node} came back ${after.state} after its reset, not in maintenance mode`)
    },
  }
}

export function deleteNodeTask(p: NodeRemovalInput, j: NodeRemovalJudgement): Task {
  return {
    id: `delete-node-${j.node}`,
    title: `Delete the Node ${j.nodeName ?? `of ${j.node}`}`,
    async probe() {
      const k = await kubeNodeOf(await p.session.kube(), j.node)
      return k ? missing(`Node ${k.metadata.name} is still there`) : holds('no Node carries its address')
    },
    async run() {
      const kube = await p.session.kube()
      const k = await kubeNodeOf(kube, j.node)
      if (k) await deleteObject(kube, {apiVersion: 'v1', kind: 'Node', name: k.metadata.name})
    },
  }
}

/** Last: the address and its per-node patches leave the IchorInstallation, so an init rerun does not bring it back. */
export function forgetNodeTask(p: NodeRemovalInput, j: NodeRemovalJudgement): Task {
  return {
    id: `forget-${j.node}`,
    title: `Remove ${j.node} and its per-node patches from the IchorInstallation`,
    async probe() {
      const cr = await readInstallation(await p.session.kube())
      const t = cr?.spec.talos
      const named = !!t && ([...t.controlPlanes, ...t.workers].includes(j.node) || !!t.machineConfig?.nodePatches?.some((n) => n.node === j.node))
      return named ? missing(`the IchorInstallation names ${j.node}`) : holds(`the IchorInstallation does not name ${j.node}`)
    },
    async run() {
      const kube = await p.session.kube()
      const cr = await readInstallation(kube)
      if (!cr) throw new IchorError('the IchorInstallation is gone')
      const t = cr.spec.talos
      // Stored as init stores it (only what is set), so an init rerun finds nothing to change.
      const held = {...NO_MACHINE_CONFIG_INPUTS, ...t.machineConfig}
      const machineConfig = storedMachineConfig({...held, nodePatches: held.nodePatches.filter((n) => n.node !== j.node)})
      const {machineConfig: _old, ...rest} = t
      const spec = {
        ...cr.spec,
        talos: {
          ...rest,
          controlPlanes: t.controlPlanes.filter((n) => n !== j.node),
          workers: t.workers.filter((n) => n !== j.node),
          ...(machineConfig ? {machineConfig} : {}),
        },
      }
      const written = await writeInstallationSpec(kube, spec, {readAt: cr})
      const {[j.node]: _, ...nodes} = written?.status?.talos?.nodes ?? cr.status?.talos?.nodes ?? {}
      await updateTalosStatus(kube, (s) => ({...s, removing: s.removing === j.node ? undefined : s.removing, nodes}))
    },
  }
}
