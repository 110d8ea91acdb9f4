// Steps on the local state and the Talos nodes, up to a running API server, and the
// hand-over of Cilium from Talos to Helm. Each factory closes over what it needs.
import {createHash} from 'node:crypto'
import {setTimeout as sleep} from 'node:timers/promises'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import {connectKube} from '../kube/client.js'
import {readWorkloadRollout} from '../kube/reads.js'
import {waitForApiServer, waitForDaemonSetReady} from '../kube/wait.js'
import type {Session} from '../session/session.js'
import type {TalosBundle} from '../state/sealed-bundle.js'
import {CorruptStateFileError, prepareStateDir, readStateFile, secureStateFiles, writeStateFile, type LocalState} from '../state/local.js'
import {holds, missing} from '../tasks/probe.js'
import type {Later, Task} from '../tasks/types.js'
import {handOverCiliumFromTalos, talosHandoverPending, withoutInlineManifest} from './handover.js'
import {inventoryKey, removeTalosInventoryKeys} from './inventory.js'
import {
  KUBE_PROXY,
  KUBE_PROXY_MANIFEST_ID,
  kubeProxyLeftovers,
  kubeProxyNodes,
  nodesToSwitch,
  removeKubeProxyObjects,
  switchKubeProxyOnNodes,
} from './kube-proxy.js'
import {controlPlanesStillApplying, waitForManifestRunsWithout} from './manifest-runs.js'
import {allPatches, patchesForNode, storedMachineConfig, type TalosClusterSpec, type TalosRender} from './machine-config.js'
import {withPrivateTempDir} from '../fs/private-files.js'
import type {TalosNodeReads} from './node-reads.js'
import type {TalosAccess} from './access.js'
import {join} from 'node:path'
import {readFileSync, rmSync} from 'node:fs'
import {
  TalosctlError,
  patchConfigFile,
  applyConfig,
  bootstrap,
  genConfig,
  genSecrets,
  isReachable,
  kubeconfig as fetchKubeconfig,
  validateConfig,
  type Reachability,
} from './talosctl.js'

/**
 * The secrets bundle: reused when present and whole; else restored from the cluster when
 * it answers (another machine, or a local copy cut short by a full disk); else generated
 * — never over a corrupt one, which configured nodes would no longer accept.
 */
export function talosSecretsTask(p: {state: LocalState; clusterBundle: TalosBundle | undefined}): Task {
  return {
    id: 'talos-secrets',
    title: 'Generate or reuse the Talos secrets bundle',
    async probe() {
      const read = readStateFile(p.state, 'secrets')
      if (read.status === 'ok') return holds(`reusing ${p.state.secrets}`)
      return missing(read.status === 'corrupt' ? `${read.path} is corrupt (${read.reason})` : 'no Talos secrets bundle yet')
    },
    async run(progress) {
      prepareStateDir(p.state)
      const local = readStateFile(p.state, 'secrets')
      // Read and opened before the plan (a wrong key is refused before any step).
      const bundle = p.clusterBundle
      if (bundle) {
        writeStateFile(p.state, 'secrets', bundle.secretsYaml)
        writeStateFile(p.state, 'talosconfig', bundle.talosconfig)
        progress('restored from the cluster')
        return
      }
      if (local.status === 'corrupt') throw new CorruptStateFileError(local.path, 'secrets', local.reason)
      await genSecrets(p.state.secrets)
      secureStateFiles(p.state)
    },
  }
}

function configsInputHash(inputs: TalosClusterSpec, render: TalosRender): string {
  const i = inputs
  // The operator's machine-config inputs are part of it: a changed one regenerates the configs.
  const key = JSON.stringify([
    i.clusterName,
    i.endpoint,
    i.talosVersion.tag,
    i.kubernetesVersion.version,
    render.talos.controlPlane,
    render.talos.worker,
    ...(storedMachineConfig(i.machineConfig) ? [storedMachineConfig(i.machineConfig)] : []),
  ])
  return createHash('sha256').update(key).digest('hex')
}

/** talosctl gen config with the patches, checked by talosctl validate; regenerated when its inputs change. */
export function machineConfigsTask(p: {state: LocalState; inputs: TalosClusterSpec; render: Later<TalosRender>}): Task {
  return {
    id: 'talos-configs',
    title: 'Render machine configs with the Cilium inline manifest',
    mutating: false,
    async probe() {
      const hash = configsInputHash(p.inputs, await p.render())
      const recorded = readStateFile(p.state, 'configsHash')
      const fresh = recorded.status === 'ok' && recorded.text.trim() === hash
      const whole = (['controlPlaneConfig', 'talosconfig'] as const).every((f) => readStateFile(p.state, f).status === 'ok')
      return fresh && whole ? holds('machine configs are current') : missing('machine configs are missing or stale')
    },
    async run() {
      const i = p.inputs
      const render = await p.render()
      const m = i.machineConfig
      const base = {
        clusterName: i.clusterName,
        endpoint: i.endpoint,
        secretsPath: p.state.secrets,
        talosVersion: i.talosVersion.tag,
        kubernetesVersion: i.kubernetesVersion.version,
        controlPlanePatch: render.talos.controlPlane,
        workerPatch: render.talos.worker,
        installDisk: m.installDisk,
        installImage: m.installImage,
      }
      const user = {all: m.patches.map((x) => x.yaml), controlPlane: m.controlPlanePatches.map((x) => x.yaml), worker: m.workerPatches.map((x) => x.yaml)}
      // Generated and validated in a private folder, then moved into the state folder: a patch
      // Talos refuses never replaces the configs a running cluster was made with.
      await withPrivateTempDir('ichor-talos-configs-', async (dir) => {
        try {
          // talosctl gen config also writes a talosconfig; a restored one is the same CA.
          const out = await genConfig({...base, userPatches: user, outDir: dir})
          await validateConfig(out.controlPlane)
          if (i.workers.length > 0) await validateConfig(out.worker)
          // Every node with its own patches: rendered and validated now, before any node is touched.
          for (const node of nodesWithPatches(i)) {
            const file = join(dir, `node-${node}.yaml`)
            await renderNodeConfig(p.state, i, node, file, i.workers.includes(node) ? out.worker : out.controlPlane)
            await validateConfig(file)
          }
          rmSync(p.state.configsHash, {force: true}) // a cut between the files and the hash regenerates them
          writeStateFile(p.state, 'talosconfig', readFileSync(out.talosconfig, 'utf8'))
          writeStateFile(p.state, 'controlPlaneConfig', readFileSync(out.controlPlane, 'utf8'))
          writeStateFile(p.state, 'workerConfig', readFileSync(out.worker, 'utf8'))
        } catch (error) {
          if (!(error instanceof TalosctlError) || allPatches(m).length === 0) throw error
          throw await invalidPatchError(error, i, base)
        }
      })
      writeStateFile(p.state, 'configsHash', `${configsInputHash(i, render)}\n`)
    },
  }
}

/** Nodes that get a config of their own (their --node-patch entries applied to their role's). */
function nodesWithPatches(i: TalosClusterSpec): string[] {
  return [...new Set(i.machineConfig.nodePatches.map((p) => p.node))]
}

/** A node's config file: its role's, with that node's own patches applied when it has any. */
async function renderNodeConfig(state: LocalState, i: TalosClusterSpec, node: string, outPath: string, roleFile?: string): Promise<string> {
  const base = roleFile ?? (i.workers.includes(node) ? state.workerConfig : state.controlPlaneConfig)
  const patches = patchesForNode(i.machineConfig, node).map((x) => x.yaml)
  if (patches.length === 0) return base
  await patchConfigFile({base, patches, outPath})
  return outPath
}

/**
 * The patch talosctl refused (gen config or validate), found by rendering with one patch at a
 * time: exit 2 naming the flag and the file with talosctl's message (which names the field).
 * Only on the failure path, so a valid set costs nothing extra.
 */
async function invalidPatchError(
  error: TalosctlError,
  i: TalosClusterSpec,
  base: Omit<Parameters<typeof genConfig>[0], 'outDir' | 'userPatches'>,
): Promise<IchorError> {
  const culprit = await withPrivateTempDir('ichor-patch-check-', async (dir) => {
    for (const {flag, patch} of allPatches(i.machineConfig)) {
      const only = {all: [] as string[], controlPlane: [] as string[], worker: [] as string[]}
      const node = flag.startsWith('--node-patch ') ? flag.slice('--node-patch '.length) : undefined
      if (flag === '--config-patch') only.all.push(patch.yaml)
      if (flag === '--config-patch-control-plane') only.controlPlane.push(patch.yaml)
      if (flag === '--config-patch-worker') only.worker.push(patch.yaml)
      try {
        const out = await genConfig({...base, userPatches: only, outDir: dir})
        const role = node ? (i.workers.includes(node) ? out.worker : out.controlPlane) : flag === '--config-patch-worker' ? out.worker : out.controlPlane
        if (node) {
          await patchConfigFile({base: role, patches: [patch.yaml], outPath: join(dir, 'node.yaml')})
          await validateConfig(join(dir, 'node.yaml'))
        } else {
          await validateConfig(role)
          if (flag === '--config-patch' && i.workers.length > 0) await validateConfig(out.worker)
        }
      } catch (e) {
        if (e instanceof TalosctlError) return {flag, source: patch.source, message: e.talosctlMessage}
        throw e
      }
    }
    return undefined
  })
  if (!culprit) return new IchorError(`the machine configs with your patches are invalid: ${error.talosctlMessage}`, {exitCode: EXIT.usage})
  return new IchorError(`${culprit.flag} ${culprit.source}: Talos refuses the patch: ${culprit.message}`, {
    exitCode: EXIT.usage,
    hint: 'fix the patch (talosctl validate --mode metal names the field); no node was touched',
  })
}

/**
 * A node configured from another secrets bundle (a second machine ran `init` against the same
 * fresh nodes first): it refuses this bundle's talosconfig, so nothing here may touch it, and
 * this bundle must never reach the cluster. Exit 3, as for another operator holding the Lease.
 */
export function otherBundleError(state: LocalState, r: Reachability): IchorError {
  return new IchorError(
    `node ${r.node} is already configured from another Talos secrets bundle: it refuses the talosconfig in ${state.dir} (${r.message ?? 'TLS handshake refused'})`,
    {
      exitCode: EXIT.lease,
      hint: `another machine ran ichor init against these nodes. Continue on that machine, or copy its state folder here and pass it with --state-dir; once its init has finished, \`ichor init --kubeconfig <its kubeconfig> --state-dir <a new folder>\` restores the bundle from the cluster. To start over instead, reset node ${r.node} to maintenance mode (talosctl reset) first.`,
    },
  )
}

/**
 * Applies the configs to nodes still in maintenance mode. `seen` is what the read-only
 * pre-check found, used for the first probe only (a re-probe asks the nodes again) and only
 * when it checked the configured nodes with this state folder's talosconfig.
 *
 * The first control plane is configured, and confirmed to run this bundle, before any other
 * node: when two machines race on the same fresh nodes, a node in maintenance mode takes the
 * first config it is given, so the run that wins the first control plane is the one that goes
 * on, and the other stops there without having configured any node (no split cluster).
 */
export function applyConfigsTask(p: {
  state: LocalState
  inputs: TalosClusterSpec
  seen?: Later<Reachability[]>
  timeoutMs?: number
  /** The run's reads of the nodes (a configured node's answer is its config, reused by later steps). */
  reads?: TalosNodeReads
}): Task {
  let seen = p.seen
  const nodes = [...p.inputs.controlPlanes, ...p.inputs.workers]
  const ask = () =>
    Promise.all(nodes.map((n) => (p.reads ? p.reads.reachable(n, {talosconfig: p.state.talosconfig}) : isReachable(n, {talosconfig: p.state.talosconfig}))))
  const reach = (node: string) => isReachable(node, {talosconfig: p.state.talosconfig})
  /** Applies one node's config when it is in maintenance mode; a node another bundle configured is exit 3. */
  const applyTo = async (role: string, node: string, file: string, progress: (line: string) => void) => {
    const r = await reach(node)
    if (r.state === 'configured' && r.ours === false) throw otherBundleError(p.state, r)
    if (r.state === 'unreachable') throw new IchorError(`${role} ${node} did not answer before its config was applied (${r.message ?? 'no answer'})`)
    if (r.state !== 'maintenance') return
    try {
      // A node with its own patches gets its role's config with them applied (rendered here, kept nowhere).
      await withPrivateTempDir('ichor-node-config-', async (dir) => {
        const config = await renderNodeConfig(p.state, p.inputs, node, join(dir, 'config.yaml'), file)
        const apply = () => applyConfig({node, file: config, insecure: true})
        await (p.reads ? p.reads.write(node, apply) : apply())
      })
    } catch (error) {
      // Refused because another machine's config got there first: say so, as the probe would.
      const after = await reach(node)
      if (after.state === 'configured' && after.ours === false) throw otherBundleError(p.state, after)
      throw error
    }
    progress(`${role} ${node} configured`)
  }
  /** Waits until the node answers this bundle's talosconfig (it installs and restarts after an apply). */
  const confirmOurs = async (node: string) => {
    const deadline = Date.now() + (p.timeoutMs ?? 600_000)
    for (;;) {
      const r = await reach(node)
      if (r.state === 'configured' && r.ours === true) return
      if (r.state === 'configured' && r.ours === false) throw otherBundleError(p.state, r)
      if (Date.now() > deadline)
        throw new IchorError(
          `control plane ${node} did not answer with the talosconfig in ${p.state.dir} after its config was applied (${r.state}${r.message ? `: ${r.message}` : ''})`,
        )
      await sleep(2_000)
    }
  }
  return {
    id: 'apply-configs',
    title: 'Apply machine configs to nodes in maintenance mode',
    async probe() {
      let states = seen ? await seen() : await ask()
      seen = undefined
      // A fresh state folder had no talosconfig at the pre-check: "configured" was not checked against this bundle.
      if (states.some((s) => s.state === 'configured' && s.ours === undefined)) states = await ask()
      const foreign = states.find((s) => s.state === 'configured' && s.ours === false)
      if (foreign) throw otherBundleError(p.state, foreign)
      const waiting = states.filter((s) => s.state !== 'configured').map((s) => s.node)
      return waiting.length === 0 ? holds('every node is configured from this bundle') : missing(`in maintenance mode: ${waiting.join(', ')}`)
    },
    async run(progress) {
      const [first, ...others] = p.inputs.controlPlanes
      await applyTo('control plane', first!, p.state.controlPlaneConfig, progress)
      await confirmOurs(first!)
      // Then every other node at once: a 3+2 cluster must not take five times a single node's wait.
      await Promise.all([
        ...others.map((node) => applyTo('control plane', node, p.state.controlPlaneConfig, progress)),
        ...p.inputs.workers.map((node) => applyTo('worker', node, p.state.workerConfig, progress)),
      ])
    },
  }
}

/** Bootstraps etcd once (AlreadyExists is success), fetches the kubeconfig, waits for the API server. */
export function bootstrapTask(p: {
  state: LocalState
  inputs: TalosClusterSpec
  session: Session
  timeoutMs: number
  /** `ichor restore`: the etcd snapshot etcd starts from (talosctl bootstrap --recover-from). */
  recoverFrom?: string
}): Task {
  const node = p.inputs.controlPlanes[0]!
  return {
    id: 'bootstrap-etcd',
    title: p.recoverFrom ? "Bootstrap etcd on the first control plane from the backup's snapshot" : 'Bootstrap etcd on the first control plane',
    async probe() {
      return (await p.session.clusterAnswers()) ? holds('the API server answers') : missing('the cluster is not bootstrapped yet')
    },
    async run(progress) {
      // Bootstrapping is etcd's point of no return: only on a node that runs this bundle.
      const r = await isReachable(node, {talosconfig: p.state.talosconfig})
      if (r.state === 'configured' && r.ours === false) throw otherBundleError(p.state, r)
      const {alreadyBootstrapped} = await bootstrap({node, talosconfig: p.state.talosconfig, recoverFrom: p.recoverFrom, timeoutMs: p.timeoutMs})
      if (alreadyBootstrapped) progress('etcd was already bootstrapped')
      await fetchKubeconfig({node, talosconfig: p.state.talosconfig, outPath: p.state.kubeconfig})
      secureStateFiles(p.state)
      p.session.reconnect()
      await waitForApiServer(await connectKube({kubeconfig: p.state.kubeconfig, probe: false}), {timeoutMs: p.timeoutMs, onProgress: progress})
    },
  }
}

/** The state folder's control-plane config when it still carries the inline entry. */
function localConfigWithInline(state: LocalState): string | undefined {
  const read = readStateFile(state, 'controlPlaneConfig')
  return read.status === 'ok' ? withoutInlineManifest(read.text) : undefined
}

/**
 * Takes Cilium out of Talos: the inline entry on every control plane, then Talos's inventory,
 * then the same removal in the state folder's controlplane.yaml (applying it later must not
 * bring the entry back).
 */
export function talosHandoverTask(p: {session: Session; state: LocalState; controlPlanes: string[]; reads: TalosNodeReads}): Task {
  // The run's reads: the control planes' configs init's pre-check read serve the probe.
  const access = () => ({talosconfig: p.state.talosconfig, controlPlanes: p.controlPlanes, reads: p.reads})
  return {
    id: 'talos-handover',
    title: 'Take Cilium out of Talos: inventory, inline-manifest entry on the nodes and in the local controlplane.yaml',
    async probe() {
      const pending = await talosHandoverPending(await p.session.kube(), access())
      const local = localConfigWithInline(p.state) !== undefined
      const left = [
        pending.inlineManifestOn.length ? `inline manifest on ${pending.inlineManifestOn.join(', ')}` : '',
        pending.manifestRunOn.length ? `Talos's manifest run on ${pending.manifestRunOn.join(', ')} still lists the inline manifest` : '',
        pending.inInventory ? "Cilium is in Talos's inventory" : '',
        pending.managedByTalos.length ? `${pending.managedByTalos.length} Cilium object(s) still list the field manager talos` : '',
        local ? `${p.state.controlPlaneConfig} still carries the inline manifest` : '',
      ].filter(Boolean)
      return left.length === 0 ? holds('Helm alone owns Cilium; the local controlplane.yaml has no inline entry') : missing(left.join('; '))
    },
    async run(progress) {
      const r = await handOverCiliumFromTalos(await p.session.kube(), {...access(), progress})
      progress(`inline entry removed from ${r.patchedNodes.length} control plane(s)`)
      if (r.inventory.removedEntries.length) progress(`${r.inventory.removedEntries.length} entries taken out of Talos's inventory`)
      if (r.talosFieldsToHelm.length) progress(`fields of field manager talos handed to helm on ${r.talosFieldsToHelm.length} object(s)`)
      const stripped = localConfigWithInline(p.state)
      if (stripped !== undefined) {
        writeStateFile(p.state, 'controlPlaneConfig', stripped)
        progress(`inline entry removed from ${p.state.controlPlaneConfig}`)
      }
    },
  }
}

// ---------------------------------------------------------------------------------------
// Day-2: the Talos side of the kube-proxy switch (`ichor cni kube-proxy replace|restore`)

export interface KubeProxyTalosInput {
  session: Session
  /** The run's access to the nodes (ctx.talos). */
  talos: TalosAccess
}

/** kube-proxy on or off in the machine config of every node that carries the setting (no reboot). */
export function switchKubeProxyOnTalosTask(p: KubeProxyTalosInput & {enabled: boolean}): Task {
  const want = p.enabled ? 'enabled' : 'disabled'
  return {
    id: p.enabled ? 'talos-enable-kube-proxy' : 'talos-disable-kube-proxy',
    title: `${p.enabled ? 'Enable' : 'Disable'} kube-proxy in the Talos machine configs`,
    hint: 'the nodes already patched keep the change; run the same command again to finish',
    async probe() {
      const talos = (await p.talos.installation()).spec.talos
      const pending = await nodesToSwitch({talos, talosconfig: await p.talos.talosconfig(), enabled: p.enabled, reads: p.talos.reads})
      return pending.length === 0
        ? holds(
            `kube-proxy ${want} on ${kubeProxyNodes(talos)
              .map((n) => n.node)
              .join(', ')}`,
          )
        : missing(`kube-proxy not ${want} on ${pending.map((n) => `${n.role} ${n.node}`).join(', ')}`)
    },
    async run(progress) {
      const kube = await p.session.kube()
      // Talos creates kube-proxy only when its objects are absent from its inventory too: clear keys a removal left behind.
      if (p.enabled) {
        const left = await kubeProxyLeftovers(kube)
        const live = new Set(left.objects.map(inventoryKey))
        await removeTalosInventoryKeys(
          kube,
          left.inventoryKeys.filter((k) => !live.has(k)),
        )
      }
      const talos = (await p.talos.installation()).spec.talos
      await switchKubeProxyOnNodes({talos, talosconfig: await p.talos.talosconfig(), enabled: p.enabled, reads: p.talos.reads, progress})
    },
  }
}

/** Talos creates the kube-proxy DaemonSet when the proxy is enabled; it must be ready before Cilium stops replacing it. */
export function waitKubeProxyTask(p: {session: Session; timeoutMs: number}): Task {
  const {namespace, name} = KUBE_PROXY
  return {
    id: 'wait-kube-proxy',
    title: `Wait for the ${namespace}/${name} DaemonSet Talos creates`,
    mutating: false,
    hint: `kube-proxy is enabled on Talos but not ready; Cilium still replaces it. See kubectl -n ${namespace} describe ds/${name}, then run the same command again`,
    async probe() {
      const w = await readWorkloadRollout(await p.session.kube(), 'DaemonSet', namespace, name)
      return w?.rolledOut ? holds(`${w.ready}/${w.desired} ready`) : missing(w ? w.state : `DaemonSet ${namespace}/${name} does not exist yet`)
    },
    async run(progress) {
      await waitForDaemonSetReady(await p.session.kube(), namespace, name, {timeoutMs: p.timeoutMs, onProgress: progress})
    },
  }
}

/**
 * What Talos's kube-proxy manifest created, deleted with its inventory keys (Talos itself never
 * deletes it, see kube-proxy.ts). The run the patch that turned kube-proxy off started holds the
 * inventory it read, kube-proxy's keys included, and writes that copy back unconditionally
 * (manifest-runs.ts): first wait until no control plane's last run lists "10-kube-proxy", as the
 * Cilium hand-over waits for "99-cilium".
 */
export function removeKubeProxyTask(p: KubeProxyTalosInput): Task {
  const access = async () => ({talosconfig: await p.talos.talosconfig(), controlPlanes: (await p.talos.installation()).spec.talos.controlPlanes})
  return {
    id: 'remove-kube-proxy',
    title: 'Remove the kube-proxy DaemonSet Talos created, and its inventory entries',
    async probe() {
      const [left, running] = await Promise.all([
        kubeProxyLeftovers(await p.session.kube()),
        access().then((a) => controlPlanesStillApplying(a, KUBE_PROXY_MANIFEST_ID)),
      ])
      if (left.objects.length === 0 && left.inventoryKeys.length === 0 && running.length === 0) return holds('no kube-proxy objects left')
      return missing(
        [
          ...left.objects.map((o) => `${o.kind} ${o.name}`),
          ...(left.inventoryKeys.length ? [`${left.inventoryKeys.length} inventory entries`] : []),
          ...(running.length ? [`Talos's manifest run on ${running.join(', ')} still lists kube-proxy`] : []),
        ].join(', '),
      )
    },
    async run(progress) {
      await waitForManifestRunsWithout({...(await access()), id: KUBE_PROXY_MANIFEST_ID, removal: 'the kube-proxy removal', progress})
      const removed = await removeKubeProxyObjects(await p.session.kube())
      if (removed.length) progress(`deleted ${removed.join(', ')}`)
    },
  }
}
