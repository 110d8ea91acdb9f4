// Shared inputs for the Talos tests: a small fixed Cilium manifest (goldens stay readable)
// and the real Cilium 1.18.0 chart rendered once by the real helm.
import {helmTemplate} from '../../src/lib/helm/template.js'
import {addHelmOwnership} from '../../src/lib/talos/ownership.js'
import {UPSTREAM} from '../support/upstream.js'

export const SMALL_CILIUM_MANIFEST = addHelmOwnership(
  [
    'apiVersion: v1',
    'kind: ServiceAccount',
    'metadata:',
    '  name: cilium',
    '  namespace: kube-system',
    '---',
    'apiVersion: v1',
    'kind: ConfigMap',
    'metadata:',
    '  name: cilium-config',
    '  namespace: kube-system',
    'data:',
    '  kube-proxy-replacement: "true"',
    '  k8s-service-host: localhost',
    '  k8s-service-port: "7445"',
    '',
  ].join('\n'),
)

/** The Talos guide's settings for a kube-proxy-free install over KubePrism. */
export const TALOS_GUIDE_VALUES = {
  ipam: {mode: 'kubernetes'},
  kubeProxyReplacement: true,
  k8sServiceHost: 'localhost',
  k8sServicePort: 7445,
  cgroup: {autoMount: {enabled: false}, hostRoot: '/sys/fs/cgroup'},
  securityContext: {
    capabilities: {
      ciliumAgent: ['CHOWN', 'KILL', 'NET_ADMIN', 'NET_RAW', 'IPC_LOCK', 'SYS_ADMIN', 'SYS_RESOURCE', 'DAC_OVERRIDE', 'FOWNER', 'SETGID', 'SETUID'],
      cleanCiliumState: ['NET_ADMIN', 'SYS_ADMIN', 'SYS_RESOURCE'],
    },
  },
  hubble: {tls: {auto: {method: 'cronJob'}}},
}

let realCilium: Promise<string> | undefined

/** `helm template` of the real Cilium 1.18.0 chart, rendered once per test file. */
export function renderRealCilium(): Promise<string> {
  realCilium ??= helmTemplate({
    chartPath: UPSTREAM.ciliumChart,
    releaseName: 'cilium',
    namespace: 'kube-system',
    values: TALOS_GUIDE_VALUES,
  })
  return realCilium
}
