// The Talos facts the Cilium guards read from every node's machine config.
import {describe, expect, it} from 'vitest'
import {checkCiliumGuards} from '../../src/lib/cilium/guards.js'
import {combineTalosFacts, talosFactsFromConfig} from '../../src/lib/talos/facts.js'

describe('talosFactsFromConfig', () => {
  it('reads KubePrism and forwardKubeDNSToHost from machine.features', () => {
    const config =
      'version: v1alpha1\nmachine:\n  features:\n    kubePrism: {enabled: true, port: 7446}\n    hostDNS: {enabled: true, forwardKubeDNSToHost: false}\n'
    expect(talosFactsFromConfig(config)).toEqual({kubePrism: {enabled: true, port: 7446}, forwardKubeDNSToHost: false})
  })

  it('takes forwardKubeDNSToHost from a v1.14 ResolverConfig document, and KubePrism from the KubePrismConfig document', () => {
    const config =
      'version: v1alpha1\nmachine:\n  features: {}\n---\napiVersion: v1alpha1\nkind: ResolverConfig\nhostDNS: {forwardKubeDNSToHost: false}\n---\napiVersion: v1alpha1\nkind: KubePrismConfig\nport: 7445\n'
    expect(talosFactsFromConfig(config)).toEqual({kubePrism: {enabled: true, port: 7445}, forwardKubeDNSToHost: false})
  })

  it("falls back to Talos's defaults: KubePrism off unless configured (legacy enabled defaults to false, port to 7445), forwarding on", () => {
    expect(talosFactsFromConfig('version: v1alpha1\nmachine:\n  features:\n    kubePrism: {enabled: false}\n')).toEqual({
      kubePrism: {enabled: false, port: 7445},
      forwardKubeDNSToHost: true,
    })
    expect(talosFactsFromConfig('version: v1alpha1\nmachine:\n  features:\n    kubePrism: {enabled: true}\n').kubePrism).toEqual({enabled: true, port: 7445})
    // A v1.14 config without a KubePrismConfig document (and no legacy field) runs no KubePrism.
    expect(
      talosFactsFromConfig(
        'version: v1alpha1\nmachine:\n  features: {}\n---\napiVersion: v1alpha1\nkind: ResolverConfig\nhostDNS: {forwardKubeDNSToHost: true}\n',
      ).kubePrism,
    ).toEqual({enabled: false, port: 7445})
  })
})

describe('combineTalosFacts: the agents on every node use KubePrism', () => {
  const on = {kubePrism: {enabled: true, port: 7445}, forwardKubeDNSToHost: true}
  it('given every node with KubePrism on 7445, then KubePrism is on', () => {
    expect(
      combineTalosFacts([
        {node: '10.0.0.1', facts: on},
        {node: '10.0.0.2', facts: on},
      ]),
    ).toEqual({kubePrism: {enabled: true, port: 7445}, forwardKubeDNSToHost: true})
  })
  it('given a worker without KubePrism, then the facts name that node and the guard refuses the replacement naming it', () => {
    const facts = combineTalosFacts([
      {node: '10.0.0.1', facts: on},
      {node: '10.0.0.2', facts: {kubePrism: {enabled: false, port: 7445}, forwardKubeDNSToHost: true}},
    ])
    expect(facts.kubePrism).toEqual({enabled: false, port: 7445, node: '10.0.0.2'})
    const {issues} = checkCiliumGuards({}, {kubeProxy: 'replaced', ...facts})
    expect(issues).toEqual([
      expect.objectContaining({path: 'kubeProxyReplacement', message: expect.stringMatching(/KubePrism enabled on port 7445.*node 10\.0\.0\.2.*disabled/)}),
    ])
  })
  it('given one node forwarding kube-dns to the host DNS, then forwarding counts as on (the bpf.masquerade guard)', () => {
    expect(
      combineTalosFacts([
        {node: 'a', facts: {...on, forwardKubeDNSToHost: false}},
        {node: 'b', facts: on},
      ]).forwardKubeDNSToHost,
    ).toBe(true)
    expect(combineTalosFacts([{node: 'a', facts: {...on, forwardKubeDNSToHost: false}}]).forwardKubeDNSToHost).toBe(false)
  })
})
