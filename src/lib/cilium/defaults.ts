// Ichor's Cilium values: the defaults (user-overridable) and the owned keys (set last,
// never user-settable), from the Talos Cilium guide and ADR-0099 decisions 2-4 / ADR 0131.
import type {OwnedKey} from '../values/engine.js'
import type {KubeProxyMode, TunnelProtocol} from '../state/installation-types.js'
import {KUBEPRISM_PORT} from '../talos/patches.js'
import type {Values} from '../values/path.js'

/** The command that switches the kube-proxy mode to `mode` (or finishes a half-done switch). */
export function switchCommand(mode: KubeProxyMode): string {
  return `ichor cni kube-proxy ${mode === 'replaced' ? 'replace' : 'restore'}`
}

const CILIUM_SECRETS_NAMESPACE = 'cilium-secrets'

/**
 * The Talos guide's capability sets: the chart's own defaults without SYS_MODULE (Talos
 * forbids loading kernel modules). Derived from the chart at hand (1.19 adds SYSLOG); these
 * are Cilium 1.18's, used when no chart is at hand.
 */
const CILIUM_AGENT_CAPABILITIES = [
  'CHOWN',
  'KILL',
  'NET_ADMIN',
  'NET_RAW',
  'IPC_LOCK',
  'SYS_ADMIN',
  'SYS_RESOURCE',
  'DAC_OVERRIDE',
  'FOWNER',
  'SETGID',
  'SETUID',
]
const CLEAN_STATE_CAPABILITIES = ['NET_ADMIN', 'SYS_ADMIN', 'SYS_RESOURCE']
const TALOS_FORBIDDEN_CAPABILITIES = new Set(['SYS_MODULE'])

export interface OwnedCapabilities {
  ciliumAgent: string[]
  cleanCiliumState: string[]
}

/** The chart's default securityContext.capabilities lists minus what Talos forbids; the 1.18 sets when it has none. */
export function ownedCapabilitiesOf(chartValues: Values | undefined): OwnedCapabilities {
  const caps = (chartValues?.securityContext as {capabilities?: Record<string, unknown>} | undefined)?.capabilities
  const list = (key: string, fallback: string[]) => {
    const v = caps?.[key]
    return Array.isArray(v) && v.every((c) => typeof c === 'string') ? v.filter((c) => !TALOS_FORBIDDEN_CAPABILITIES.has(c)) : fallback
  }
  return {ciliumAgent: list('ciliumAgent', CILIUM_AGENT_CAPABILITIES), cleanCiliumState: list('cleanCiliumState', CLEAN_STATE_CAPABILITIES)}
}

const SECRETS_NAMESPACE_OWNERS = ['tls', 'gatewayAPI', 'ingressController', 'envoyConfig', 'bgpControlPlane'] as const

const TALOS_GUIDE = 'required on Talos (Talos Cilium guide)'
// The chart restarts a component on a change of its ConfigMap only when its rollOut flag is
// set (templates/cilium-agent/daemonset.yaml, cilium-operator/deployment.yaml,
// cilium-envoy/daemonset.yaml, hubble-relay and hubble-ui deployment.yaml: a checksum
// annotation on the pod template; all false in values.yaml, Cilium 1.18-1.20). Without it most
// values reach only cilium-config, which a running agent never reads again.
const ROLL_OUT = 'always true: a values change must reach the running pods, and the chart restarts them on a ConfigMap change only with this set'
const ROLL_OUT_KEYS = [
  ['rollOutCiliumPods'],
  ['operator', 'rollOutPods'],
  ['envoy', 'rollOutPods'],
  ['hubble', 'relay', 'rollOutPods'],
  ['hubble', 'ui', 'rollOutPods'],
] as const
const SECRETS_NS = `pinned to ${CILIUM_SECRETS_NAMESPACE} so the Roles Cilium creates for its features land in Cilium's own namespace (ADR 0131)`

export const CILIUM_OWNED_KEYS: readonly OwnedKey[] = [
  {path: ['ipam', 'mode'], reason: `always "kubernetes", ${TALOS_GUIDE}`},
  {path: ['securityContext', 'capabilities', 'ciliumAgent'], reason: `the chart's capability set without SYS_MODULE, ${TALOS_GUIDE}`, dependsOnCluster: true},
  {
    path: ['securityContext', 'capabilities', 'cleanCiliumState'],
    reason: `the chart's capability set without SYS_MODULE, ${TALOS_GUIDE}`,
    dependsOnCluster: true,
  },
  {
    path: ['upgradeCompatibility'],
    reason: 'the Cilium minor first installed, recorded in the IchorInstallation status and kept across upgrades (Cilium upgrade guide)',
    dependsOnCluster: true,
  },
  {path: ['cgroup', 'autoMount', 'enabled'], reason: `always false: Talos mounts cgroup v2 itself (${TALOS_GUIDE})`},
  {path: ['cgroup', 'hostRoot'], reason: `always /sys/fs/cgroup, ${TALOS_GUIDE}`},
  {
    path: ['k8sServiceHost'],
    reason: `Cilium reaches the API server through KubePrism (localhost:${KUBEPRISM_PORT}); set by the kube-proxy mode`,
    dependsOnCluster: true,
  },
  {
    path: ['k8sServicePort'],
    reason: `Cilium reaches the API server through KubePrism (localhost:${KUBEPRISM_PORT}); set by the kube-proxy mode`,
    dependsOnCluster: true,
  },
  {path: ['k8sServiceHostRef'], reason: 'would override k8sServiceHost/k8sServicePort, which ichor points at KubePrism'},
  {
    path: ['kubeProxyReplacement'],
    reason: 'set by the kube-proxy mode (--kube-proxy replaced|kube-proxy), changed only by the kube-proxy switch',
    dependsOnCluster: true,
  },
  {path: ['tunnelProtocol'], reason: 'set by --tunnel (vxlan|geneve) at init and immutable afterwards', dependsOnCluster: true},
  ...SECRETS_NAMESPACE_OWNERS.map((owner) => ({path: [owner, 'secretsNamespace', 'name'], reason: SECRETS_NS})),
  ...ROLL_OUT_KEYS.map((path) => ({path: [...path], reason: ROLL_OUT})),
]

export interface CiliumModes {
  kubeProxy: KubeProxyMode
  tunnel: TunnelProtocol
  /** The minor first installed ("1.18"); absent: not set. */
  upgradeCompatibility?: string
  /** The capability sets derived from the chart; absent: Cilium 1.18's. */
  capabilities?: OwnedCapabilities
  /** The cluster's Talos node count (control planes and workers); absent: not known. */
  nodeCount?: number
}

/** Defaults a user may override. */
export function ciliumDefaults(cluster: {nodeCount?: number} = {}): Values {
  return {
    hubble: {tls: {auto: {method: 'cronJob'}}},
    // The chart's two operator replicas require different nodes (a required pod anti-affinity
    // on kubernetes.io/hostname, templates/cilium-operator/deployment.yaml): on one node the
    // second never schedules and every helm --wait fails. Cilium's docs set 1 for single nodes.
    ...(cluster.nodeCount === 1 ? {operator: {replicas: 1}} : {}),
  }
}

/** The node count the defaults depend on, from the IchorInstallation's Talos inputs. */
export function nodeCountOf(talos: {controlPlanes?: string[]; workers?: string[]} | undefined): number | undefined {
  return talos ? (talos.controlPlanes?.length ?? 0) + (talos.workers?.length ?? 0) : undefined
}

/** Values ichor sets last, derived from the modes. */
export function ciliumOwnedValues(modes: CiliumModes): Values {
  const replaced = modes.kubeProxy === 'replaced'
  const owned: Values = {
    ipam: {mode: 'kubernetes'},
    kubeProxyReplacement: replaced,
    securityContext: {capabilities: {...(modes.capabilities ?? ownedCapabilitiesOf(undefined))}},
    cgroup: {autoMount: {enabled: false}, hostRoot: '/sys/fs/cgroup'},
    tunnelProtocol: modes.tunnel,
    rollOutCiliumPods: true,
    operator: {rollOutPods: true},
    envoy: {rollOutPods: true},
    hubble: {relay: {rollOutPods: true}, ui: {rollOutPods: true}},
  }
  if (replaced) {
    owned.k8sServiceHost = 'localhost'
    owned.k8sServicePort = KUBEPRISM_PORT
  }
  if (modes.upgradeCompatibility) owned.upgradeCompatibility = modes.upgradeCompatibility
  for (const name of SECRETS_NAMESPACE_OWNERS) owned[name] = {secretsNamespace: {name: CILIUM_SECRETS_NAMESPACE}}
  return owned
}
