// Lets the control planes take workloads, as a cluster without workers has them: their
// control-plane NoSchedule taint removed from each Node, so a test's cluster may lose its worker.
import type {Kube} from '../../src/lib/kube/client.js'

const CONTROL_PLANE_TAINT = 'node-role.kubernetes.io/control-plane'

export async function untaintControlPlanes(kube: Kube): Promise<void> {
  const nodes = await kube.request<{items: {metadata: {name: string}; spec?: {taints?: {key: string}[]}}[]}>('GET', '/api/v1/nodes')
  for (const n of nodes.items) {
    const taints = n.spec?.taints?.filter((t) => t.key !== CONTROL_PLANE_TAINT)
    if (taints?.length === n.spec?.taints?.length) continue
    await kube.request('PATCH', `/api/v1/nodes/${n.metadata.name}`, {body: {spec: {taints}}, contentType: 'application/merge-patch+json'})
  }
}
