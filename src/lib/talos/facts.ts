// What the Cilium guards need to know about the Talos side, read from a control plane's
// machine config: KubePrism (enabled, port) and hostDNS.forwardKubeDNSToHost, in the
// legacy `machine.features` form and, for the latter, the v1.14 ResolverConfig document.
import {parseAllDocuments} from 'yaml'
import {getMachineConfig} from './talosctl.js'

export interface TalosFacts {
  kubePrism?: {enabled: boolean; port: number}
  forwardKubeDNSToHost?: boolean
}

type HostDNS = {forwardKubeDNSToHost?: boolean}
type Doc = {kind?: string; hostDNS?: HostDNS; machine?: {features?: {kubePrism?: {enabled?: boolean; port?: number}; hostDNS?: HostDNS}}}

export function talosFactsFromConfig(configYaml: string): TalosFacts {
  const facts: TalosFacts = {}
  let forward: boolean | undefined
  for (const d of parseAllDocuments(configYaml)) {
    const doc = d.toJS() as Doc | null
    if (!doc || typeof doc !== 'object') continue
    const features = doc.machine?.features
    if (!doc.kind && features) {
      const prism = features.kubePrism
      // Talos enables KubePrism on 7445 by default since v1.6.
      facts.kubePrism = {enabled: prism?.enabled ?? true, port: prism?.port ?? 7445}
      if (features.hostDNS?.forwardKubeDNSToHost !== undefined) forward = features.hostDNS.forwardKubeDNSToHost
    }
    if (doc.kind === 'ResolverConfig' && doc.hostDNS?.forwardKubeDNSToHost !== undefined) forward = doc.hostDNS.forwardKubeDNSToHost
  }
  // forwardKubeDNSToHost defaults to true (Talos v1.8+).
  facts.forwardKubeDNSToHost = forward ?? true
  return facts
}

export async function readTalosFacts(opts: {node: string; talosconfig: string}): Promise<TalosFacts> {
  return talosFactsFromConfig(await getMachineConfig(opts))
}
