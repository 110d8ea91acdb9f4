// The types the IchorInstallation's spec and status are made of (assets/crds/ichorinstallation.yaml),
// and the generated Secrets beside it. They live here, under the concerns that use them, so
// talos/, cilium/ and stack/ import the CR down from state/ and state/ imports none of them.

/** One patch: where it came from (a file name or `inline`) and its YAML text. */
export interface ConfigPatch {
  source: string
  yaml: string
}

export interface NodeConfigPatch extends ConfigPatch {
  node: string
}

/** The operator's part of the Talos machine configs (talos/machine-config.ts reads and checks it). */
export interface MachineConfigInputs {
  /** `talosctl gen config --install-disk`; absent: Talos's default (/dev/sda). */
  installDisk?: string
  /** `--install-image`, e.g. an Image Factory installer with a schematic for extensions. */
  installImage?: string
  /** For every node, then control planes only, then workers only, then per node: talosctl's order. */
  patches: ConfigPatch[]
  controlPlanePatches: ConfigPatch[]
  workerPatches: ConfigPatch[]
  nodePatches: NodeConfigPatch[]
}

export type KubeProxyMode = 'replaced' | 'kube-proxy'
export const KUBE_PROXY_MODES: readonly KubeProxyMode[] = ['replaced', 'kube-proxy']

export type TunnelProtocol = 'vxlan' | 'geneve'
export const TUNNEL_PROTOCOLS: readonly TunnelProtocol[] = ['vxlan', 'geneve']

export type PromotionMode = 'Automatic' | 'Manual'

export type StackComponent = 'kokumi' | 'argocd'
export const STACK_COMPONENTS: readonly StackComponent[] = ['kokumi', 'argocd']

/** Values generated once and kept in ichor-system; never in a bundle, never printed but once. */
export interface GeneratedStackSecrets {
  kokumiAdminPassword: string
  kokumiSigningKey: string
  argocdRedisPassword: string
}
