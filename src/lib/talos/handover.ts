// The Talos side of the Cilium hand-over, run once Helm has adopted the objects
// (DESIGN.md step 4). Idempotent steps, each with a read-only probe:
//   1. remove the inline-manifest entry from every control plane,
//   2. wait for the manifest run that removal starts on each control plane, then
//   3. take the Cilium objects out of Talos's inventory (Talos 1.13+), so
//      `talosctl upgrade-k8s` neither prunes them nor re-applies the bootstrap render,
//      and check again after a settle period,
//   4. hand the fields of the field manager `talos` to Helm's manager "helm" on every object
//      of the release (every version; field-manager.ts says why).
// The order matters: a control plane that still carries the entry backfills existing
// objects into the inventory, and a run that read the inventory before step 3 writes
// that copy back (INVENTORY.md, section 3).
import {setTimeout as sleep} from 'node:timers/promises'
import {isMap, isSeq, parseAllDocuments} from 'yaml'
import {CILIUM_RELEASE} from '../constants.js'
import {IchorError} from '../errors/errors.js'
import {readReleaseRecord} from '../helm/release-record.js'
import type {Kube} from '../kube/client.js'
import type {ObjectRef} from '../kube/objects.js'
import {handTalosFieldsToHelm, objectsManagedByTalos, releaseObjectRefs} from './field-manager.js'
import {isCiliumInTalosInventory, removeCiliumFromTalosInventory, type InventoryRemoval} from './inventory.js'
import {DEFAULT_INLINE_MANIFEST_NAME, removeInlineManifestPatch} from './patches.js'
import {controlPlanesStillApplying, waitForManifestRunsWithout} from './manifest-runs.js'
import {getMachineConfig, patchMachineConfig} from './talosctl.js'
import type {TalosNodeReads} from './node-reads.js'

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
    kept.push(
      doc
        .toString()
        .replace(/^---\n/, '')
        .replace(/\n*$/, '\n'),
    )
  }
  return kept.join('---\n')
}

export interface ControlPlaneAccess {
  talosconfig: string
  /** Control plane node addresses. */
  controlPlanes: string[]
  /** Inline manifest entry name (default `cilium`). */
  name?: string
  /** The run's reads of the nodes: the probe reuses a config already read, a patch drops it. */
  reads?: TalosNodeReads
}

/** Probe for one node: does its config still carry the entry? */
export async function controlPlaneHasInlineManifest(opts: {node: string; talosconfig: string; name?: string}): Promise<boolean> {
  const config = await getMachineConfig({node: opts.node, talosconfig: opts.talosconfig})
  return inlineManifestForms(config, opts.name).length > 0
}

/** Probe for the cluster: the control planes still carrying the entry. */
async function controlPlanesWithInlineManifest(opts: ControlPlaneAccess): Promise<string[]> {
  const carries = await Promise.all(
    opts.controlPlanes.map(async (node) =>
      opts.reads
        ? inlineManifestForms(await opts.reads.machineConfig(node, opts.talosconfig), opts.name).length > 0
        : controlPlaneHasInlineManifest({node, talosconfig: opts.talosconfig, name: opts.name}),
    ),
  )
  return opts.controlPlanes.filter((_, i) => carries[i])
}

/** Removes the entry from every control plane that has it (no reboot). Returns the nodes patched. */
export async function removeInlineManifestFromControlPlanes(opts: ControlPlaneAccess): Promise<string[]> {
  // Every control plane at once (each patch is one round trip and a manifest run on that node).
  const done = await Promise.all(
    opts.controlPlanes.map(async (node) => {
      // The patch follows what the node runs now: read again, never from an earlier step.
      const config = opts.reads ? await opts.reads.freshMachineConfig(node, opts.talosconfig) : await getMachineConfig({node, talosconfig: opts.talosconfig})
      const patch = inlineManifestRemovalPatch(config, opts.name)
      if (!patch) return false
      const write = () => patchMachineConfig({node, talosconfig: opts.talosconfig, patch, mode: 'no-reboot'})
      await (opts.reads ? opts.reads.write(node, write) : write())
      return true
    }),
  )
  return opts.controlPlanes.filter((_, i) => done[i])
}

/** Talos names an inline manifest's Manifest resource `99-<name>` (ControlPlaneExtraManifestsController, v1.14.1). */
function inlineManifestId(name = DEFAULT_INLINE_MANIFEST_NAME): string {
  return `99-${name}`
}

/**
 * Control planes whose manifest controller last ran with the entry (`get manifeststatus`):
 * a run started by the removal has read the inventory but not yet written it back, and its
 * write is an unconditional Update of that copy (go-kubernetes configmap inventory), so an
 * inventory edit made before it finishes is undone. A node without a status has no run to wait for.
 */
async function controlPlanesStillApplyingInlineManifest(opts: ControlPlaneAccess): Promise<string[]> {
  return controlPlanesStillApplying(opts, inlineManifestId(opts.name))
}

export const INVENTORY_SETTLE_ENV = 'ICHOR_TALOS_INVENTORY_SETTLE_MS'
const DEFAULT_INVENTORY_SETTLE_MS = 5000

/**
 * The settle period after the inventory edit: 5 s, or whole milliseconds from
 * ICHOR_TALOS_INVENTORY_SETTLE_MS (the test harness, whose simulated manifest runs are
 * short: TALOS_SIM_MANIFEST_RUN_MS).
 */
export function inventorySettleMs(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env[INVENTORY_SETTLE_ENV]?.trim()
  return raw && /^\d+$/.test(raw) ? Number(raw) : DEFAULT_INVENTORY_SETTLE_MS
}

export interface HandoverTiming {
  /** How long to wait for every control plane's manifest run (default 5 min). */
  manifestRunTimeoutMs?: number
  /** How long the inventory must stay without Cilium after the edit (default inventorySettleMs()). */
  settleMs?: number
  progress?: (message: string) => void
}

function waitForManifestRuns(opts: ControlPlaneAccess & HandoverTiming): Promise<void> {
  const name = opts.name ?? DEFAULT_INLINE_MANIFEST_NAME
  return waitForManifestRunsWithout({
    ...opts,
    id: inlineManifestId(name),
    removal: `the removal of the "${name}" inline manifest`,
    timeoutMs: opts.manifestRunTimeoutMs,
  })
}

export interface HandoverResult {
  /** Control planes whose inline entry was removed by this run. */
  patchedNodes: string[]
  inventory: InventoryRemoval
  /** Objects of the release whose `talos` fields went to the field manager "helm". */
  talosFieldsToHelm: ObjectRef[]
}

export interface HandoverPending {
  inlineManifestOn: string[]
  /** Control planes whose last manifest run still had the entry (its inventory write may be pending). */
  manifestRunOn: string[]
  inInventory: boolean
  /** Objects of the release still listing the field manager `talos`. */
  managedByTalos: ObjectRef[]
}

/** The objects the Helm release manifest names (none when there is no release yet). */
async function releaseObjects(kube: Kube): Promise<ObjectRef[]> {
  const record = await readReleaseRecord(kube, CILIUM_RELEASE.name, CILIUM_RELEASE.namespace)
  return record ? releaseObjectRefs(record.manifest, record.namespace) : []
}

/** Is anything of the hand-over left to do? (read-only; for --dry-run and task probes) */
export async function talosHandoverPending(kube: Kube, opts: ControlPlaneAccess): Promise<HandoverPending> {
  const [inlineManifestOn, inInventory, managedByTalos] = await Promise.all([
    controlPlanesWithInlineManifest(opts),
    isCiliumInTalosInventory(kube),
    releaseObjects(kube).then((refs) => objectsManagedByTalos(kube, refs)),
  ])
  // The manifest runs matter only while the hand-over is under way. Once no control plane
  // carries the entry and the inventory holds no Cilium, a run still listing the entry cannot
  // be pending: the hand-over edits the inventory only after every control plane's run stopped
  // listing it (handOverCiliumFromTalos), and the run a removal starts reads the config without
  // it. So a finished hand-over (every later rerun) asks the nodes nothing more here.
  const underWay = inlineManifestOn.length > 0 || inInventory || managedByTalos.length > 0
  const manifestRunOn = underWay ? await controlPlanesStillApplyingInlineManifest(opts) : []
  return {inlineManifestOn, manifestRunOn, inInventory, managedByTalos}
}

/**
 * The hand-over, in the order that keeps Talos from putting Cilium back into its inventory:
 * remove the entry from every control plane; wait until each control plane's manifest run
 * no longer lists it (the run the removal started has written its inventory copy); take
 * Cilium out of the inventory; after a settle period check again, and repeat the edit if
 * a late write brought the keys back. Then hand the fields of `talos` to "helm" on every object of the release.
 */
export async function handOverCiliumFromTalos(kube: Kube, opts: ControlPlaneAccess & HandoverTiming): Promise<HandoverResult> {
  const patchedNodes = await removeInlineManifestFromControlPlanes(opts)
  await waitForManifestRuns(opts)
  const inventory = await removeCiliumFromTalosInventory(kube)
  for (let attempt = 1; inventory.removedEntries.length > 0 || attempt > 1; attempt++) {
    await sleep(opts.settleMs ?? inventorySettleMs())
    if (!(await isCiliumInTalosInventory(kube))) break
    if (attempt === 3) {
      throw new IchorError('Talos keeps writing Cilium back into its inventory (kube-system/talos-bootstrap-manifests-inventory)', {
        hint: 'check that no control plane config carries the cilium inline manifest (`talosctl get manifeststatus`), then run the same command again',
      })
    }
    opts.progress?.('Talos wrote Cilium back into its inventory; removing it again')
    await waitForManifestRuns(opts)
    const again = await removeCiliumFromTalosInventory(kube)
    inventory.removedEntries = [...new Set([...inventory.removedEntries, ...again.removedEntries])].sort()
  }
  const talosFieldsToHelm = await handTalosFieldsToHelm(kube, await releaseObjects(kube))
  return {patchedNodes, inventory, talosFieldsToHelm}
}
