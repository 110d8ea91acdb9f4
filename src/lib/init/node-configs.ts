// The dry run's view of the machine configs: every node's full config, rendered by talosctl as a
// real run renders it (ichor's patches, then the operator's), with throwaway secrets that are
// redacted anyway, and a per-node summary (role, install disk, installer image, patches, hostname).
import {readFile} from 'node:fs/promises'
import {join} from 'node:path'
import {withPrivateTempDir} from '../fs/private-files.js'
import {IchorError} from '../errors/errors.js'
import {describeSelector} from '../talos/disk-selector.js'
import {allPatches, installDiskFor, patchesForNode, patchValues} from '../talos/machine-config.js'
import {redactMachineConfig} from '../talos/redact.js'
import {genConfig, patchConfigFile, TalosctlError, validateConfig} from '../talos/talosctl.js'
import type {InitInputs} from './inputs.js'
import type {InitRender} from './render.js'
import {EXIT} from '../errors/exit-codes.js'

export interface NodeConfigView {
  node: string
  role: 'controlplane' | 'worker'
  /** The full machine config with every secret value replaced; undefined when talosctl was not available. */
  config?: string
  summary: string
}

/**
 * Every node's config and summary. Without talosctl the summaries alone (the configs need
 * `talosctl gen config`); a patch Talos refuses fails here as in a real run.
 */
export async function renderNodeConfigViews(inputs: InitInputs, render: InitRender, talosctlAvailable: boolean): Promise<NodeConfigView[]> {
  const m = inputs.machineConfig
  const nodes = [...inputs.controlPlanes.map((n) => [n, 'controlplane'] as const), ...inputs.workers.map((n) => [n, 'worker'] as const)]
  const views: NodeConfigView[] = nodes.map(([node, role]) => ({node, role, summary: summaryOf(inputs, node, role)}))
  if (!talosctlAvailable || nodes.length === 0) return views
  await withPrivateTempDir('ichor-dry-configs-', (dir) => renderInto(dir, inputs, render, views)).catch((error: unknown) => {
    // A patch Talos refuses: usage (exit 2), naming the patches, as the real run's check does.
    if (error instanceof TalosctlError && allPatches(m).length > 0) {
      throw new IchorError(
        `Talos refuses the machine configs with your patches (${allPatches(m)
          .map((p) => `${p.flag} ${p.patch.source}`)
          .join(', ')}): ${error.talosctlMessage}`,
        {exitCode: EXIT.usage},
      )
    }
    throw error
  })
  return views
}

async function renderInto(dir: string, inputs: InitInputs, render: InitRender, views: NodeConfigView[]): Promise<void> {
  const m = inputs.machineConfig
  // No --with-secrets: talosctl makes a throwaway bundle, and nothing of it is written out.
  const out = await genConfig({
    clusterName: inputs.clusterName,
    endpoint: inputs.endpoint,
    secretsPath: '',
    talosVersion: inputs.talosVersion.tag,
    kubernetesVersion: inputs.kubernetesVersion.version,
    controlPlanePatch: render.talos.controlPlane,
    workerPatch: render.talos.worker,
    installDisk: m.installDisk,
    installImage: m.installImage,
    userPatches: {all: m.patches.map((p) => p.yaml), controlPlane: m.controlPlanePatches.map((p) => p.yaml), worker: m.workerPatches.map((p) => p.yaml)},
    outDir: dir,
  })
  for (const view of views) {
    const base = view.role === 'worker' ? out.worker : out.controlPlane
    const own = patchesForNode(m, view.node)
    let file = base
    if (own.length > 0) {
      file = join(dir, `node-${view.node}.yaml`)
      await patchConfigFile({base, patches: own.map((p) => p.yaml), outPath: file})
    }
    await validateConfig(file)
    view.config = redactMachineConfig(await readFile(file, 'utf8'))
  }
}

function summaryOf(inputs: InitInputs, node: string, role: 'controlplane' | 'worker'): string {
  const m = inputs.machineConfig
  const {disk, selector, from} = installDiskFor(m, node, role, inputs.talosVersion)
  const patches = [
    ...m.patches.map((p) => `--config-patch ${p.source}`),
    ...(role === 'worker'
      ? m.workerPatches.map((p) => `--config-patch-worker ${p.source}`)
      : m.controlPlanePatches.map((p) => `--config-patch-control-plane ${p.source}`)),
    ...patchesForNode(m, node).map((p) => `--node-patch ${p.source}`),
  ]
  return [
    `${node}: ${role === 'worker' ? 'worker' : 'control plane'}`,
    `  install disk: ${disk ?? (selector ? describeSelector(selector) : 'none')} (${from}); its contents are erased`,
    `  installer image: ${m.installImage ?? "Talos's default for its version"}`,
    `  patches: ${patches.length > 0 ? patches.join(', ') : '(none of yours)'}`,
    `  hostname: ${hostnameOf(inputs, node, role) ?? "Talos's (stable, from the machine)"}`,
  ].join('\n')
}

/** The hostname a patch sets (HostnameConfig or machine.network.hostname), the node's own first. */
function hostnameOf(inputs: InitInputs, node: string, role: 'controlplane' | 'worker'): string | undefined {
  const m = inputs.machineConfig
  const ordered = [...patchesForNode(m, node), ...(role === 'worker' ? m.workerPatches : m.controlPlanePatches), ...m.patches]
  for (const p of ordered) {
    for (const value of patchValues(p.yaml)) {
      const js = value as {kind?: string; hostname?: unknown; machine?: {network?: {hostname?: unknown}}} | null
      if (js?.kind === 'HostnameConfig' && typeof js.hostname === 'string') return js.hostname
      if (typeof js?.machine?.network?.hostname === 'string') return js.machine.network.hostname
    }
  }
  return undefined
}
