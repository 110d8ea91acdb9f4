// What an init rerun keeps of the cluster it finds: the settings and user layers the
// IchorInstallation stores are the run's (a day-2 change is never undone by a rerun); a given
// flag that differs is refused, naming the command that changes it safely.
import {isDeepStrictEqual} from 'node:util'
import {CILIUM_OWNED_KEYS} from '../cilium/defaults.js'
import {ValidationError, type Issue} from '../errors/errors.js'
import {ARGOCD_OWNED_KEYS} from '../stack/argocd.js'
import type {InstallationSpec} from '../state/installation.js'
import type {ConfigPatch, MachineConfigInputs, NodeConfigPatch, PromotionMode} from '../state/installation-types.js'
import {NO_MACHINE_CONFIG_INPUTS, type MachineConfigFlags} from '../talos/machine-config.js'
import {compareVersions, parseKubernetesVersion, parseTalosVersion} from '../talos/versions.js'
import {withoutOwnedKeys} from '../values/engine.js'
import type {Values} from '../values/path.js'
import type {InitFlags, InitInputs} from './inputs.js'

/**
 * The machine-config inputs of a rerun: each omitted flag keeps what the cluster stores; a given
 * one replaces it, and the plan applies the change to the running nodes (node-config-changes)
 * before the spec stores it. Patches are compared by their text, not file name.
 */
export function keepStoredMachineConfig(
  f: MachineConfigFlags,
  given: MachineConfigInputs,
  stored: Partial<MachineConfigInputs> | undefined,
): MachineConfigInputs {
  const held = {...NO_MACHINE_CONFIG_INPUTS, ...stored}
  const list = <T extends ConfigPatch>(flagGiven: boolean, mine: T[], theirs: T[]) => (flagGiven ? mine : theirs)
  return {
    installDisk: f.installDisk ?? held.installDisk,
    installImage: f.installImage ?? held.installImage,
    patches: list((f.configPatch?.length ?? 0) > 0, given.patches, held.patches),
    controlPlanePatches: list((f.configPatchControlPlane?.length ?? 0) > 0, given.controlPlanePatches, held.controlPlanePatches),
    workerPatches: list((f.configPatchWorker?.length ?? 0) > 0, given.workerPatches, held.workerPatches),
    nodePatches: keepNodePatches(given.nodePatches, held.nodePatches),
  }
}

/** Node patches by the same rule, one node at a time: a node without --node-patch keeps what is stored for it. */
function keepNodePatches(given: NodeConfigPatch[], held: NodeConfigPatch[]): NodeConfigPatch[] {
  const givenNodes = [...new Set(given.map((p) => p.node))]
  return [...held.filter((p) => !givenNodes.includes(p.node)), ...given]
}

const CHANGE_COMMAND = {
  cilium: 'ichor cni values set -f FILE --replace',
  argocd: 'ichor stack values set argocd -f FILE',
  kokumi: 'ichor stack values set kokumi -f FILE',
} as const

/**
 * The user layers a run uses: a values flag on a new cluster, else what the cluster stores.
 * A values file that differs from the stored layer is refused (exit 2), naming the
 * command that changes it safely (validated against the live cluster, rolled back on failure).
 */
const OWNED_KEYS = {cilium: CILIUM_OWNED_KEYS, argocd: ARGOCD_OWNED_KEYS, kokumi: []} as const

export function keepStoredLayers(
  given: {cilium?: Values; argocd?: Values; kokumi?: Values},
  stored: InstallationSpec | undefined,
  earlier: Issue[] = [],
): {cilium: Values; argocd: Values; kokumi: Values} {
  const held = {cilium: stored?.cni.cilium.values, argocd: stored?.stack.argocd.values, kokumi: stored?.stack.kokumi.values}
  const issues: Issue[] = [...earlier]
  for (const c of ['cilium', 'argocd', 'kokumi'] as const) {
    const mine = given[c]
    const theirs = held[c]
    // The stored layer holds no owned key: one set to ichor's own value is no difference.
    if (mine && theirs && !isDeepStrictEqual(withoutOwnedKeys(OWNED_KEYS[c], mine), theirs)) {
      issues.push({
        path: c === 'cilium' ? '-f/--values, --set' : `--${c}-values`,
        message: `differs from the ${c} values the cluster stores; change them with \`${CHANGE_COMMAND[c]}\` (or leave the flag out to keep them)`,
      })
    }
  }
  if (issues.length > 0) throw new ValidationError('ichor init: nothing was changed', issues)
  return {cilium: given.cilium ?? held.cilium ?? {}, argocd: given.argocd ?? held.argocd ?? {}, kokumi: given.kokumi ?? held.kokumi ?? {}}
}

/**
 * The init flags with a default whose value the cluster stores (IchorInstallation spec): an
 * omitted flag takes the stored value (a rerun never resets a day-2 change to a default); a
 * given one that differs is an issue naming what changes it on an existing cluster, as a
 * changed values file is (keepStoredLayers). Nothing is compared on a new cluster.
 */
export function keepStoredSettings(
  given: {flags: InitFlags; promotion?: PromotionMode},
  checked: InitInputs,
  stored: InstallationSpec | undefined,
): {flags: InitFlags; promotion: PromotionMode; machineConfig: MachineConfigInputs; previousMachineConfig?: MachineConfigInputs; issues: Issue[]} {
  if (!stored) return {flags: given.flags, promotion: given.promotion ?? 'Automatic', machineConfig: checked.machineConfig, issues: []}
  const f = given.flags
  const issues: Issue[] = []
  const differs = (flag: string, mine: string, theirs: string, change: string) =>
    issues.push({path: flag, message: `"${mine}" differs from the ${theirs} the cluster stores; ${change} (or leave the flag out to keep it)`})
  if (given.promotion !== undefined && given.promotion !== stored.stack.promotion) {
    differs('--promotion', given.promotion, stored.stack.promotion, `change it with \`ichor stack promotion set ${given.promotion}\``)
  }
  if (f.kubeProxy !== undefined && checked.kubeProxy !== stored.cni.kubeProxy) {
    differs(
      '--kube-proxy',
      checked.kubeProxy,
      stored.cni.kubeProxy,
      `change it with \`ichor cni kube-proxy ${checked.kubeProxy === 'replaced' ? 'replace' : 'restore'}\``,
    )
  }
  if (f.tunnel !== undefined && checked.tunnel !== stored.cni.tunnel) {
    differs(
      '--tunnel',
      checked.tunnel,
      stored.cni.tunnel,
      'the tunnel protocol is fixed once the cluster exists (Cilium cannot change it in place): no command changes it',
    )
  }
  if (f.talosVersion !== undefined && checked.talosVersion.tag !== stored.talos.talosVersion) {
    const newer = compareVersions(checked.talosVersion, parseTalosVersion(stored.talos.talosVersion)) > 0
    differs(
      '--talos-version',
      checked.talosVersion.tag,
      stored.talos.talosVersion,
      newer
        ? `init does not upgrade Talos on existing nodes: upgrade them with \`ichor talos upgrade --to ${checked.talosVersion.tag}\` (node by node)`
        : `Talos is never downgraded; leave --talos-version out to keep ${stored.talos.talosVersion} (\`ichor talos upgrade\` moves it forward)`,
    )
  }
  if (f.kubernetesVersion !== undefined && checked.kubernetesVersion.version !== stored.talos.kubernetesVersion) {
    const newer = compareVersions(checked.kubernetesVersion, parseKubernetesVersion(stored.talos.kubernetesVersion)) > 0
    differs(
      '--kubernetes-version',
      checked.kubernetesVersion.version,
      stored.talos.kubernetesVersion,
      newer
        ? `init does not change Kubernetes on an existing cluster: upgrade it with \`ichor kubernetes upgrade --to ${checked.kubernetesVersion.version}\` (one minor at a time)`
        : `Kubernetes is never downgraded; leave --kubernetes-version out to keep ${stored.talos.kubernetesVersion} (\`ichor kubernetes upgrade\` moves it forward)`,
    )
  }
  const machineConfig = keepStoredMachineConfig(f.machineConfig ?? {}, checked.machineConfig, stored.talos.machineConfig)
  return {
    machineConfig,
    previousMachineConfig: {...NO_MACHINE_CONFIG_INPUTS, ...stored.talos.machineConfig},
    flags: {
      ...f,
      kubeProxy: f.kubeProxy ?? stored.cni.kubeProxy,
      tunnel: f.tunnel ?? stored.cni.tunnel,
      talosVersion: f.talosVersion ?? stored.talos.talosVersion,
      kubernetesVersion: f.kubernetesVersion ?? stored.talos.kubernetesVersion,
    },
    promotion: given.promotion ?? stored.stack.promotion,
    issues,
  }
}
