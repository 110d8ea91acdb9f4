// The Talos side of the kube-proxy switch (ADR-0099 decision 9): whether each node's
// machine config runs kube-proxy, the patch that flips it, and the kube-proxy objects Talos
// leaves behind when it is turned off.
//
// What Talos does (siderolabs/talos v1.14.0-rc.1, byte-identical in v1.14.1 for these files):
// - internal/app/machined/pkg/controllers/k8s/manifest.go renders the bootstrap manifest
//   "10-kube-proxy" (DaemonSet, ServiceAccount and ClusterRoleBinding `kube-proxy`, plus a
//   ConfigMap `kube-proxy-<checksum>` when a proxy config is given) only while the proxy is
//   enabled, on control planes.
// - manifest_apply.go beside it is create-only: it creates an object that is neither in the
//   cluster nor in the inventory (1.13+), and never deletes one. So enabling kube-proxy makes
//   Talos create it, but disabling it leaves the DaemonSet running until `talosctl
//   upgrade-k8s` prunes it (pkg/cluster/kubernetes/talos_managed.go, PerformManifestsSync).
//   ichor removes exactly those objects and their inventory keys itself, as that prune
//   would, instead of running a whole upgrade-k8s.
// The form follows the config contract init generated (patches.ts): v1.14+ `KubeProxyConfig`
// `enabled` on control planes (gen config writes the document there only); below v1.14
// `cluster.proxy.disabled` on every node. An absent setting means enabled in both forms
// (`KubeProxyConfigV1Alpha1.Enabled()` and the v1alpha1 ProxyConfig).
import {parseAllDocuments} from 'yaml'
import {IchorError} from '../errors/errors.js'
import type {Kube} from '../kube/client.js'
import {deleteObject, getObject, listObjects, type KubeObject} from '../kube/objects.js'
import type {InstallationSpec} from '../state/installation.js'
import {toYaml} from '../yaml/emit.js'
import {inventoryKey, readTalosInventoryKeys, removeTalosInventoryKeys, type InventoryRef} from './inventory.js'
import {patchMachineConfig} from './talosctl.js'
import type {TalosNodeReads} from './node-reads.js'
import {hasMultidocKubernetesConfig} from './versions.js'

export const KUBE_PROXY = {namespace: 'kube-system', name: 'kube-proxy'} as const
/** The id of Talos's kube-proxy Manifest resource, as ManifestStatus lists it (k8s/manifest.go). */
export const KUBE_PROXY_MANIFEST_ID = '10-kube-proxy'

export interface KubeProxyNode {
  node: string
  role: 'control plane' | 'worker'
}

/** The nodes whose config carries the setting, as init wrote it for the cluster's Talos version. */
export function kubeProxyNodes(talos: InstallationSpec['talos']): KubeProxyNode[] {
  const cps = talos.controlPlanes.map((node) => ({node, role: 'control plane' as const}))
  if (hasMultidocKubernetesConfig(talos.talosVersion)) return cps
  return [...cps, ...talos.workers.map((node) => ({node, role: 'worker' as const}))]
}

type Doc = {kind?: string; apiVersion?: string; enabled?: boolean; cluster?: {proxy?: {disabled?: boolean}}}

/** Whether a machine config runs kube-proxy (the typed document wins over the legacy field, as Talos refuses both together). */
export function kubeProxyEnabledIn(configYaml: string): boolean {
  const docs = parseAllDocuments(configYaml)
    .map((d) => d.toJS() as Doc | null)
    .filter((d): d is Doc => d !== null && typeof d === 'object')
  const typed = docs.find((d) => d.kind === 'KubeProxyConfig')
  if (typed) return typed.enabled ?? true
  const legacy = docs.find((d) => !d.kind && !d.apiVersion)
  return legacy?.cluster?.proxy?.disabled !== true
}

/** The patch that turns kube-proxy on or off in the form of the cluster's config contract. */
export function kubeProxyPatch(talosVersion: string, enabled: boolean): string {
  if (hasMultidocKubernetesConfig(talosVersion)) return toYaml({apiVersion: 'v1alpha1', kind: 'KubeProxyConfig', enabled}, {sortKeys: false})
  return toYaml({cluster: {proxy: {disabled: !enabled}}}, {sortKeys: false})
}

/**
 * The nodes whose config does not have kube-proxy as wanted. The configs are read in parallel
 * (talosctl's own bound) through the run's reads, so the probe, the action and the check after it
 * share one read per node until a patch drops it.
 */
export async function nodesToSwitch(p: {
  talos: InstallationSpec['talos']
  talosconfig: string
  enabled: boolean
  reads: TalosNodeReads
}): Promise<KubeProxyNode[]> {
  const nodes = kubeProxyNodes(p.talos)
  const enabled = await Promise.all(nodes.map(async (n) => kubeProxyEnabledIn(await p.reads.machineConfig(n.node, p.talosconfig))))
  return nodes.filter((_, i) => enabled[i] !== p.enabled)
}

/** Patches every node that needs it (no reboot: Talos reconciles its manifests at once). Returns the nodes patched. */
export async function switchKubeProxyOnNodes(p: {
  talos: InstallationSpec['talos']
  talosconfig: string
  enabled: boolean
  reads: TalosNodeReads
  progress?: (m: string) => void
}): Promise<string[]> {
  const patch = kubeProxyPatch(p.talos.talosVersion, p.enabled)
  const patched: string[] = []
  for (const n of await nodesToSwitch(p)) {
    await p.reads.write(n.node, () => patchMachineConfig({node: n.node, talosconfig: p.talosconfig, patch, mode: 'no-reboot'}))
    p.progress?.(`${n.role} ${n.node}: kube-proxy ${p.enabled ? 'enabled' : 'disabled'}`)
    patched.push(n.node)
  }
  return patched
}

/** The objects of Talos's "10-kube-proxy" manifest that exist now, and their inventory keys still recorded. */
export async function kubeProxyLeftovers(kube: Kube): Promise<{objects: InventoryRef[]; inventoryKeys: string[]}> {
  const ns = KUBE_PROXY.namespace
  const name = KUBE_PROXY.name
  const fixed: Array<InventoryRef & {apiVersion: string}> = [
    {apiVersion: 'apps/v1', group: 'apps', kind: 'DaemonSet', namespace: ns, name},
    {apiVersion: 'v1', group: '', kind: 'ServiceAccount', namespace: ns, name},
    {apiVersion: 'rbac.authorization.k8s.io/v1', group: 'rbac.authorization.k8s.io', kind: 'ClusterRoleBinding', namespace: '', name},
  ]
  const objects: InventoryRef[] = []
  for (const ref of fixed) {
    if (await getObject(kube, {apiVersion: ref.apiVersion, kind: ref.kind, namespace: ref.namespace || undefined, name: ref.name}, {metadataOnly: true}))
      objects.push(ref)
  }
  const configMaps = await listObjects<KubeObject>(kube, {apiVersion: 'v1', kind: 'ConfigMap', namespace: ns}, {labelSelector: 'k8s-app=kube-proxy'})
  for (const cm of configMaps) if (cm.metadata.name.startsWith(`${name}-`)) objects.push({group: '', kind: 'ConfigMap', namespace: ns, name: cm.metadata.name})
  const wanted = new Set([...fixed.map(inventoryKey), ...objects.map(inventoryKey)])
  const inventoryKeys = (await readTalosInventoryKeys(kube)).filter((k) => wanted.has(k) || /^kube-system_kube-proxy-[^_]+__ConfigMap$/.test(k))
  return {objects, inventoryKeys}
}

const API_VERSION: Record<string, string> = {apps: 'apps/v1', '': 'v1', 'rbac.authorization.k8s.io': 'rbac.authorization.k8s.io/v1'}

/** Deletes what Talos's kube-proxy manifest created, then its inventory keys (the order upgrade-k8s's prune uses). */
export async function removeKubeProxyObjects(kube: Kube): Promise<string[]> {
  const {objects, inventoryKeys} = await kubeProxyLeftovers(kube)
  const removed: string[] = []
  for (const ref of objects) {
    const apiVersion = API_VERSION[ref.group]
    if (!apiVersion) throw new IchorError(`unexpected kube-proxy object ${ref.kind} ${ref.name}`)
    if ((await deleteObject(kube, {apiVersion, kind: ref.kind, namespace: ref.namespace || undefined, name: ref.name})) === 'deleted')
      removed.push(`${ref.kind} ${ref.namespace ? `${ref.namespace}/` : ''}${ref.name}`)
  }
  await removeTalosInventoryKeys(kube, inventoryKeys)
  return removed
}

export interface KubeProxyLeftover {
  mode: 'nftables'
  tables: string[]
  nodes: string[]
  note: string
}

/**
 * What a removed kube-proxy leaves behind: Talos runs it in nftables mode unless told otherwise
 * (siderolabs/talos v1.14.0-rc.1, internal/app/machined/pkg/controllers/k8s/control_plane.go
 * manageProxyConfigArgs: an empty mode becomes "nftables"), and kube-proxy's nftables proxier keeps
 * its rules in a table "kube-proxy" per IP family (kubernetes pkg/proxy/nftables/proxier.go,
 * kubeProxyTable). Deleting the DaemonSet does not remove them; a reboot does (the kernel's
 * ruleset is not persisted). Its DaemonSet ran on every node, workers included.
 */
export function kubeProxyNftablesLeftover(talos: InstallationSpec['talos']): KubeProxyLeftover {
  const nodes = [...talos.controlPlanes, ...talos.workers]
  const tables = ['ip kube-proxy', 'ip6 kube-proxy']
  const note = `kube-proxy ran in nftables mode (Talos's default): its nftables tables ${tables.join(' and ')} stay on ${nodes.join(', ')} until each node reboots; Cilium does not need them. To clear them, reboot one node at a time: ${nodes.map((n) => `talosctl reboot -n ${n}`).join('; ')}`
  return {mode: 'nftables', tables, nodes, note}
}
