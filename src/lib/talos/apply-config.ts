// A rerun of `init` with changed machine-config inputs (issue 22 point 4): each running node gets
// the operator's change, and only that change. The node's running config is not the state
// folder's render (the Cilium hand-over, `cni kube-proxy` and `kubernetes upgrade` changed it
// since), so the change is the difference between two renders of the same node, one with the
// stored inputs and one with the new ones, laid over the running config (a three-way merge).
// Talos decides whether a reboot is needed (talosctl apply-config --dry-run); a reboot is done
// only with the operator's consent, one node at a time, control planes first.
import type {Reporter} from '../log/reporter.js'
import {readFile, writeFile} from 'node:fs/promises'
import {existsSync} from 'node:fs'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {isDeepStrictEqual} from 'node:util'
import {parseAllDocuments, stringify} from 'yaml'
import {unifiedDiff} from '../text/diff.js'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import type {Kube} from '../kube/client.js'
import {withPrivateTempDir} from '../fs/private-files.js'
import {redactMachineConfig} from './redact.js'
import type {LocalState} from '../state/local.js'
import {holds, missing} from '../tasks/probe.js'
import type {Later, Task} from '../tasks/types.js'
import type {MachineConfigInputs} from '../state/installation-types.js'
import {patchesForNode, storedMachineConfig, type TalosClusterSpec, type TalosRender} from './machine-config.js'
import {applyConfig, applyConfigDryRun, genConfig, genSecrets, isReachable, patchConfigFile} from './talosctl.js'
import {TalosNodeReads} from './node-reads.js'

type Doc = Record<string, unknown>
const isMap = (v: unknown): v is Doc => v !== null && typeof v === 'object' && !Array.isArray(v)

/** A document's identity in a multi-document config: the v1alpha1 one, or apiVersion/kind/name. */
function docKey(d: Doc): string {
  return d.kind === undefined && d.apiVersion === undefined ? 'v1alpha1' : `${String(d.apiVersion)}/${String(d.kind)}/${String(d.name ?? '')}`
}

function parseDocs(text: string): Doc[] {
  return parseAllDocuments(text)
    .map((d) => d.toJS() as unknown)
    .filter(isMap)
}

/** `running` with what changed from `before` to `after`: changed or added keys take `after`'s value, removed ones go. */
function merge3(running: unknown, before: unknown, after: unknown): unknown {
  if (isDeepStrictEqual(before, after)) return running
  if (isMap(after) && isMap(running) && (before === undefined || isMap(before))) {
    const was = before ?? {}
    const out: Doc = {...running}
    for (const k of new Set([...Object.keys(was), ...Object.keys(after)])) {
      if (isDeepStrictEqual(was[k], after[k])) continue
      if (!(k in after)) delete out[k]
      else out[k] = merge3(running[k], was[k], after[k])
    }
    return out
  }
  return after // a scalar, a list (replaced whole) or a changed type
}

/**
 * The running config with the operator's change laid over it, document by document; undefined
 * when the change is already there (nothing to apply).
 */
export function rebaseConfig(running: string, before: string, after: string): string | undefined {
  const live = parseDocs(running)
  const was = new Map(parseDocs(before).map((d) => [docKey(d), d]))
  const now = new Map(parseDocs(after).map((d) => [docKey(d), d]))
  let out = live.map((d) => ({key: docKey(d), doc: d as Doc | undefined}))
  for (const key of new Set([...was.keys(), ...now.keys()])) {
    const b = was.get(key)
    const a = now.get(key)
    if (isDeepStrictEqual(b, a)) continue
    const i = out.findIndex((d) => d.key === key)
    if (a === undefined) out = out.filter((d) => d.key !== key)
    else if (i >= 0) out[i] = {key, doc: merge3(out[i]!.doc, b, a) as Doc}
    else out.push({key, doc: a})
  }
  const docs = out.map((d) => d.doc).filter(isMap)
  if (isDeepStrictEqual(docs, live)) return undefined
  return docs.map((d) => stringify(d, {lineWidth: 0})).join('---\n')
}

export type NodeChangeStatus = 'unchanged' | 'without-reboot' | 'reboot'

export interface NodeConfigChange {
  node: string
  role: 'controlplane' | 'worker'
  status: NodeChangeStatus
  /** The config to apply (absent when unchanged). */
  config?: string
  /** The running config against the new one, secrets redacted. */
  diff?: string
}

/** One line per node, as the dry run and the reboot question say it. */
function describeChange(c: NodeConfigChange): string {
  const what =
    c.status === 'unchanged'
      ? 'unchanged'
      : c.status === 'without-reboot'
        ? 'applied without a reboot'
        : 'needs a reboot (Talos cannot apply this change to the running machine)'
  return `${c.node}: ${what}`
}

/** Both renders of every node's config (the stored inputs', the new ones'), with one secrets bundle. */
async function renderBoth(
  dir: string,
  o: {state: LocalState; inputs: TalosClusterSpec; previous: MachineConfigInputs; render: TalosRender},
): Promise<Map<string, {before: string; after: string}>> {
  const i = o.inputs
  // Secrets are the same in both renders, so they are never part of the change; a dry run on a
  // machine without the bundle yet renders with a throwaway one.
  let secretsPath = o.state.secrets
  if (!existsSync(secretsPath)) {
    secretsPath = join(dir, 'secrets.yaml')
    await genSecrets(secretsPath)
  }
  const one = async (name: string, m: MachineConfigInputs) => {
    const out = await genConfig({
      clusterName: i.clusterName,
      endpoint: i.endpoint,
      secretsPath,
      talosVersion: i.talosVersion.tag,
      kubernetesVersion: i.kubernetesVersion.version,
      controlPlanePatch: o.render.talos.controlPlane,
      workerPatch: o.render.talos.worker,
      installDisk: m.installDisk,
      installImage: m.installImage,
      userPatches: {all: m.patches.map((x) => x.yaml), controlPlane: m.controlPlanePatches.map((x) => x.yaml), worker: m.workerPatches.map((x) => x.yaml)},
      outDir: join(dir, name),
    })
    const texts = new Map<string, string>()
    for (const node of [...i.controlPlanes, ...i.workers]) {
      const base = i.workers.includes(node) ? out.worker : out.controlPlane
      const own = patchesForNode(m, node).map((x) => x.yaml)
      let file = base
      if (own.length > 0) {
        file = join(dir, name, `node-${node}.yaml`)
        await patchConfigFile({base, patches: own, outPath: file})
      }
      texts.set(node, await readFile(file, 'utf8'))
    }
    return texts
  }
  const before = await one('before', o.previous)
  const after = await one('after', i.machineConfig)
  return new Map([...before].map(([node, b]) => [node, {before: b, after: after.get(node)!}]))
}

/** Whether the inputs differ from what the nodes were configured with (the stored spec). */
function inputsChanged(previous: MachineConfigInputs | undefined, now: MachineConfigInputs): previous is MachineConfigInputs {
  const texts = (m: MachineConfigInputs) => {
    const s = storedMachineConfig(m) ?? {}
    // Compared by content: the same patch from another file name is no change.
    return JSON.stringify([
      s.installDisk,
      s.installImage,
      ...(['patches', 'controlPlanePatches', 'workerPatches', 'nodePatches'] as const).map((k) => (s[k] ?? []).map((p) => ['node' in p ? p.node : '', p.yaml])),
    ])
  }
  return previous !== undefined && texts(previous) !== texts(now)
}

/** What each configured node gets from the changed inputs (read-only: the node's config, Talos's own dry run). */
async function planNodeConfigChanges(o: {
  state: LocalState
  inputs: TalosClusterSpec
  previous: MachineConfigInputs
  render: TalosRender
  reads: TalosNodeReads
}): Promise<NodeConfigChange[]> {
  return withPrivateTempDir('ichor-config-change-', async (dir) => {
    const renders = await renderBoth(dir, o)
    const changes: NodeConfigChange[] = []
    for (const [node, {before, after}] of renders) {
      const role = o.inputs.workers.includes(node) ? 'worker' : 'controlplane'
      // Read now, under the Lease: the change is laid over what the node runs at this moment
      // (the read that proves the node configured from this bundle is that config).
      o.reads.forget(node)
      const r = await o.reads.reachable(node, {talosconfig: o.state.talosconfig})
      if (r.state !== 'configured') continue // a node in maintenance mode gets the new config from apply-configs
      const running = await o.reads.machineConfig(node, o.state.talosconfig)
      const config = rebaseConfig(running, before, after)
      if (config === undefined) {
        changes.push({node, role, status: 'unchanged'})
        continue
      }
      const file = join(dir, `apply-${node}.yaml`)
      await writeFile(file, config, {mode: 0o600})
      const {reboot} = await applyConfigDryRun({node, file, talosconfig: o.state.talosconfig})
      const diff = unifiedDiff(redactMachineConfig(running), redactMachineConfig(config), [`${node} (running)`, `${node} (new)`])
      changes.push({node, role, status: reboot ? 'reboot' : 'without-reboot', config, diff})
    }
    return changes
  })
}

export interface NodeConfigChangesOptions {
  state: LocalState
  inputs: TalosClusterSpec
  /** The machine-config inputs the cluster stores (the nodes were configured with them); undefined on a new cluster. */
  previous: MachineConfigInputs | undefined
  render: Later<TalosRender>
  /** --allow-reboot: a node Talos must reboot for the change is rebooted without asking. */
  allowReboot: boolean
  /** On a terminal: asks whether to reboot (undefined: no terminal, refuse without allowReboot). */
  confirmReboot?: (question: string) => Promise<boolean>
  /** Checked before every node is touched (the Lease is still ours). */
  guard?: () => Promise<void>
  /** The cluster, to wait for a rebooted node's Kubernetes Node to be Ready again. */
  kube?: () => Promise<Kube>
  report?: Reporter
  timeoutMs: number
  /** The run's reads of the nodes (shared with the other steps; every apply drops the node's). */
  reads?: TalosNodeReads
}

/**
 * Applies changed machine-config inputs to the running nodes: `apply-config --mode no-reboot`
 * where Talos says no reboot is needed, else (with consent) `--mode auto`, which reboots below
 * Talos v1.14 (v1.14 has no reboot mode and applies every change without one: siderolabs/talos
 * 995bc30d5, v1.14.0-rc.1 v1alpha1_server.go ApplyConfiguration), one node at a time, control
 * planes first, each back before the next (etcd keeps its quorum).
 */
export function nodeConfigChangesTask(p: NodeConfigChangesOptions): Task {
  let planned: NodeConfigChange[] | undefined
  const reads = p.reads ?? new TalosNodeReads()
  const plan = async () => (planned = await planNodeConfigChanges({state: p.state, inputs: p.inputs, previous: p.previous!, render: await p.render(), reads}))
  return {
    id: 'node-config-changes',
    title: 'Apply changed machine-config inputs to the running nodes',
    async probe() {
      if (!inputsChanged(p.previous, p.inputs.machineConfig)) return holds('the machine-config inputs are the stored ones')
      if (!existsSync(p.state.talosconfig)) return missing("the nodes' configs are read with the talosconfig a real run restores first")
      const changes = await plan()
      const pending = changes.filter((c) => c.status !== 'unchanged')
      if (pending.length === 0) return holds('every node runs the changed machine config')
      for (const c of changes) {
        p.report?.note(describeChange(c))
        if (c.diff) p.report?.note(c.diff.trimEnd())
      }
      return missing(pending.map(describeChange).join('; '))
    },
    async run(progress) {
      const changes = (planned ?? (await plan())).filter((c) => c.status !== 'unchanged')
      planned = undefined
      const reboots = changes.filter((c) => c.status === 'reboot')
      // Consent before any node is touched: a refusal leaves every node as it was.
      if (reboots.length > 0 && !p.allowReboot) {
        const question = `Talos must reboot ${reboots.map((c) => c.node).join(', ')} to apply the changed machine config (one at a time, each back before the next). Reboot?`
        const agreed = p.confirmReboot ? await p.confirmReboot(question) : false
        if (!agreed) {
          throw new IchorError(`the changed machine config needs a reboot of ${reboots.map((c) => c.node).join(', ')}; nothing was changed`, {
            exitCode: p.confirmReboot ? EXIT.failed : EXIT.usage,
            hint: 'rerun with --allow-reboot to reboot them one at a time, or leave the changed flags out to keep the stored config',
          })
        }
      }
      await withPrivateTempDir('ichor-config-apply-', async (dir) => {
        const apply = async (c: NodeConfigChange, mode: 'no-reboot' | 'auto') => {
          await p.guard?.()
          const file = join(dir, `${c.node}.yaml`)
          await writeFile(file, c.config!, {mode: 0o600})
          await reads.write(c.node, () => applyConfig({node: c.node, file, insecure: false, talosconfig: p.state.talosconfig, mode}))
        }
        for (const c of changes.filter((x) => x.status === 'without-reboot')) {
          await apply(c, 'no-reboot')
          progress(`${c.node}: applied without a reboot`)
        }
        const order = [...reboots.filter((c) => c.role === 'controlplane'), ...reboots.filter((c) => c.role === 'worker')]
        for (const c of order) {
          await apply(c, 'auto')
          progress(`${c.node}: rebooting`)
          await waitBack(c.node, p.state.talosconfig, p.timeoutMs)
          if (p.kube) await waitNodeReady(await p.kube(), c.node, p.timeoutMs)
          progress(`${c.node}: back after its reboot`)
        }
      })
    },
  }
}

/** Waits for the node to go down for its reboot (a real machine takes a moment), then to answer this bundle's talosconfig again. */
async function waitBack(node: string, talosconfig: string, timeoutMs: number): Promise<void> {
  const up = async () => {
    const r = await isReachable(node, {talosconfig, timeoutMs: 10_000})
    return {ok: r.state === 'configured' && r.ours === true, r}
  }
  const downBy = Date.now() + Math.min(timeoutMs, 120_000)
  while (Date.now() < downBy && (await up()).ok) await sleep(1_000)
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const {ok, r} = await up()
    if (ok) return
    if (Date.now() > deadline)
      throw new IchorError(
        `${node} did not come back after its reboot within ${Math.round(timeoutMs / 1000)}s (${r.state}${r.message ? `: ${r.message}` : ''}); rerun the same command once it answers`,
      )
    await sleep(1_000)
  }
}

/** Waits until the Kubernetes Node with this address (InternalIP or Hostname) is Ready; a node Kubernetes does not list by it is not waited for. */
async function waitNodeReady(kube: Kube, address: string, timeoutMs: number): Promise<void> {
  type Node = {metadata: {name: string}; status?: {addresses?: {address: string}[]; conditions?: {type: string; status: string}[]}}
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const nodes = (await kube.request<{items: Node[]}>('GET', '/api/v1/nodes')).items
    const node = nodes.find((n) => n.status?.addresses?.some((a) => a.address === address))
    if (!node || node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')) return
    if (Date.now() > deadline)
      throw new IchorError(
        `Kubernetes node ${node.metadata.name} (${address}) is not Ready ${Math.round(timeoutMs / 1000)}s after its reboot; rerun the same command once it is`,
      )
    await sleep(2_000)
  }
}
