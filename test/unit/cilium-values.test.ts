// The Cilium values engine against the real Cilium 1.18.0 chart and the real helm binary.
import {describe, expect, it} from 'vitest'
import {CILIUM_OWNED_KEYS, ciliumDefaults} from '../../src/lib/cilium/defaults.js'
import {checkCiliumValues, validateCiliumValues, type CiliumValuesInput} from '../../src/lib/cilium/validate.js'
import type {CiliumFacts} from '../../src/lib/cilium/guards.js'
import {formatPath, setPath, type Values} from '../../src/lib/values/path.js'
import {UPSTREAM} from '../support/upstream.js'

type Facts = Partial<CiliumFacts> & {tunnel?: 'vxlan' | 'geneve'}

function input(user: Values, facts: Facts = {}): CiliumValuesInput {
  return {chartPath: UPSTREAM.ciliumChart, user, facts: {kubeProxy: 'replaced', tunnel: 'vxlan', ...facts}}
}

const accepted: [string, Values, Facts?][] = [
  ['no user values at all', {}],
  ['Hubble relay and UI', {hubble: {relay: {enabled: true}, ui: {enabled: true}}}],
  ['loadBalancer.mode, documented but commented out in values.yaml', {loadBalancer: {mode: 'dsr'}}],
  ['loadBalancer.algorithm maglev (commented option)', {loadBalancer: {algorithm: 'maglev'}}],
  ['podAnnotations with dotted keys (free-form map)', {podAnnotations: {'example.com/team': 'net', 'a.b.c/d': 'x'}}],
  ['one operator replica for a homelab', {operator: {replicas: 1}}],
  ['bandwidth manager with BBR', {bandwidthManager: {enabled: true, bbr: true}}],
  ['Hubble metrics list', {hubble: {metrics: {enabled: ['dns', 'drop', 'tcp', 'flow', 'icmp', 'http']}}}],
  ['Prometheus ServiceMonitor (monitoring.coreos.com/v1 declared present)', {prometheus: {enabled: true, serviceMonitor: {enabled: true}}}],
  ['native routing', {routingMode: 'native', ipv4NativeRoutingCIDR: '10.244.0.0/16', autoDirectNodeRoutes: true}],
  ['extraArgs list', {extraArgs: ['--api-rate-limit=endpoint-create=rate-limit:10/s']}],
  ['custom nodeSelector', {nodeSelector: {'kubernetes.io/os': 'linux', 'node.example/pool': 'edge'}}],
  ['tolerations list', {tolerations: [{operator: 'Exists'}]}],
  ['agent resources', {resources: {requests: {cpu: '100m', memory: '256Mi'}, limits: {memory: '1Gi'}}}],
  ['Gateway API with its CRDs present, kube-proxy replaced', {gatewayAPI: {enabled: true}}, {gatewayApiCrds: 'present'}],
  ['Gateway API with CRD presence unknown (guard passes with a note)', {gatewayAPI: {enabled: true}}],
  ['bpf.masquerade when Talos does not forward kube-dns to the host', {bpf: {masquerade: true}}, {forwardKubeDNSToHost: false}],
  ['bpf.masquerade when the Talos side is unknown', {bpf: {masquerade: true}}],
  [
    'clustermesh API server with cronJob certificates',
    {cluster: {name: 'home', id: 3}, clustermesh: {useAPIServer: true, apiserver: {tls: {auto: {method: 'cronJob'}}}}},
  ],
  ['Hubble certificates by helm instead of the cronJob default', {hubble: {tls: {auto: {method: 'helm'}}}}],
  ['WireGuard encryption', {encryption: {enabled: true, type: 'wireguard'}}],
  ['L2 announcements', {l2announcements: {enabled: true}}],
  ['cluster name and id together', {cluster: {name: 'lab', id: 7}}],
  ['client rate limits', {k8sClientRateLimit: {qps: 20, burst: 40}}],
  ['socketLB host namespace only', {socketLB: {hostNamespaceOnly: true}}],
  ['debug logging', {debug: {enabled: true}}],
  ['geneve tunnel with kube-proxy kept', {}, {kubeProxy: 'kube-proxy', tunnel: 'geneve'}],
  ['a null removes a chart default (helm semantics)', {nodeSelector: null, hubble: {relay: {tolerations: null}}}],
  ['envoy DaemonSet off', {envoy: {enabled: false}}],
  [
    'a Kubernetes securityContext handed whole to the pod (with .Values… toYaml .)',
    {hubble: {relay: {enabled: true, securityContext: {runAsUser: 1000, runAsGroup: 1000}}}},
  ],
  ['a pod security context field not in values.yaml', {operator: {podSecurityContext: {fsGroup: 1000}}}],
  ['an update strategy field not in values.yaml', {updateStrategy: {rollingUpdate: {maxSurge: 1}}}],
  [
    'operator node affinity',
    {
      operator: {
        affinity: {
          nodeAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: {
              nodeSelectorTerms: [{matchExpressions: [{key: 'node-role.kubernetes.io/control-plane', operator: 'Exists'}]}],
            },
          },
        },
      },
    },
  ],
]

describe('Cilium values accepted (real chart, real helm render)', () => {
  it.each(accepted)('%s', async (_name, user, facts) => {
    const report = await validateCiliumValues(input(user, facts))
    expect(report.issues).toEqual([])
    expect(report.valid).toBe(true)
    expect(report.rendered).toMatch(/kind: DaemonSet/)
  })
})

describe('Ichor-owned keys are refused, each with its reason', () => {
  const samples: Record<string, unknown> = {
    'ipam.mode': 'cluster-pool',
    'securityContext.capabilities.ciliumAgent': ['NET_ADMIN'],
    'securityContext.capabilities.cleanCiliumState': ['NET_ADMIN'],
    'cgroup.autoMount.enabled': true,
    'cgroup.hostRoot': '/run/cilium/cgroupv2',
    k8sServiceHost: '10.0.0.1',
    k8sServicePort: 6443,
    k8sServiceHostRef: {name: 'x'},
    kubeProxyReplacement: false,
    tunnelProtocol: 'geneve',
    'tls.secretsNamespace.name': 'kube-system',
    'gatewayAPI.secretsNamespace.name': 'other',
    'ingressController.secretsNamespace.name': 'other',
    'envoyConfig.secretsNamespace.name': 'other',
    'bgpControlPlane.secretsNamespace.name': 'kube-system',
    upgradeCompatibility: '1.10',
    rollOutCiliumPods: false,
    'operator.rollOutPods': false,
    'envoy.rollOutPods': false,
    'hubble.relay.rollOutPods': false,
    'hubble.ui.rollOutPods': false,
  }
  it('covers every owned key', () => {
    expect(Object.keys(samples).sort()).toEqual(CILIUM_OWNED_KEYS.map((k) => formatPath(k.path)).sort())
  })
  it.each(Object.entries(samples))('%s', (path, value) => {
    const user: Values = {}
    setPath(user, path.split('.'), value)
    const {issues} = checkCiliumValues(input(user))
    expect(issues).toContainEqual({path, message: expect.stringMatching(/^is owned by ichor and cannot be set( \(ichor sets [^)]+\))?: .{10,}/)})
  })
  // The values file of Talos's Cilium guide (its --set flags, kube-proxy replaced), which
  // talosctl and talhelper users start from: eight owned keys, each at exactly ichor's value.
  const TALOS_GUIDE_VALUES: Values = {
    ipam: {mode: 'kubernetes'},
    kubeProxyReplacement: true,
    securityContext: {
      capabilities: {
        ciliumAgent: ['CHOWN', 'KILL', 'NET_ADMIN', 'NET_RAW', 'IPC_LOCK', 'SYS_ADMIN', 'SYS_RESOURCE', 'DAC_OVERRIDE', 'FOWNER', 'SETGID', 'SETUID'],
        cleanCiliumState: ['NET_ADMIN', 'SYS_ADMIN', 'SYS_RESOURCE'],
      },
    },
    cgroup: {autoMount: {enabled: false}, hostRoot: '/sys/fs/cgroup'},
    k8sServiceHost: 'localhost',
    k8sServicePort: 7445,
  }
  it("accepts the Talos guide's values, each owned key with a note, and stores none of them", async () => {
    const report = await validateCiliumValues(input({...TALOS_GUIDE_VALUES, hubble: {relay: {enabled: true}}}))
    expect(report.issues).toEqual([])
    expect(report.valid).toBe(true)
    expect(report.ownedNotes).toHaveLength(8)
    for (const path of ['ipam.mode', 'kubeProxyReplacement', 'k8sServicePort', 'securityContext.capabilities.ciliumAgent', 'cgroup.hostRoot'])
      expect(report.ownedNotes).toContainEqual(
        expect.stringMatching(new RegExp(`^${path.replaceAll('.', '\\.')}: .* is the value ichor sets itself; accepted, not stored`)),
      )
    expect(report.notes).toEqual(expect.arrayContaining(report.ownedNotes))
    // Only the user's own key is left to store: a kube-proxy switch later never finds a stale owned value.
    expect(report.user).toEqual({hubble: {relay: {enabled: true}}})
  })
  it('still refuses an owned key whose value differs, naming the value ichor sets', () => {
    // The same guide file on a cluster that keeps kube-proxy: three keys disagree.
    const {issues, user} = checkCiliumValues(input(TALOS_GUIDE_VALUES, {kubeProxy: 'kube-proxy'}))
    expect(issues.map((i) => i.path).sort()).toEqual(['k8sServiceHost', 'k8sServicePort', 'kubeProxyReplacement'])
    expect(issues).toContainEqual({
      path: 'kubeProxyReplacement',
      message: expect.stringMatching(/^is owned by ichor and cannot be set \(ichor sets false\): set by the kube-proxy mode/),
    })
    expect(user).not.toHaveProperty('ipam')
    // A capability list in another order is another value: refused.
    const reordered = checkCiliumValues(input({securityContext: {capabilities: {cleanCiliumState: ['SYS_ADMIN', 'NET_ADMIN', 'SYS_RESOURCE']}}}))
    expect(reordered.issues.map((i) => i.path)).toEqual(['securityContext.capabilities.cleanCiliumState'])
  })
  it('refuses a scalar or null that would replace a map holding owned keys', () => {
    const {issues} = checkCiliumValues(input({cgroup: null}))
    expect(issues).toEqual([{path: 'cgroup', message: expect.stringMatching(/must be a map: it holds ichor-owned keys/)}])
  })
  it('keeps the owned values in the effective values whatever the user layer says elsewhere', () => {
    const {effective} = checkCiliumValues(input({hubble: {enabled: true}}, {kubeProxy: 'replaced', tunnel: 'geneve'}))
    expect(effective).toMatchObject({
      ipam: {mode: 'kubernetes'},
      kubeProxyReplacement: true,
      k8sServiceHost: 'localhost',
      k8sServicePort: 7445,
      tunnelProtocol: 'geneve',
      cgroup: {autoMount: {enabled: false}, hostRoot: '/sys/fs/cgroup'},
    })
    expect(effective).toMatchObject({bgpControlPlane: {secretsNamespace: {name: 'cilium-secrets'}}, hubble: {enabled: true, tls: {auto: {method: 'cronJob'}}}})
    const kp = checkCiliumValues(input({}, {kubeProxy: 'kube-proxy'})).effective
    expect(kp.kubeProxyReplacement).toBe(false)
    expect(kp).not.toHaveProperty('k8sServiceHost')
  })
})

const rejected: [string, Values, Facts, string, RegExp][] = [
  ['a top-level typo, with a suggestion', {hubbel: {enabled: true}}, {}, 'hubbel', /not a key the chart knows.*did you mean hubble\?/],
  [
    'a nested typo, with a suggestion',
    {hubble: {relay: {enabeld: true}}},
    {},
    'hubble.relay.enabeld',
    /not a key hubble\.relay knows.*did you mean hubble\.relay\.enabled\?/,
  ],
  ['a key that exists nowhere in the chart', {frobnicate: 1}, {}, 'frobnicate', /not a key the chart knows/],
  [
    'a probe field the chart does not read (its probes are not passed whole)',
    {livenessProbe: {timeoutSeconds: 3}},
    {},
    'livenessProbe.timeoutSeconds',
    /not a key livenessProbe knows/,
  ],
  [
    'a nested typo with a suggestion under hubble.relay',
    {hubble: {relay: {sevice: {type: 'NodePort'}}}},
    {},
    'hubble.relay.sevice',
    /did you mean hubble\.relay\.service\?/,
  ],
  ['a typo under a commented-option block', {loadBalancer: {moode: 'dsr'}}, {}, 'loadBalancer.moode', /did you mean loadBalancer\.mode\?/],
  ['YAML-1.1 "yes" is a string, not a boolean', {bpf: {masquerade: 'yes'}}, {}, 'bpf.masquerade', /must be null or boolean \(got string "yes"\)/],
  ['a string where the schema wants an integer', {operator: {replicas: 'two'}}, {}, 'operator.replicas', /must be integer \(got string "two"\)/],
  ['a scalar where the chart has a map', {debug: true}, {}, 'debug', /must be object \(got boolean true\)/],
  ['a list where the chart has a boolean', {debug: {enabled: ['x']}}, {}, 'debug.enabled', /must be boolean|got a list/],
  [
    'bpf.masquerade while Talos forwards kube-dns to the host',
    {bpf: {masquerade: true}},
    {forwardKubeDNSToHost: true},
    'bpf.masquerade',
    /breaks CoreDNS.*forwardKubeDNSToHost/,
  ],
  [
    'Gateway API while kube-proxy runs',
    {gatewayAPI: {enabled: true}},
    {kubeProxy: 'kube-proxy', gatewayApiCrds: 'present'},
    'gatewayAPI.enabled',
    /needs the kube-proxy replacement/,
  ],
  ['Gateway API without its CRDs', {gatewayAPI: {enabled: true}}, {gatewayApiCrds: 'absent'}, 'gatewayAPI.enabled', /Gateway API CRDs installed first/],
  [
    'clustermesh API server with the chart default helm certificates',
    {cluster: {name: 'a', id: 1}, clustermesh: {useAPIServer: true}},
    {},
    'clustermesh.apiserver.tls.auto.method',
    /must be "cronJob".*chart default "helm"/,
  ],
  [
    'clustermesh API server with an explicit helm method',
    {cluster: {name: 'a', id: 1}, clustermesh: {useAPIServer: true, apiserver: {tls: {auto: {method: 'helm'}}}}},
    {},
    'clustermesh.apiserver.tls.auto.method',
    /got "helm"/,
  ],
  [
    'kube-proxy replaced while Talos has KubePrism off',
    {},
    {kubePrism: {enabled: false, port: 7445}},
    'kubeProxyReplacement',
    /KubePrism enabled on port 7445.*disabled/,
  ],
  ['kube-proxy replaced while KubePrism listens elsewhere', {}, {kubePrism: {enabled: true, port: 7446}}, 'kubeProxyReplacement', /on port 7446/],
  [
    'a ServiceMonitor on a cluster that does not serve monitoring.coreos.com',
    {prometheus: {enabled: true, serviceMonitor: {enabled: true}}},
    {monitoringCrds: 'absent'},
    'prometheus.serviceMonitor.enabled',
    /monitoring\.coreos\.com/,
  ],
  [
    "Hubble's ServiceMonitor on a cluster without monitoring.coreos.com",
    {hubble: {metrics: {enabled: ['dns'], serviceMonitor: {enabled: true}}}},
    {monitoringCrds: 'absent'},
    'hubble.metrics.serviceMonitor.enabled',
    /ServiceMonitor CRD/,
  ],
  [
    'merged values over 64 KiB',
    {podAnnotations: Object.fromEntries(Array.from({length: 800}, (_, i) => [`example.com/a${i}`, 'x'.repeat(80)]))},
    {},
    '(values)',
    /at most 65536 bytes \(64 KiB\)/,
  ],
]

describe('Cilium values rejected, each naming the path and the reason', () => {
  it.each(rejected)('%s', async (_name, user, facts, path, message) => {
    const report = await validateCiliumValues(input(user, facts))
    expect(report.valid).toBe(false)
    expect(report.rendered).toBeUndefined()
    expect(report.issues).toContainEqual({path, message: expect.stringMatching(message)})
  })

  it("Talos's facts may arrive after the chart's checks (laterFacts): the guards judge them; a failed read fails the validation", async () => {
    const late = await validateCiliumValues({...input({}), laterFacts: Promise.resolve({kubePrism: {enabled: false, port: 7445}})})
    expect(late.valid).toBe(false)
    expect(late.issues).toContainEqual({path: 'kubeProxyReplacement', message: expect.stringMatching(/KubePrism enabled on port 7445.*disabled/)})
    // Together with a chart problem, both are reported.
    const both = await validateCiliumValues({...input({externalIPs: {enabled: true}}), laterFacts: Promise.resolve({kubePrism: {enabled: true, port: 7446}})})
    expect(both.issues.map((i) => i.path).sort()).toEqual(['externalIPs', 'kubeProxyReplacement'])
    await expect(validateCiliumValues({...input({}), laterFacts: Promise.reject(new Error('talosctl: connection refused'))})).rejects.toThrow(
      /connection refused/,
    )
  })

  it("cluster.id without cluster.name is refused by the chart's own validate template", async () => {
    const report = await validateCiliumValues(input({cluster: {id: 5}}))
    expect(report.valid).toBe(false)
    expect(report.issues).toEqual([
      {path: expect.stringMatching(/^\(chart cilium\/templates\/validate\.yaml:\d+\)$/), message: expect.stringMatching(/cluster name is invalid/)},
    ])
  })

  it('clustermesh with certificate automation off but no certificates is refused by the chart', async () => {
    const report = await validateCiliumValues(
      input({cluster: {name: 'home', id: 4}, clustermesh: {useAPIServer: true, apiserver: {tls: {auto: {enabled: false}}}}}),
    )
    expect(report.issues).toEqual([
      {
        path: expect.stringMatching(/^\(chart cilium\/templates\/clustermesh-apiserver\/.*\)$/),
        message: expect.stringMatching(/missing clustermesh\.apiserver\.tls\.server\.cert/),
      },
    ])
  })

  it('a key from an older chart (externalIPs) is refused as unknown', () => {
    const {issues} = checkCiliumValues(input({externalIPs: {enabled: true}}))
    expect(issues).toEqual([{path: 'externalIPs', message: expect.stringMatching(/not a key the chart knows/)}])
  })

  it('reports every problem together', () => {
    const {issues} = checkCiliumValues(input({ipam: {mode: 'x'}, hubbel: {}, bpf: {masquerade: 'no'}, tunnelProtocol: 'geneve'}))
    expect(issues.map((i) => i.path).sort()).toEqual(['bpf.masquerade', 'hubbel', 'ipam.mode', 'tunnelProtocol'])
  })

  it('leaves an unknown fact to pass with a note', () => {
    const {issues, notes} = checkCiliumValues(input({bpf: {masquerade: true}, gatewayAPI: {enabled: true}}))
    expect(issues).toEqual([])
    expect(notes.join('\n')).toMatch(/forward-kube-dns-to-host/)
    expect(notes.join('\n')).toMatch(/gateway-api-crds/)
  })
})

describe('ichor defaults that depend on the cluster', () => {
  it('one node: one operator replica (the chart has two, which need two nodes); the user may still override it', () => {
    expect(ciliumDefaults({nodeCount: 1})).toMatchObject({operator: {replicas: 1}})
    expect(ciliumDefaults({nodeCount: 2})).not.toHaveProperty('operator')
    expect(ciliumDefaults()).not.toHaveProperty('operator')
    expect(CILIUM_OWNED_KEYS.map((k) => formatPath(k.path))).not.toContain('operator.replicas')
  })
})
