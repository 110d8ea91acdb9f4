// The Talos side of the Cilium hand-over, run once Helm has adopted the objects
// (DESIGN.md step 4). Two idempotent steps, each with a read-only probe:
//   1. remove the inline-manifest entry from every control plane, then
//   2. take the Cilium objects out of Talos's inventory (Talos 1.13+), so
//      `talosctl upgrade-k8s` neither prunes them nor re-applies the bootstrap render.
// The order matters: a control plane that still carries the entry backfills existing
// objects into the inventory, undoing step 2 (INVENTORY.md, section 3).
import {isMap, isSeq, parseAllDocuments} from 'yaml'
import {IchorError} from '../errors/errors.js'
import type {Kube} from '../kube/client.js'
import {isCiliumInTalosInventory, removeCiliumFromTalosInventory, type InventoryRemoval} from './inventory.js'
import {DEFAULT_INLINE_MANIFEST_NAME, removeInlineManifestPatch} from './patches.js'
import {getMachineConfig, patchMachineConfig} from './talosctl.js'

export type InlineManifestForm = 'document' | 'legacy'

/** Which forms of the named inline manifest a machine config carries (v1.14 document, `cluster.inlineManifests`). */
export function inlineManifestForms(configYaml: string, name = DEFAULT_INLINE_MANIFEST_NAME): InlineManifestForm[] {
  const forms = new Set<InlineManifestForm>()
  for (const doc of parseAllDocuments(configYaml)) {
    if (doc.errors.length > 0) throw new IchorError(`the machine config is not valid YAML: ${doc.errors[0]!.message}`)
    const value = doc.toJS() as Record<string, unknown> | null
    if (!value || typeof value !== 'object') continue
    if (value.kind === 'KubeInlineManifestConfig' && value.name === name) forms.add('document')
    const cluster = value.cluster as {inlineManifests?: Array<{name?: string}>} | undefined
    if (!value.kind && cluster?.inlineManifests?.some((m) => m?.name === name)) forms.add('legacy')
  }
  return [...forms]
}

/**
 * The patch removing the entry in the form(s) this config actually uses: the form follows
 * the config contract it was generated for, not the Talos version the node now runs.
 */
export function inlineManifestRemovalPatch(configYaml: string, name = DEFAULT_INLINE_MANIFEST_NAME): string | undefined {
  const forms = inlineManifestForms(configYaml, name)
  if (forms.length === 0) return undefined
  // removeInlineManifestPatch picks the form from a version: v1.14 contracts use the document.
  return forms.map((form) => removeInlineManifestPatch(form === 'document' ? 'v1.14.0' : 'v1.13.0', name)).join('---\n')
}

/**
 * The same removal on a machine config file (the state folder's controlplane.yaml): the next
 * `talosctl apply-config -f controlplane.yaml` (how a control plane is added) would put the
 * entry back, and a later `upgrade-k8s` would revert Cilium to it. Undefined when the config
 * carries no entry; every other document and field is kept as written.
 */
export function withoutInlineManifest(configYaml: string, name = DEFAULT_INLINE_MANIFEST_NAME): string | undefined {
  if (inlineManifestForms(configYaml, name).length === 0) return undefined
  const kept: string[] = []
  for (const doc of parseAllDocuments(configYaml)) {
    const value = doc.toJS() as Record<string, unknown> | null
    if (value?.kind === 'KubeInlineManifestConfig' && value.name === name) continue
    const manifests = doc.getIn(['cluster', 'inlineManifests'], true)
    if (!value?.kind && isSeq(manifests)) {
      manifests.items = manifests.items.filter((m) => !(isMap(m) && m.get('name') === name))
      if (manifests.items.length === 0) doc.deleteIn(['cluster', 'inlineManifests'])
    }
    kept.push(doc.toString().replace(/^---\n/, '').replace(/\n*$/, '\n'))
  }
  return kept.join('---\n')
}

export interface ControlPlaneAccess {
  talosconfig: string
  /** Control plane node addresses. */
  controlPlanes: string[]
  /** Inline manifest entry name (default `cilium`). */
  name?: string
}

/** Probe for one node: does its config still carry the entry? */
export async function controlPlaneHasInlineManifest(opts: {node: string; talosconfig: string; name?: string}): Promise<boolean> {
  const config = await getMachineConfig({node: opts.node, talosconfig: opts.talosconfig})
  return inlineManifestForms(config, opts.name).length > 0
}

/** Probe for the cluster: the control planes still carrying the entry. */
export async function controlPlanesWithInlineManifest(opts: ControlPlaneAccess): Promise<string[]> {
  const carries = await Promise.all(opts.controlPlanes.map((node) => controlPlaneHasInlineManifest({node, talosconfig: opts.talosconfig, name: opts.name})))
  return opts.controlPlanes.filter((_, i) => carries[i])
}

/** Removes the entry from every control plane that has it (no reboot). Returns the nodes patched. */
export async function removeInlineManifestFromControlPlanes(opts: ControlPlaneAccess): Promise<string[]> {
  // Every control plane at once (each patch is one round trip and a manifest run on that node).
  const done = await Promise.all(opts.controlPlanes.map(async (node) => {
    const config = await getMachineConfig({node, talosconfig: opts.talosconfig})
    const patch = inlineManifestRemovalPatch(config, opts.name)
    if (!patch) return false
    await patchMachineConfig({node, talosconfig: opts.talosconfig, patch, mode: 'no-reboot'})
    return true
  }))
  return opts.controlPlanes.filter((_, i) => done[i])
}

export interface HandoverResult {
  /** Control planes whose inline entry was removed by this run. */
  patchedNodes: string[]
  inventory: InventoryRemoval
}

/** Is anything of the hand-over left to do? (read-only; for --dry-run and task probes) */
export async function talosHandoverPending(kube: Kube, opts: ControlPlaneAccess): Promise<{inlineManifestOn: string[]; inInventory: boolean}> {
  return {
    inlineManifestOn: await controlPlanesWithInlineManifest(opts),
    inInventory: await isCiliumInTalosInventory(kube),
  }
}

/** Both steps, in the order that keeps Talos from putting Cilium back into its inventory. */
export async function handOverCiliumFromTalos(kube: Kube, opts: ControlPlaneAccess): Promise<HandoverResult> {
  const patchedNodes = await removeInlineManifestFromControlPlanes(opts)
  const inventory = await removeCiliumFromTalosInventory(kube)
  return {patchedNodes, inventory}
}
