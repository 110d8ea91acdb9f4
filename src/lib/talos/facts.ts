// What the Cilium guards need to know about the Talos side, read from every node's machine
// config (the agents on every node reach the API server through KubePrism): KubePrism
// (enabled, port) and hostDNS.forwardKubeDNSToHost, in the legacy `machine.features` form
// and the v1.14 KubePrismConfig / ResolverConfig documents.
import {parseAllDocuments} from 'yaml'

export interface TalosFacts {
  /** `node`: with facts of several nodes, the first node whose KubePrism is not on 7445. */
  kubePrism?: {enabled: boolean; port: number; node?: string}
  forwardKubeDNSToHost?: boolean
}

type HostDNS = {forwardKubeDNSToHost?: boolean}
type Doc = {kind?: string; port?: number; hostDNS?: HostDNS; machine?: {features?: {kubePrism?: {enabled?: boolean; port?: number}; hostDNS?: HostDNS}}}

const DEFAULT_KUBEPRISM_PORT = 7445

export function talosFactsFromConfig(configYaml: string): TalosFacts {
  let forward: boolean | undefined
  let typedPrism: {enabled: boolean; port: number} | undefined
  let legacyPrism: {enabled?: boolean; port?: number} | undefined
  for (const d of parseAllDocuments(configYaml)) {
    const doc = d.toJS() as Doc | null
    if (!doc || typeof doc !== 'object') continue
    const features = doc.machine?.features
    if (!doc.kind && features) {
      legacyPrism = features.kubePrism
      if (features.hostDNS?.forwardKubeDNSToHost !== undefined) forward = features.hostDNS.forwardKubeDNSToHost
    }
    if (doc.kind === 'KubePrismConfig' && !typedPrism) typedPrism = {enabled: true, port: doc.port ?? DEFAULT_KUBEPRISM_PORT}
    if (doc.kind === 'ResolverConfig' && doc.hostDNS?.forwardKubeDNSToHost !== undefined) forward = doc.hostDNS.forwardKubeDNSToHost
  }
  // As Talos decides (siderolabs/talos v1.14.0-rc.1, pkg/machinery/config/container/container.go
  // K8sKubePrismConfig): a KubePrismConfig document enables KubePrism on its port; else the legacy
  // machine.features.kubePrism, off unless `enabled: true`, port 7445 when unset
  // (types/v1alpha1/v1alpha1_k8s_bridge.go and v1alpha1_features.go); else none runs.
  const kubePrism = typedPrism ?? {enabled: legacyPrism?.enabled === true, port: legacyPrism?.port || DEFAULT_KUBEPRISM_PORT}
  // forwardKubeDNSToHost defaults to true (Talos v1.8+).
  return {kubePrism, forwardKubeDNSToHost: forward ?? true}
}

/**
 * One view of several nodes' facts for the guards: the agents on every node use KubePrism, so
 * the first node without it on 7445 stands for the cluster (named); CoreDNS may run on any node,
 * so forwarding on one node counts as on.
 */
export function combineTalosFacts(nodes: {node: string; facts: TalosFacts}[]): TalosFacts {
  const out: TalosFacts = {}
  const lacking = nodes.find((n) => n.facts.kubePrism && (!n.facts.kubePrism.enabled || n.facts.kubePrism.port !== DEFAULT_KUBEPRISM_PORT))
  const prism = lacking ?? nodes.find((n) => n.facts.kubePrism)
  if (prism?.facts.kubePrism)
    out.kubePrism = lacking ? {...prism.facts.kubePrism, node: lacking.node} : {enabled: prism.facts.kubePrism.enabled, port: prism.facts.kubePrism.port}
  const forwards = nodes.map((n) => n.facts.forwardKubeDNSToHost).filter((f): f is boolean => f !== undefined)
  if (forwards.length > 0) out.forwardKubeDNSToHost = forwards.some(Boolean)
  return out
}

/** Every node's facts, asked at once (the run's reads send them as one talosctl call). */
export async function readClusterTalosFacts(opts: {nodes: string[]; machineConfig: (node: string) => Promise<string>}): Promise<TalosFacts> {
  const facts = await Promise.all(opts.nodes.map(async (node) => ({node, facts: talosFactsFromConfig(await opts.machineConfig(node))})))
  return combineTalosFacts(facts)
}
