// The Talos side of the kube-proxy switch: which nodes carry the setting, how a config
// says kube-proxy runs, and the patch in each config contract's form.
import {describe, expect, it} from 'vitest'
import {parse} from 'yaml'
import {kubeProxyEnabledIn, kubeProxyNftablesLeftover, kubeProxyNodes, kubeProxyPatch} from '../../src/lib/talos/kube-proxy.js'

const talos = (talosVersion: string) => ({
  clusterName: 'c',
  endpoint: 'https://10.0.0.1:6443',
  talosVersion,
  kubernetesVersion: '1.37.0',
  controlPlanes: ['10.0.0.1'],
  workers: ['10.0.0.2'],
})

describe('kube-proxy on Talos', () => {
  it('v1.14 contract: KubeProxyConfig on control planes only (where gen config writes it); below: cluster.proxy on every node', () => {
    expect(kubeProxyNodes(talos('v1.14.1'))).toEqual([{node: '10.0.0.1', role: 'control plane'}])
    expect(kubeProxyNodes(talos('v1.13.9'))).toEqual([
      {node: '10.0.0.1', role: 'control plane'},
      {node: '10.0.0.2', role: 'worker'},
    ])
    expect(parse(kubeProxyPatch('v1.14.1', false))).toEqual({apiVersion: 'v1alpha1', kind: 'KubeProxyConfig', enabled: false})
    expect(parse(kubeProxyPatch('v1.12.6', true))).toEqual({cluster: {proxy: {disabled: false}}})
  })

  it('reads the mode as Talos does: the typed document first, then the v1alpha1 field; absent means enabled', () => {
    const legacy = 'version: v1alpha1\nmachine: {type: controlplane}\ncluster: {clusterName: c}\n'
    expect(kubeProxyEnabledIn(legacy)).toBe(true)
    expect(kubeProxyEnabledIn(legacy.replace('{clusterName: c}', '{proxy: {disabled: true}}'))).toBe(false)
    const typed = (extra: string) => `${legacy}---\napiVersion: v1alpha1\nkind: KubeProxyConfig\nimage: registry.k8s.io/kube-proxy:v1.37.0\n${extra}`
    expect(kubeProxyEnabledIn(typed(''))).toBe(true)
    expect(kubeProxyEnabledIn(typed('enabled: false\n'))).toBe(false)
    expect(kubeProxyEnabledIn(typed('enabled: true\n'))).toBe(true)
  })
})

describe('what kube-proxy leaves on the nodes after `cni kube-proxy replace`', () => {
  it("names Talos's nftables mode, kube-proxy's tables, every node (workers too) and the reboot that clears them", () => {
    const talos = {
      clusterName: 'c',
      endpoint: 'https://10.0.0.1:6443',
      talosVersion: 'v1.14.1',
      kubernetesVersion: '1.36.0',
      controlPlanes: ['10.0.0.1'],
      workers: ['10.0.0.2'],
    }
    const left = kubeProxyNftablesLeftover(talos)
    expect(left).toMatchObject({mode: 'nftables', tables: ['ip kube-proxy', 'ip6 kube-proxy'], nodes: ['10.0.0.1', '10.0.0.2']})
    expect(left.note).toMatch(
      /nftables tables ip kube-proxy and ip6 kube-proxy stay on 10\.0\.0\.1, 10\.0\.0\.2 until each node reboots.*talosctl reboot -n 10\.0\.0\.1/,
    )
  })
})
