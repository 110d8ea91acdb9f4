// What `ichor talos upgrade` reads and the steps of its plan. Before the Lease: what every node
// runs (all must answer), the Kubernetes version of the control planes, the rules (policy.ts),
// the health of every etcd member, and each node's installer image at the target tag. Then one
// step per node, control planes first: `talosctl upgrade` (it cordons, drains, reboots, waits for
// the Node and uncordons), then the proof that the node is back: the target version, its Node
// Ready and schedulable again, the Cilium agent on it Ready. The IchorInstallation's status says
// which node is being upgraded and which Nodes the upgrade cordoned, so a run killed anywhere,
// even while a node reboots, is finished by the next one.
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import type {Kube} from '../kube/client.js'
import {readRunningKubernetes} from '../kubernetes/upgrade.js'
import {waitFor} from '../kube/wait.js'
import {ciliumAgentOn, isReady as ready, kubeNodeOf} from '../nodes/kube-nodes.js'
import type {Session} from '../session/session.js'
import {readInstallation, writeInstallationSpec, writeInstallationStatus, type Installation, type TalosUpgradeStatus} from '../state/installation.js'
import type {TalosAccess} from '../talos/access.js'
import {getEtcdStatus, TalosctlError, unhealthyEtcdMembers, upgradeTalos} from '../talos/talosctl.js'
import {parseTalosVersion} from '../talos/versions.js'
import {holds, missing} from '../tasks/probe.js'
import type {Task} from '../tasks/types.js'
import {checkTalosUpgrade, retagImage} from './policy.js'
import {installImageOfConfig} from '../talos/machine-config.js'

export interface TalosUpgradeInput {
  session: Session
  talos: TalosAccess
  /** --to, as given (checked by checkTalosUpgrade). */
  to: string
  /** --node: only these nodes (default: all of them). */
  only: string[]
  timeoutMs: number
}

export interface NodeUpgrade {
  node: string
  role: 'controlplane' | 'worker'
  /** What the node ran when the command started. */
  from: string
  /** The installer image it is upgraded with (the one it was installed with, at the target tag). */
  image: string
}

export interface TalosUpgradeJudgement {
  to: string
  /** The nodes this run covers, in order (control planes first), those at the target included. */
  nodes: NodeUpgrade[]
  behind: string[]
  atTarget: string[]
  /** Every node of the cluster will run the target: the spec then records it. */
  wholeCluster: boolean
  warnings: string[]
}

const usage = (message: string, hint?: string) => new IchorError(message, {exitCode: EXIT.usage, hint})

/** The rules, the nodes' answers and etcd's health, before anything runs: a refusal is exit 2. */
export async function judgeTalosUpgrade(p: TalosUpgradeInput): Promise<TalosUpgradeJudgement> {
  const cr = await p.talos.installation()
  const {controlPlanes, workers} = cr.spec.talos
  const all = [...controlPlanes.map((node) => ({node, role: 'controlplane' as const})), ...workers.map((node) => ({node, role: 'worker' as const}))]
  const unknown = p.only.filter((n) => !all.some((a) => a.node === n))
  if (unknown.length > 0)
    throw usage(
      `--node: ${unknown.join(', ')} ${unknown.length > 1 ? 'are not nodes' : 'is not a node'} of this cluster (its nodes: ${all.map((a) => a.node).join(', ')})`,
    )
  const selected = p.only.length > 0 ? all.filter((a) => p.only.includes(a.node)) : all
  const versions = await answeringVersions(
    p,
    cr,
    all.map((a) => a.node),
  )
  const kubernetesVersion = (await readRunningKubernetes(p.talos)).lowest
  const verdict = checkTalosUpgrade({to: p.to, nodes: selected.map((s) => ({node: s.node, version: versions.get(s.node)!})), kubernetesVersion})
  if (verdict.behind.length > 0) await requireHealthyEtcd(p.talos, controlPlanes)
  // Asked in one turn: the nodes' configs go out as one talosctl call (node-reads.ts).
  const configs = await Promise.all(selected.map((s) => p.talos.machineConfig(s.node)))
  const nodes: NodeUpgrade[] = selected.map((s, i) => {
    const installed = installImageOfConfig(configs[i]!) ?? cr.spec.talos.machineConfig?.installImage
    if (!installed) throw usage(`node ${s.node}: its machine config names no installer image, and ichor init stored none (--install-image)`)
    return {...s, from: versions.get(s.node)!, image: retagImage(installed, verdict.to)}
  })
  const warnings: string[] = []
  if (controlPlanes.length < 3 && verdict.behind.some((n) => controlPlanes.includes(n)))
    warnings.push(
      controlPlanes.length === 1
        ? `the cluster has one control plane: while ${controlPlanes[0]} reboots the Kubernetes API and every workload on it are down (ichor waits for the API to return)`
        : `the cluster has ${controlPlanes.length} control planes: while one reboots etcd has no quorum and the Kubernetes API is down (ichor waits for it to return)`,
    )
  const byHand = verdict.atTarget.filter((n) => versions.get(n) !== cr.spec.talos.talosVersion && cr.status?.talos?.nodes?.[n] !== verdict.to)
  if (byHand.length > 0)
    warnings.push(`${byHand.join(', ')} already ${byHand.length > 1 ? 'run' : 'runs'} ${verdict.to} (upgraded outside ichor): recorded, not upgraded again`)
  const wholeCluster = all.every((a) => verdict.atTarget.includes(a.node) || verdict.behind.includes(a.node))
  return {to: verdict.to, nodes, behind: verdict.behind, atTarget: verdict.atTarget, wholeCluster, warnings}
}

/**
 * What each node runs. Every node must answer, except the one an earlier run left rebooting
 * (the status names it): that one is waited for, as the run that was stopped would have.
 */
async function answeringVersions(p: TalosUpgradeInput, cr: Installation, nodes: string[]): Promise<Map<string, string>> {
  const rebooting = cr.status?.talos?.upgrading
  const answers = await p.talos.runningVersions(nodes)
  if (rebooting && nodes.includes(rebooting) && typeof answers.get(rebooting) !== 'string') {
    answers.set(rebooting, await waitForVersion(p.talos, rebooting, p.timeoutMs))
  }
  const silent = nodes.filter((n) => typeof answers.get(n) !== 'string')
  if (silent.length > 0) {
    const why = silent.map((n) => {
      const a = answers.get(n)
      return `${n} (${a instanceof TalosctlError ? a.talosctlMessage : 'no answer in time'})`
    })
    throw usage(
      `every node must answer before Talos is upgraded; ${silent.length > 1 ? 'these do' : 'this one does'} not: ${why.join('; ')}`,
      'check the nodes (ichor talos status), then rerun',
    )
  }
  return answers as Map<string, string>
}

/** The lowest Kubernetes version the control planes' configs run (what must run on the target Talos). */
/** Every control plane's etcd member answers, is a voting member and reports no error. */
async function requireHealthyEtcd(talos: TalosAccess, controlPlanes: string[]): Promise<void> {
  const status = await getEtcdStatus({nodes: controlPlanes, talosconfig: await talos.talosconfig()})
  const sick = unhealthyEtcdMembers(controlPlanes, status, 'is a learner, not a voting member yet')
  if (sick.length === 0) return
  const quorum = Math.floor(controlPlanes.length / 2) + 1
  throw usage(
    `etcd is not healthy on every control plane, and a control plane's reboot takes its member down (${controlPlanes.length} member(s), quorum ${quorum}): ${sick.join('; ')}`,
    'bring the member back first (talosctl -n NODE etcd status, talosctl -n NODE service etcd), then rerun',
  )
}

/** Polls the node until it answers `talosctl version` (it is down while it reboots). */
async function waitForVersion(talos: TalosAccess, node: string, timeoutMs: number, onProgress?: (s: string) => void): Promise<string> {
  return waitFor(
    `node ${node} to answer after its reboot`,
    async () => {
      const v = (await talos.runningVersions([node])).get(node)
      return typeof v === 'string'
        ? {done: true, state: `runs ${v}`, value: v}
        : {done: false, state: v instanceof TalosctlError ? v.talosctlMessage : 'no answer'}
    },
    {timeoutMs, intervalMs: 500, onProgress},
  )
}

// ---------- the Kubernetes side of a node ----------

/** Why the node is not back yet (empty: it is), as of now, and the version it answered. */
async function notBack(p: TalosUpgradeInput, node: string, to: string): Promise<{why: string[]; version?: string}> {
  const kube = await p.session.kube()
  const [versions, k, cr] = await Promise.all([p.talos.runningVersions([node]), kubeNodeOf(kube, node), readInstallation(kube)])
  const version = versions.get(node)
  if (typeof version !== 'string') return {why: [`it does not answer (${version instanceof TalosctlError ? version.talosctlMessage : 'no answer'})`]}
  if (parseTalosVersion(version).tag !== to) return {why: [`it runs ${version}`], version}
  const why: string[] = []
  if (!k) return {why: [`no Kubernetes Node has its address`], version}
  if (!ready(k)) why.push(`its Node ${k.metadata.name} is not Ready`)
  if (k.spec?.unschedulable && cr?.status?.talos?.uncordon?.includes(k.metadata.name)) why.push(`its Node ${k.metadata.name} is still cordoned`)
  const agent = await ciliumAgentOn(kube, k.metadata.name)
  if (!agent || !ready(agent)) why.push(`the Cilium agent on ${k.metadata.name} is not Ready`)
  if (cr?.status?.talos?.nodes?.[node] !== to) why.push(`the IchorInstallation does not record ${to} for it`)
  return {why, version}
}

/** The status's Talos part changed over the latest read (status writes of this plan only). */
async function updateTalosStatus(kube: Kube, change: (t: TalosUpgradeStatus) => TalosUpgradeStatus): Promise<void> {
  const cr = await readInstallation(kube)
  if (!cr) throw new IchorError('the IchorInstallation is gone')
  await writeInstallationStatus(kube, {cni: {}, stack: {}, ...cr.status, talos: change({...cr.status?.talos})}, {readAt: cr})
}

// ---------- the plan's steps ----------

export function checkUpgradeTask(j: TalosUpgradeJudgement): Task {
  return {
    id: 'check-nodes',
    title: `Check Talos ${j.to} against every node, one minor at a time, Kubernetes' range and etcd's health`,
    mutating: false,
    check: true,
    async probe() {
      return holds(
        j.behind.length
          ? `${j.behind.length} node(s) to upgrade: ${j.nodes
              .filter((n) => j.behind.includes(n.node))
              .map((n) => `${n.node} (${n.from})`)
              .join(', ')}`
          : `every node runs ${j.to}`,
      )
    },
    async run() {},
  }
}

/** One node: talosctl upgrade, then the node proven back (version, Node, Cilium agent), recorded. */
export function upgradeNodeTask(p: TalosUpgradeInput, j: TalosUpgradeJudgement, n: NodeUpgrade): Task {
  // What the probe just heard the node answer: the action starts from it (one talosctl call less a node).
  let answered: string | undefined
  return {
    id: `upgrade-${n.node}`,
    title: `Upgrade ${n.role === 'controlplane' ? 'control plane' : 'worker'} ${n.node} to ${j.to} (${n.image}); wait for it, its Node and its Cilium agent`,
    hint: `rerun the same command: it continues with ${n.node}`,
    async probe() {
      const {why, version} = await notBack(p, n.node, j.to)
      answered = version
      return why.length === 0 ? holds(`runs ${j.to}, Ready, Cilium agent Ready`) : missing(why.join('; '))
    },
    async run(progress) {
      const kube = await p.session.kube()
      const running = answered ?? (await waitForVersion(p.talos, n.node, p.timeoutMs, progress))
      if (parseTalosVersion(running).tag !== j.to) {
        // Which Node to make schedulable again: only one this upgrade cordons (an operator's cordon stays).
        const k = await kubeNodeOf(kube, n.node)
        await updateTalosStatus(kube, (t) => ({
          ...t,
          upgrading: n.node,
          uncordon: k && !k.spec?.unschedulable ? [...new Set([...(t.uncordon ?? []), k.metadata.name])] : t.uncordon,
        }))
        await upgradeTalos({
          node: n.node,
          talosconfig: await p.talos.talosconfig(),
          image: n.image,
          timeoutMs: p.timeoutMs,
          drainTimeoutMs: Math.min(p.timeoutMs, 300_000),
          onLine: (line) => line.trim() && progress(line.trim()),
        })
        const booted = await waitForVersion(p.talos, n.node, p.timeoutMs, progress)
        if (parseTalosVersion(booted).tag !== j.to) {
          await updateTalosStatus(kube, (t) => ({...t, upgrading: undefined, nodes: {...t.nodes, [n.node]: booted}}))
          throw new IchorError(
            `node ${n.node} came back on ${booted}, not ${j.to}: Talos booted its previous slot (the new image ${n.image} did not boot); no further node was upgraded`,
            {hint: `look at why it failed to boot (talosctl -n ${n.node} dmesg), fix the image, then rerun`},
          )
        }
      }
      const k = await waitFor(
        `the Node of ${n.node} to be Ready`,
        async () => {
          const node = await kubeNodeOf(kube, n.node)
          return {done: !!node && ready(node), state: node ? `Node ${node.metadata.name} ${ready(node) ? 'Ready' : 'not Ready'}` : 'no Node', value: node}
        },
        {timeoutMs: p.timeoutMs, intervalMs: 250, onProgress: progress},
      )
      const cr = await readInstallation(kube)
      if (k && k.spec?.unschedulable && cr?.status?.talos?.uncordon?.includes(k.metadata.name)) {
        await kube.request('PATCH', `/api/v1/nodes/${k.metadata.name}`, {body: {spec: {unschedulable: null}}, contentType: 'application/merge-patch+json'})
        progress(`${k.metadata.name} uncordoned`)
      }
      await waitFor(
        `the Cilium agent on ${k?.metadata.name ?? n.node} to be Ready`,
        async () => {
          const agent = k && (await ciliumAgentOn(kube, k.metadata.name))
          return {done: !!agent && ready(agent), state: agent ? `${agent.metadata.name} ${ready(agent) ? 'Ready' : 'not Ready'}` : 'no agent pod'}
        },
        {timeoutMs: p.timeoutMs, intervalMs: 250, onProgress: progress},
      )
      await updateTalosStatus(kube, (t) => ({
        ...t,
        upgrading: undefined,
        nodes: {...t.nodes, [n.node]: j.to},
        uncordon: t.uncordon?.filter((name) => name !== k?.metadata.name),
      }))
    },
  }
}

/** Once every node runs the target: the spec's version, which an init rerun keeps and new nodes are installed at. */
export function recordTalosVersionTask(p: TalosUpgradeInput, j: TalosUpgradeJudgement): Task {
  return {
    id: 'record-version',
    title: `Record Talos ${j.to} in the IchorInstallation`,
    async probe() {
      const cr = await readInstallation(await p.session.kube())
      if (!j.wholeCluster) return holds(`--node covers part of the cluster: the spec keeps ${cr?.spec.talos.talosVersion ?? 'its version'}`)
      return cr?.spec.talos.talosVersion === j.to
        ? holds(`${j.to} recorded`)
        : missing(`the IchorInstallation records ${cr?.spec.talos.talosVersion ?? 'no version'}`)
    },
    async run() {
      const kube = await p.session.kube()
      const cr = await readInstallation(kube)
      if (!cr) throw new IchorError('the IchorInstallation is gone')
      await writeInstallationSpec(kube, {...cr.spec, talos: {...cr.spec.talos, talosVersion: j.to}}, {readAt: cr})
    },
  }
}
