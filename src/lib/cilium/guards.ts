// The semantic guards of ADR-0099 decision 4 and its amendments. Each reads facts the
// caller may or may not know; an unknown fact lets its guard pass, with a note.
import type {Issue} from '../errors/errors.js'
import {getPath, type Values} from '../values/path.js'
import type {KubeProxyMode} from '../state/installation-types.js'
import {KUBEPRISM_PORT} from '../talos/patches.js'

export interface CiliumFacts {
  kubeProxy: KubeProxyMode
  /** Talos machine.features.hostDNS.forwardKubeDNSToHost (ResolverConfig on v1.14+). */
  forwardKubeDNSToHost?: boolean
  /** Whether the Gateway API CRDs are installed in the cluster. */
  gatewayApiCrds?: 'present' | 'absent'
  /** Whether the cluster serves monitoring.coreos.com (the Prometheus operator's ServiceMonitor CRD). */
  monitoringCrds?: 'present' | 'absent'
  /** The cluster does not exist yet (`ichor init`): CRDs can only be installed after it. */
  freshCluster?: boolean
  /** KubePrism as the Talos machine configs set it; `node`: the node whose config lacks it on 7445. */
  kubePrism?: {enabled: boolean; port: number; node?: string}
  /** The cluster's Talos node count: the defaults depend on it (one node, one operator). */
  nodeCount?: number
  /** Why the Talos side was deliberately not read (nothing is applied): its guards are left out with this one note. */
  talosUnread?: string
}

export interface GuardResult {
  issues: Issue[]
  notes: string[]
}

export function checkCiliumGuards(effective: Values, facts: CiliumFacts): GuardResult {
  const issues: Issue[] = []
  const notes: string[] = []

  // Talos's side deliberately unread (nothing is applied): its two guards give way to one note.
  const talosUnread = facts.talosUnread !== undefined && (getPath(effective, ['bpf', 'masquerade']) === true || facts.kubeProxy === 'replaced')
  if (talosUnread) notes.push(facts.talosUnread!)
  if (getPath(effective, ['bpf', 'masquerade']) === true && !talosUnread) {
    if (facts.forwardKubeDNSToHost === undefined) {
      notes.push(
        'bpf.masquerade: whether Talos forwards kube-dns to the host DNS is unknown here, so the CoreDNS guard was not applied (pass --forward-kube-dns-to-host)',
      )
    } else if (facts.forwardKubeDNSToHost) {
      issues.push({
        path: 'bpf.masquerade',
        message:
          'true breaks CoreDNS while Talos forwards kube-dns to the host DNS (forwardKubeDNSToHost: true, the Talos default); set forwardKubeDNSToHost: false on the Talos side first, or leave bpf.masquerade unset',
      })
    }
  }

  if (getPath(effective, ['gatewayAPI', 'enabled']) === true) {
    if (facts.kubeProxy !== 'replaced') {
      issues.push({path: 'gatewayAPI.enabled', message: "true needs the kube-proxy replacement (Cilium's Gateway API prerequisite); use --kube-proxy replaced"})
    }
    if (facts.gatewayApiCrds === undefined) {
      notes.push(
        'gatewayAPI.enabled: whether the Gateway API CRDs are installed is unknown here, so that guard was not applied (pass --gateway-api-crds present|absent)',
      )
    } else if (facts.gatewayApiCrds === 'absent') {
      issues.push({
        path: 'gatewayAPI.enabled',
        message: 'true needs the Gateway API CRDs installed first (gateway.networking.k8s.io); install them, then enable it',
      })
    }
  }

  if (facts.kubeProxy === 'replaced' && !talosUnread) {
    if (facts.kubePrism === undefined) {
      notes.push(`kube-proxy replacement: KubePrism on port ${KUBEPRISM_PORT} is assumed (the Talos side is not known here)`)
    } else if (!facts.kubePrism.enabled || facts.kubePrism.port !== KUBEPRISM_PORT) {
      issues.push({
        path: 'kubeProxyReplacement',
        message: `the kube-proxy replacement needs KubePrism enabled on port ${KUBEPRISM_PORT} on every node (the agents reach the API server through it), but the Talos config${facts.kubePrism.node ? ` of node ${facts.kubePrism.node}` : ''} has it ${facts.kubePrism.enabled ? `on port ${facts.kubePrism.port}` : 'disabled'}`,
      })
    }
  }

  if (facts.monitoringCrds === 'absent') {
    for (const path of enabledServiceMonitors(effective)) {
      issues.push({
        path: `${path}.enabled`,
        message: facts.freshCluster
          ? `true cannot be set at init: a new cluster does not serve the ServiceMonitor CRD (monitoring.coreos.com); leave it off here, install the Prometheus operator's CRDs after init, then enable it with \`ichor cni values set ${path}.enabled=true\``
          : 'true needs the ServiceMonitor CRD (monitoring.coreos.com), which this cluster does not serve; install the Prometheus operator first',
      })
    }
  }

  if (getPath(effective, ['clustermesh', 'useAPIServer']) === true) {
    const tlsAuto = ['clustermesh', 'apiserver', 'tls', 'auto']
    const autoEnabled = getPath(effective, [...tlsAuto, 'enabled'])
    const method = getPath(effective, [...tlsAuto, 'method'])
    if (autoEnabled !== false && method !== 'cronJob') {
      issues.push({
        path: 'clustermesh.apiserver.tls.auto.method',
        message: `must be "cronJob" when clustermesh.useAPIServer is true (got ${method === undefined ? 'the chart default "helm"' : JSON.stringify(method)}); or set clustermesh.apiserver.tls.auto.enabled: false and supply the certificates`,
      })
    }
  }

  return {issues, notes}
}

/** Paths of every `serviceMonitor` map with `enabled: true` (hubble.metrics.serviceMonitor, prometheus.serviceMonitor, ...). */
function enabledServiceMonitors(values: unknown, path: string[] = []): string[] {
  if (!values || typeof values !== 'object' || Array.isArray(values)) return []
  const out: string[] = []
  for (const [key, value] of Object.entries(values)) {
    if (key === 'serviceMonitor' && value && typeof value === 'object' && (value as {enabled?: unknown}).enabled === true) out.push([...path, key].join('.'))
    else out.push(...enabledServiceMonitors(value, [...path, key]))
  }
  return out
}
