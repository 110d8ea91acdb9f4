// A Talos node's Kubernetes side: the Node that carries its address and the Cilium agent on it.
import {CILIUM_RELEASE} from '../constants.js'
import type {Kube} from '../kube/client.js'
import {listObjects, type KubeObject} from '../kube/objects.js'

export type NodeObject = KubeObject & {
  spec?: {unschedulable?: boolean; taints?: {key: string; value?: string; effect: string}[]}
  status?: {addresses?: {type: string; address: string}[]; conditions?: {type: string; status: string; message?: string}[]}
}
export type PodObject = KubeObject & {
  spec?: {nodeName?: string}
  status?: {phase?: string; conditions?: {type: string; status: string}[]}
}

export const isReady = (o: {status?: {conditions?: {type: string; status: string}[]}}) =>
  o.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false

/** The Node whose InternalIP is the Talos node's address. */
export async function kubeNodeOf(kube: Kube, address: string): Promise<NodeObject | undefined> {
  const nodes = await listObjects<NodeObject>(kube, {apiVersion: 'v1', kind: 'Node'})
  return nodes.find((n) => n.status?.addresses?.some((a) => a.type === 'InternalIP' && a.address === address))
}

/** The Cilium agent pod on that Node (the DaemonSet's pod there). */
export async function ciliumAgentOn(kube: Kube, nodeName: string): Promise<PodObject | undefined> {
  const pods = await listObjects<PodObject>(
    kube,
    {apiVersion: 'v1', kind: 'Pod', namespace: CILIUM_RELEASE.namespace},
    {labelSelector: 'k8s-app=cilium', fieldSelector: `spec.nodeName=${nodeName}`},
  )
  return pods.find((p) => !p.metadata.deletionTimestamp)
}

/** Every pod bound to the Node, in all namespaces. */
export async function podsOnNode<T extends PodObject = PodObject>(kube: Kube, nodeName: string): Promise<T[]> {
  const list = await kube.request<{items: T[]}>('GET', '/api/v1/pods', {query: {fieldSelector: `spec.nodeName=${nodeName}`}})
  return list.items
}
