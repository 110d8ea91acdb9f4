// Part of the Talos node SIMULATOR (talosctl-simulator.mjs): a configured node's kubelet
// registers its Node once the cluster is bootstrapped, and Talos keeps the Node's role label and
// control-plane taint in line with the machine config. The Node carries kwok's annotation, so
// kwok (test/harness/kwok.ts) plays that kubelet from then on: Ready, heartbeats, pod status.
//
// What Talos sets (siderolabs/talos v1.14.1): the NodeLabelSpec and NodeTaintSpec controllers
// (internal/app/machined/pkg/controllers/k8s/node_label_spec.go, node_taint_spec.go) take the
// labels and taints of the config's K8sNodeConfig, and the node's kubelet registers them:
// - a multi-document config (v1.14 contract: `talosctl gen config` writes a KubeNodeConfig
//   document, pkg/machinery/config/generate/kubernetes.go generateKubernetesUniversalConfigs)
//   has them in that document's `labels` and `taints` (`taints` maps a key to "Effect" or
//   "value:Effect", labels/taints.go ParseTaint); gen config puts the control-plane label and,
//   unless scheduling on control planes was asked for, the control-plane NoSchedule taint there;
// - a legacy v1alpha1-only config (pkg/machinery/config/types/v1alpha1/v1alpha1_k8s_bridge.go
//   k8sNodeConfigShim): `machine.nodeLabels` and `machine.nodeTaints`, plus on a control plane
//   the label `node-role.kubernetes.io/control-plane: ""` and, unless
//   `cluster.allowSchedulingOnControlPlanes` (or the older `allowSchedulingOnMasters`) is true,
//   the taint `node-role.kubernetes.io/control-plane:NoSchedule`.
// The kubelet adds `kubernetes.io/hostname`, `kubernetes.io/os` and `kubernetes.io/arch`. The
// Node is named after the machine's hostname (`machine.network.hostname`, or a HostnameConfig
// document; without one Talos makes a stable `talos-xxx-yyy` name from the machine id: here
// `talos-` and the address).
import {parseAllDocuments} from 'yaml'

export const KWOK_NODE_ANNOTATION = 'kwok.x-k8s.io/node'
const CONTROL_PLANE_ROLE = 'node-role.kubernetes.io/control-plane'

function parseTaint(key, spec) {
  const [value, effect] = String(spec).includes(':') ? String(spec).split(/:(.*)/s, 2) : ['', String(spec)]
  return {key, ...(value ? {value} : {}), effect}
}

/** The Node a configured machine registers, as Talos and its kubelet shape it. */
export function nodeFor(node) {
  const docs = parseAllDocuments(node.config)
    .map((d) => d.toJS())
    .filter(Boolean)
  const legacy = docs.find((d) => !d.kind && !d.apiVersion) ?? {}
  const nodeDoc = docs.find((d) => d.kind === 'KubeNodeConfig')
  const hostnameDoc = docs.find((d) => d.kind === 'HostnameConfig')
  const hostname = legacy.machine?.network?.hostname || hostnameDoc?.hostname || `talos-${node.ip.replaceAll('.', '-')}`
  const controlPlane = node.role === 'controlplane' || node.role === 'init'
  let labels
  let taints
  if (nodeDoc) {
    labels = {...nodeDoc.labels}
    taints = Object.entries(nodeDoc.taints ?? {}).map(([k, v]) => parseTaint(k, v))
  } else {
    labels = {...legacy.machine?.nodeLabels, ...(controlPlane ? {[CONTROL_PLANE_ROLE]: ''} : {})}
    taints = Object.entries(legacy.machine?.nodeTaints ?? {}).map(([k, v]) => parseTaint(k, v))
    const schedulable = legacy.cluster?.allowSchedulingOnControlPlanes === true || legacy.cluster?.allowSchedulingOnMasters === true
    if (controlPlane && !schedulable) taints = [...taints.filter((t) => t.key !== CONTROL_PLANE_ROLE), {key: CONTROL_PLANE_ROLE, effect: 'NoSchedule'}]
  }
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name: hostname,
      labels: {...labels, 'kubernetes.io/hostname': hostname, 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64'},
      annotations: {[KWOK_NODE_ANNOTATION]: 'fake'},
    },
    spec: {taints},
    status: {
      addresses: [
        {type: 'InternalIP', address: node.ip},
        {type: 'Hostname', address: hostname},
      ],
    },
  }
}

/**
 * Registers the machine's Node, or brings its role label and taints in line with the config
 * (Talos reconciles them on every config change). `kube` is ./kube-rest.mjs's client.
 */
export async function syncKubelet(kube, node) {
  if (node.mode !== 'configured') return
  const want = nodeFor(node)
  let live
  try {
    live = await kube.request('GET', `/api/v1/nodes/${want.metadata.name}`)
  } catch (e) {
    if (e?.code !== 404) throw e
    try {
      await kube.request('POST', '/api/v1/nodes', {body: want})
    } catch (err) {
      if (err?.code !== 409) throw err
    }
    return
  }
  // Taints Talos does not manage (node lifecycle's not-ready, an operator's own) stay; the
  // config's replace what an earlier config set (NodeTaintSpec's outputs are cleaned up).
  const managed = new Set([CONTROL_PLANE_ROLE, ...want.spec.taints.map((t) => t.key)])
  const others = (live.spec?.taints ?? []).filter((t) => !managed.has(t.key))
  const taints = [...others, ...want.spec.taints]
  const labels = {...live.metadata?.labels, ...want.metadata.labels}
  const same = JSON.stringify(taints) === JSON.stringify(live.spec?.taints ?? []) && JSON.stringify(labels) === JSON.stringify(live.metadata?.labels ?? {})
  if (same) return
  try {
    await kube.request('PUT', `/api/v1/nodes/${want.metadata.name}`, {body: {...live, metadata: {...live.metadata, labels}, spec: {...live.spec, taints}}})
  } catch (e) {
    // kwok's heartbeat wrote the Node meanwhile: read it again.
    if (e?.code === 409) return syncKubelet(kube, node)
    throw e
  }
}
