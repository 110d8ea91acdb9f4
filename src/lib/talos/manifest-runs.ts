// Waiting for Talos's manifest runs. A config change on a control plane (patch or apply,
// no reboot) starts a run of its ManifestApplyController that reads Talos's inventory,
// applies, and writes the copy it read back with an unconditional Update, then sets its
// ManifestStatus (siderolabs/talos internal/app/machined/pkg/controllers/k8s/manifest_apply.go,
// v1.14.1; go-kubernetes v0.2.41 kubernetes/ssa/internal/inventory/configmap/inventory.go
// `Write`). An inventory edit made before that write is lost, so whoever edits the inventory
// after a config change first waits until the status no longer lists the manifest the change
// removed (INVENTORY.md, section 3).
import {setTimeout as sleep} from 'node:timers/promises'
import {IchorError} from '../errors/errors.js'
import {getManifestsApplied} from './talosctl.js'

export interface ManifestRunAccess {
  talosconfig: string
  /** Control plane node addresses (the manifest controller runs on control planes only). */
  controlPlanes: string[]
}

/** Control planes whose last finished run still listed the manifest `id` (a node without a status has no run to wait for). */
export async function controlPlanesStillApplying(opts: ManifestRunAccess, id: string): Promise<string[]> {
  const applied = await Promise.all(opts.controlPlanes.map((node) => getManifestsApplied({node, talosconfig: opts.talosconfig})))
  return opts.controlPlanes.filter((_, i) => applied[i]?.includes(id))
}

export interface ManifestRunWait extends ManifestRunAccess {
  /** The manifest id the change removed, e.g. `99-cilium`, `10-kube-proxy`. */
  id: string
  /** What was removed, for the error: `the removal of the "cilium" inline manifest`. */
  removal: string
  /** Default 5 min. */
  timeoutMs?: number
  progress?: (message: string) => void
}

/** Polls every control plane's ManifestStatus until none lists `id` any more. */
export async function waitForManifestRunsWithout(opts: ManifestRunWait): Promise<void> {
  const deadline = Date.now() + (opts.timeoutMs ?? 300_000)
  let reported = ''
  for (;;) {
    const pending = await controlPlanesStillApplying(opts, opts.id)
    if (pending.length === 0) return
    if (Date.now() >= deadline) {
      throw new IchorError(`Talos has not finished applying ${opts.removal} on ${pending.join(', ')}`, {
        hint: `see \`talosctl -n ${pending[0]} get manifeststatus -o yaml\` and \`talosctl -n ${pending[0]} logs controller-runtime\`, then run the same command again`,
      })
    }
    const line = `waiting for Talos's manifest run on ${pending.join(', ')}`
    if (line !== reported) opts.progress?.((reported = line))
    await sleep(1000)
  }
}
