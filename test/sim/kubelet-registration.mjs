// Part of the Talos node SIMULATOR (talosctl-simulator.mjs): a configured node's kubelet
// registers its Node once the cluster is bootstrapped, and Talos keeps the Node's role label and
// control-plane taint in line with the machine config. The Node carries kwok's annotation, so
// kwok (test/harness/kwok.ts) plays that kubelet from then on: Ready, heartbeats, pod status.
//
// What Talos sets (siderolabs/talos v1.14, internal/app/machined/pkg/controllers/k8s/
// nodelabels.go NodeLabelsApplyController and node_taint_spec.go NodeTaintSpecController, with
// the constants of pkg/machinery/constants): on control planes the label
// `node-role.kubernetes.io/control-plane: ""` and, unless `cluster.allowSchedulingOnControlPlanes`
// is true, the taint `node-role.kubernetes.io/control-plane:NoSchedule`; on every node the
// kubelet's own `kubernetes.io/hostname`, `kubernetes.io/os` and `kubernetes.io/arch`. The Node
// is named after the machine's hostname (`machine.network.hostname`; without one, Talos makes a
// stable `talos-xxx-yyy` name from the machine id: here `talos-` and the address).
import {parseAllDocuments} from 'yaml'

export const KWOK_NODE_ANNOTATION = 'kwok.x-k8s.io/node'
const CONTROL_PLANE_ROLE = 'node-role.kubernetes.io/control-plane'

function v1alpha1(configText) {
  return parseAllDocuments(configText).map((d) => d.toJS()).find((d) => d && !d.kind && !d.apiVersion) ?? {}
}

/** The Node a configured machine registers, as Talos and its kubelet shape it. */
export function nodeFor(node) {
  const config = v1alpha1(node.config)
  const hostname = config.machine?.network?.hostname || `talos-${node.ip.replaceAll('.', '-')}`
  const controlPlane = node.role === 'controlplane' || node.role === 'init'
  const schedulable = config.cluster?.allowSchedulingOnControlPlanes === true
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name: hostname,
      labels: {'kubernetes.io/hostname': hostname, 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64', ...(controlPlane ? {[CONTROL_PLANE_ROLE]: ''} : {})},
      annotations: {[KWOK_NODE_ANNOTATION]: 'fake'},
    },
    spec: {taints: controlPlane && !schedulable ? [{key: CONTROL_PLANE_ROLE, effect: 'NoSchedule'}] : []},
    status: {addresses: [{type: 'InternalIP', address: node.ip}, {type: 'Hostname', address: hostname}]},
  }
}

/**
 * Registers the machine's Node, or brings its role label and taints in line with the config
 * (Talos reconciles them on every config change). `core` is a client-node CoreV1Api.
 */
export async function syncKubelet(core, node) {
  if (node.mode !== 'configured') return
  const want = nodeFor(node)
  let live
  try {
    live = await core.readNode({name: want.metadata.name})
  } catch (e) {
    if (e?.code !== 404) throw e
    try {
      await core.createNode({body: want})
    } catch (err) {
      if (err?.code !== 409) throw err
    }
    return
  }
  // Other taints (node lifecycle's not-ready, an operator's own) stay; only the role taint follows the config.
  const others = (live.spec?.taints ?? []).filter((t) => t.key !== CONTROL_PLANE_ROLE)
  const taints = [...others, ...want.spec.taints]
  const labels = {...live.metadata?.labels, ...want.metadata.labels}
  const same = JSON.stringify(taints) === JSON.stringify(live.spec?.taints ?? []) && JSON.stringify(labels) === JSON.stringify(live.metadata?.labels ?? {})
  if (same) return
  try {
    await core.replaceNode({name: want.metadata.name, body: {...live, metadata: {...live.metadata, labels}, spec: {...live.spec, taints}}})
  } catch (e) {
    // kwok's heartbeat wrote the Node meanwhile: read it again.
    if (e?.code === 409) return syncKubelet(core, node)
    throw e
  }
}
