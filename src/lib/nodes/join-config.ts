// The machine config of a node that joins a running cluster (node replace), made as init makes
// its nodes' configs: `talosctl gen config --with-secrets` from the cluster's secrets bundle, its
// stored name, endpoint, versions and kube-proxy mode, ichor's patches, then the operator's
// patches (every node's, the role's, the node's own), checked by `talosctl validate`. Two
// differences from init, both because the cluster is running: no Cilium inline manifest (Helm
// owns Cilium; Talos would apply the bootstrap copy over the release), and the installer image
// the cluster's nodes run now (a `talos upgrade` moved it past what `gen config` would pick).
import {join} from 'node:path'
import type {Installation} from '../state/installation.js'
import {NO_MACHINE_CONFIG_INPUTS, patchesForNode} from '../talos/machine-config.js'
import {renderTalosPatches} from '../talos/patches.js'
import {genConfig, patchConfigFile, validateConfig} from '../talos/talosctl.js'
import type {NodeRole} from './remove.js'

export interface JoinConfigInput {
  cr: Installation
  node: string
  role: NodeRole
  /** The Talos secrets bundle (TalosAccess.secretsFile). */
  secretsFile: string
  /** The installer image the cluster's nodes run (read from a node of the role). */
  installImage?: string
  /** A private (0700) folder the configs are generated into. */
  dir: string
}

/** The path of the node's validated config, inside `dir`. */
export async function renderJoinConfig(p: JoinConfigInput): Promise<string> {
  const t = p.cr.spec.talos
  const m = {...NO_MACHINE_CONFIG_INPUTS, ...t.machineConfig}
  const talos = renderTalosPatches({
    talosVersion: t.talosVersion,
    kubeProxy: p.cr.spec.cni.kubeProxy,
    ciliumManifest: null,
    allowSchedulingOnControlPlanes: t.workers.length === 0,
  })
  const out = await genConfig({
    clusterName: t.clusterName,
    endpoint: t.endpoint,
    secretsPath: p.secretsFile,
    talosVersion: t.talosVersion,
    kubernetesVersion: t.kubernetesVersion,
    controlPlanePatch: talos.controlPlane,
    workerPatch: talos.worker,
    installDisk: m.installDisk,
    installImage: m.installImage ?? p.installImage,
    userPatches: {all: m.patches.map((x) => x.yaml), controlPlane: m.controlPlanePatches.map((x) => x.yaml), worker: m.workerPatches.map((x) => x.yaml)},
    outDir: join(p.dir, 'generated'),
  })
  const roleFile = p.role === 'worker' ? out.worker : out.controlPlane
  const own = patchesForNode(m, p.node).map((x) => x.yaml)
  const file = join(p.dir, `node-${p.node}.yaml`)
  if (own.length === 0) {
    await validateConfig(roleFile)
    return roleFile
  }
  await patchConfigFile({base: roleFile, patches: own, outPath: file})
  await validateConfig(file)
  return file
}
