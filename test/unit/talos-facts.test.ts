// The Talos facts the Cilium guards read from a control plane's machine config.
import {describe, expect, it} from 'vitest'
import {talosFactsFromConfig} from '../../src/lib/talos/facts.js'

describe('talosFactsFromConfig', () => {
  it('reads KubePrism and forwardKubeDNSToHost from machine.features', () => {
    const config = 'version: v1alpha1\nmachine:\n  features:\n    kubePrism: {enabled: true, port: 7446}\n    hostDNS: {enabled: true, forwardKubeDNSToHost: false}\n'
    expect(talosFactsFromConfig(config)).toEqual({kubePrism: {enabled: true, port: 7446}, forwardKubeDNSToHost: false})
  })

  it('takes forwardKubeDNSToHost from a v1.14 ResolverConfig document', () => {
    const config = 'version: v1alpha1\nmachine:\n  features: {}\n---\napiVersion: v1alpha1\nkind: ResolverConfig\nhostDNS: {forwardKubeDNSToHost: false}\n'
    expect(talosFactsFromConfig(config)).toEqual({kubePrism: {enabled: true, port: 7445}, forwardKubeDNSToHost: false})
  })

  it("falls back to Talos's defaults: KubePrism on 7445, forwarding on", () => {
    expect(talosFactsFromConfig('version: v1alpha1\nmachine:\n  features:\n    kubePrism: {enabled: false}\n')).toEqual({kubePrism: {enabled: false, port: 7445}, forwardKubeDNSToHost: true})
  })
})
