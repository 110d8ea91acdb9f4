// What `ichor node replace OLD NEW` checks and the steps it adds before node remove's. Before
// anything runs: OLD is a node of this cluster (not the endpoint's), NEW is a new machine that
// answers (maintenance mode, or already configured from this bundle by an earlier run) with the
// disk it will install onto, and etcd keeps quorum once NEW has joined and OLD has left. Then,
// each step proven by what the cluster and the machines say now: NEW is written into the
// IchorInstallation (with OLD's per-node patches when asked), NEW gets the config init would
// give it, NEW's Node is Ready with its Cilium agent, a control plane's member is a voting member
// of etcd (not a learner), and only then does OLD go as `node remove` takes it.
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import {withPrivateTempDir} from '../fs/private-files.js'
import {listObjects} from '../kube/objects.js'
import {waitFor} from '../kube/wait.js'
import {readInstallation, writeInstallationSpec, type Installation} from '../state/installation.js'
import {installDiskRefusal} from '../talos/disk-selector.js'
import {installDiskFor, installImageOfConfig, NO_MACHINE_CONFIG_INPUTS, storedMachineConfig} from '../talos/machine-config.js'
import {applyConfig, getEtcdMembers, isReachable, listDisks, TalosctlError} from '../talos/talosctl.js'
import {holds, missing} from '../tasks/probe.js'
import type {Task} from '../tasks/types.js'
import {renderJoinConfig} from './join-config.js'
import {ciliumAgentOn, isReady, kubeNodeOf, type NodeObject} from './kube-nodes.js'
import {checkNotEndpoint, hostOf, judgeLeavingNode, type NodeRemovalInput, type NodeRemovalJudgement, type NodeRole} from './remove.js'

export interface NodeReplaceInput extends NodeRemovalInput {
  /** The machine that takes OLD's place (`node` is OLD). */
  newNode: string
  /** --move-patches: OLD's per-node patches become NEW's. */
  movePatches: boolean
}

export interface NodeReplaceJudgement {
  role: NodeRole
  newNode: string
  /** NEW as it answered: maintenance (to configure) or configured from this bundle (an earlier run). */
  newState: 'maintenance' | 'configured'
  /** OLD's removal, with NEW among the control planes that stay. Undefined when OLD is gone already. */
  old?: NodeRemovalJudgement
  /** The per-node patches NEW gets (OLD's, with --move-patches). */
  movedPatches: number
  warnings: string[]
}

const usage = (message: string, hint?: string) => new IchorError(message, {exitCode: EXIT.usage, hint})

const roleIn = (cr: Installation, node: string): NodeRole | undefined =>
  cr.spec.talos.controlPlanes.includes(node) ? 'controlplane' : cr.spec.talos.workers.includes(node) ? 'worker' : undefined

/** The address rules, from the IchorInstallation alone (exit 2); `done` when an earlier run finished. */
export function checkNodeReplace(p: {old: string; newNode: string; cr: Installation}): {role: NodeRole; done: boolean} {
  const {controlPlanes, workers, endpoint} = p.cr.spec.talos
  if (p.old === p.newNode) throw usage(`OLD and NEW are both ${p.old}: a node is replaced by another machine`)
  const oldRole = roleIn(p.cr, p.old)
  const newRole = roleIn(p.cr, p.newNode)
  if (!oldRole && newRole) return {role: newRole, done: true} // OLD forgotten last: the replacement is complete
  if (!oldRole) throw usage(`${p.old} is not a node of this cluster (its nodes: ${[...controlPlanes, ...workers].join(', ')})`)
  if (newRole && newRole !== oldRole)
    throw usage(
      `${p.newNode} is already a ${newRole === 'worker' ? 'worker' : 'control plane'} of this cluster: it cannot take the place of ${oldRole === 'worker' ? 'worker' : 'control plane'} ${p.old}`,
    )
  checkNotEndpoint(p.old, endpoint)
  return {role: oldRole, done: false}
}

/** The rules, both machines' answers, NEW's install disk and etcd's quorum, before anything runs. */
export async function judgeNodeReplace(p: NodeReplaceInput): Promise<NodeReplaceJudgement> {
  const cr = await p.talos.installation()
  const {role, done} = checkNodeReplace({old: p.node, newNode: p.newNode, cr})
  const talosconfig = await p.talos.talosconfig()
  const reach = await isReachable(p.newNode, {talosconfig})
  // Exit 1 as an API server that does not answer: the address may be right and the machine off.
  if (reach.state === 'unreachable')
    throw new IchorError(`${p.newNode} does not answer as a Talos node (${reach.message ?? 'no answer'})`, {
      exitCode: EXIT.failed,
      hint: 'boot the new machine from Talos media (maintenance mode) and rerun',
    })
  if (reach.state === 'configured' && reach.ours === false)
    throw usage(`${p.newNode} is configured from another secrets bundle: reset it to maintenance mode (talosctl reset) before it can join this cluster`)
  const newState = reach.state === 'maintenance' ? 'maintenance' : 'configured'
  const held = {...NO_MACHINE_CONFIG_INPUTS, ...cr.spec.talos.machineConfig}
  const moved = p.movePatches ? held.nodePatches.filter((n) => n.node === p.node).length : 0
  const warnings: string[] = []
  if (!p.movePatches && held.nodePatches.some((n) => n.node === p.node))
    warnings.push(`${p.node}'s own patches (--node-patch) are dropped with it; --move-patches gives them to ${p.newNode}`)
  if (done) return {role, newNode: p.newNode, newState, movedPatches: moved, warnings}
  if (newState === 'maintenance') await checkInstallDisk(p, cr, role)
  const kube = await p.session.kube()
  const nodes = await listObjects<NodeObject>(kube, {apiVersion: 'v1', kind: 'Node'})
  const controlPlanes = cr.spec.talos.controlPlanes.filter((c) => c !== p.node && c !== p.newNode)
  const remainingControlPlanes = role === 'controlplane' ? [...controlPlanes, p.newNode] : cr.spec.talos.controlPlanes
  const old = await judgeLeavingNode(p, {cr, nodes, role, remainingControlPlanes, joining: role === 'controlplane' ? p.newNode : undefined})
  return {role, newNode: p.newNode, newState, old, movedPatches: moved, warnings: [...warnings, ...old.warnings]}
}

/** A machine in maintenance mode installs onto the disk its config names: it must have it (as init checks). */
async function checkInstallDisk(p: NodeReplaceInput, cr: Installation, role: NodeRole): Promise<void> {
  const held = {...NO_MACHINE_CONFIG_INPUTS, ...cr.spec.talos.machineConfig}
  const inputs = p.movePatches ? {...held, nodePatches: held.nodePatches.map((n) => (n.node === p.node ? {...n, node: p.newNode} : n))} : held
  const target = installDiskFor(inputs, p.newNode, role, cr.spec.talos.talosVersion)
  if (target.problem) throw usage(target.problem)
  const refusal = installDiskRefusal(target, p.newNode, await listDisks({node: p.newNode}))
  if (refusal) throw usage(refusal)
}

// ---------- the steps before OLD's removal ----------

export function checkReplaceTask(p: NodeReplaceInput, j: NodeReplaceJudgement): Task {
  const role = j.role === 'controlplane' ? 'control plane' : 'worker'
  return {
    id: 'check-replace',
    title: `Check that ${j.newNode} can take the place of ${role} ${p.node}`,
    mutating: false,
    check: true,
    async probe() {
      if (!j.old) return holds(`${p.node} was replaced by ${j.newNode} already`)
      return holds(`${role} ${p.node} (${j.old.state}) → ${j.newNode} (${j.newState})`)
    },
    async run() {},
  }
}

/** NEW in the IchorInstallation first: a rerun, another machine or an init rerun then keeps it. */
export function addToInstallationTask(p: NodeReplaceInput, j: NodeReplaceJudgement): Task {
  const listed = (cr: Installation | undefined) => {
    const t = cr?.spec.talos
    if (!t) return false
    const inRole = (j.role === 'controlplane' ? t.controlPlanes : t.workers).includes(j.newNode)
    const patched = j.movedPatches === 0 || (t.machineConfig?.nodePatches ?? []).filter((n) => n.node === j.newNode).length >= j.movedPatches
    return inRole && patched
  }
  return {
    id: `add-${j.newNode}`,
    title: `Add ${j.newNode} to the IchorInstallation as a ${j.role === 'controlplane' ? 'control plane' : 'worker'}${j.movedPatches ? ` with ${p.node}'s ${j.movedPatches} patch(es)` : ''}`,
    async probe() {
      return listed(await readInstallation(await p.session.kube())) ? holds(`the IchorInstallation names ${j.newNode}`) : missing(`not named yet`)
    },
    async run() {
      const kube = await p.session.kube()
      const cr = await readInstallation(kube)
      if (!cr) throw new IchorError('the IchorInstallation is gone')
      if (listed(cr)) return
      const t = cr.spec.talos
      const held = {...NO_MACHINE_CONFIG_INPUTS, ...t.machineConfig}
      const copies = p.movePatches ? held.nodePatches.filter((n) => n.node === p.node).map((n) => ({...n, node: j.newNode})) : []
      const machineConfig = storedMachineConfig({...held, nodePatches: [...held.nodePatches.filter((n) => n.node !== j.newNode), ...copies]})
      const {machineConfig: _old, ...rest} = t
      const add = (list: string[]) => (list.includes(j.newNode) ? list : [...list, j.newNode])
      const talos = {
        ...rest,
        controlPlanes: j.role === 'controlplane' ? add(t.controlPlanes) : t.controlPlanes,
        workers: j.role === 'worker' ? add(t.workers) : t.workers,
        ...(machineConfig ? {machineConfig} : {}),
      }
      await writeInstallationSpec(kube, {...cr.spec, talos}, {readAt: cr})
    },
  }
}

/** The installer image the cluster's nodes run: OLD's, else another node's of the role, else any node's. */
async function runningInstallImage(p: NodeReplaceInput, cr: Installation, role: NodeRole): Promise<string | undefined> {
  const {controlPlanes, workers} = cr.spec.talos
  const sameRole = role === 'controlplane' ? controlPlanes : workers
  const peers = [...new Set([p.node, ...sameRole, ...controlPlanes, ...workers])].filter((n) => n !== p.newNode)
  for (const peer of peers) {
    try {
      const image = installImageOfConfig(await p.talos.machineConfig(peer))
      if (image) return image
    } catch (error) {
      if (!(error instanceof TalosctlError)) throw error
    }
  }
  return undefined
}

export function configureNewNodeTask(p: NodeReplaceInput, j: NodeReplaceJudgement): Task {
  const reach = async () => isReachable(j.newNode, {talosconfig: await p.talos.talosconfig(), timeoutMs: 5_000})
  return {
    id: `configure-${j.newNode}`,
    title: `Configure ${j.newNode} as init would (this cluster's secrets, its patches, no bootstrap Cilium)`,
    hint: `rerun the same command: it configures ${j.newNode} if it is still in maintenance mode`,
    async probe() {
      const r = await reach()
      return r.state === 'configured' && r.ours ? holds(`${j.newNode} runs this cluster's config`) : missing(`${j.newNode} is ${r.state}`)
    },
    async run(progress) {
      const cr = await readInstallation(await p.session.kube())
      if (!cr) throw new IchorError('the IchorInstallation is gone')
      const now = await reach()
      if (now.state === 'configured' && now.ours === false) throw usage(`${j.newNode} was configured from another secrets bundle meanwhile`)
      if (now.state === 'maintenance') {
        const [secretsFile, installImage] = await Promise.all([p.talos.secretsFile(), runningInstallImage(p, cr, j.role)])
        await withPrivateTempDir('ichor-join-config-', async (dir) => {
          const file = await renderJoinConfig({cr, node: j.newNode, role: j.role, secretsFile, installImage, dir})
          await applyConfig({node: j.newNode, file, insecure: true})
        })
        progress(`${j.newNode} configured; waiting for it to answer with this cluster's talosconfig`)
      }
      const talosconfig = await p.talos.talosconfig()
      await waitFor(
        `${j.newNode} to answer with this cluster's talosconfig`,
        async () => {
          const r = await isReachable(j.newNode, {talosconfig, timeoutMs: 5_000})
          if (r.state === 'configured' && r.ours === false) throw usage(`${j.newNode} was configured from another secrets bundle meanwhile`)
          return {done: r.state === 'configured' && r.ours === true, state: r.state, value: r}
        },
        {timeoutMs: p.timeoutMs, intervalMs: 500, onProgress: progress},
      )
    },
  }
}

export function newNodeReadyTask(p: NodeReplaceInput, j: NodeReplaceJudgement): Task {
  const check = async () => {
    const kube = await p.session.kube()
    const node = await kubeNodeOf(kube, j.newNode)
    if (!node) return {done: false, state: 'no Node carries its address yet'}
    if (!isReady(node)) return {done: false, state: `Node ${node.metadata.name} is not Ready`}
    const agent = await ciliumAgentOn(kube, node.metadata.name)
    if (!agent || !isReady(agent)) return {done: false, state: `the Cilium agent on ${node.metadata.name} is not Ready`}
    return {done: true, state: `Node ${node.metadata.name} Ready, its Cilium agent ${agent.metadata.name} Ready`}
  }
  return {
    id: `ready-${j.newNode}`,
    title: `Wait until ${j.newNode}'s Node is Ready with its Cilium agent`,
    mutating: false,
    async probe() {
      const c = await check()
      return c.done ? holds(c.state) : missing(c.state)
    },
    async run(progress) {
      await waitFor(`${j.newNode}'s Node and Cilium agent to be Ready`, check, {timeoutMs: p.timeoutMs, intervalMs: 500, onProgress: progress})
    },
  }
}

/** A control plane's member must be a voting member (Talos adds it as a learner and promotes it) before OLD's leaves. */
export function newMemberVotingTask(p: NodeReplaceInput, j: NodeReplaceJudgement): Task {
  const check = async () => {
    const talosconfig = await p.talos.talosconfig()
    try {
      const members = await getEtcdMembers({node: j.newNode, talosconfig, timeoutMs: 10_000})
      const own = members.find((m) => m.peerUrls.some((u) => hostOf(u) === j.newNode))
      if (!own) return {done: false, state: `${j.newNode} is not an etcd member yet`}
      return own.learner ? {done: false, state: `${j.newNode} is an etcd learner`} : {done: true, state: `${j.newNode} is a voting etcd member`}
    } catch (error) {
      if (!(error instanceof TalosctlError)) throw error
      return {done: false, state: error.talosctlMessage}
    }
  }
  return {
    id: `etcd-member-${j.newNode}`,
    title: `Wait until ${j.newNode} is a voting etcd member (not a learner)`,
    mutating: false,
    async probe() {
      const c = await check()
      return c.done ? holds(c.state) : missing(c.state)
    },
    async run(progress) {
      await waitFor(`${j.newNode} to be a voting etcd member`, check, {timeoutMs: p.timeoutMs, intervalMs: 500, onProgress: progress})
    },
  }
}
