import {existsSync, mkdirSync, readFileSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'
import {describe, expect, it} from 'vitest'
import {parseAllDocuments} from 'yaml'
import {IchorError} from '../../src/lib/errors/errors.js'
import {addHelmOwnership} from '../../src/lib/talos/ownership.js'
import {renderRealCilium, SMALL_CILIUM_MANIFEST} from './fixtures.js'
import {removeInlineManifestPatch, renderTalosPatches} from '../../src/lib/talos/patches.js'
import type {KubeProxyMode} from '../../src/lib/state/installation-types.js'

const goldenDir = fileURLToPath(new URL('./golden', import.meta.url))

type Doc = Record<string, any>

function docs(patch: string): Doc[] {
  return parseAllDocuments(patch).map((d) => {
    expect(d.errors).toEqual([])
    return d.toJS() as Doc
  })
}

function kinds(patch: string): string[] {
  return docs(patch).map((d) => d.kind ?? 'v1alpha1')
}

function golden(name: string, actual: string): void {
  const file = join(goldenDir, name)
  if (process.env.UPDATE_GOLDEN === '1') {
    mkdirSync(goldenDir, {recursive: true})
    writeFileSync(file, actual)
  }
  expect(existsSync(file), `${file} is missing; run with UPDATE_GOLDEN=1 to create it`).toBe(true)
  expect(actual, `${name} differs; run with UPDATE_GOLDEN=1 if the change is intended`).toBe(readFileSync(file, 'utf8'))
}

describe('renderTalosPatches golden files (byte-for-byte; UPDATE_GOLDEN=1 regenerates)', () => {
  const cases: Array<[string, string, KubeProxyMode]> = [
    ['v1.14-replaced', 'v1.14.1', 'replaced'],
    ['v1.14-kube-proxy', 'v1.14.1', 'kube-proxy'],
    ['v1.13-replaced', 'v1.13.9', 'replaced'],
  ]
  it.each(cases)('%s', (name, talosVersion, kubeProxy) => {
    const patches = renderTalosPatches({talosVersion, kubeProxy, ciliumManifest: SMALL_CILIUM_MANIFEST})
    golden(`${name}-controlplane.yaml`, patches.controlPlane)
    golden(`${name}-worker.yaml`, patches.worker)
  })

  it.each([
    ['v1.14', 'v1.14.1'],
    ['v1.13', 'v1.13.9'],
  ])('remove-inline-manifest-%s', (name, talosVersion) => {
    golden(`remove-inline-manifest-${name}.yaml`, removeInlineManifestPatch(talosVersion))
  })
})

describe('renderTalosPatches on a v1.14 contract (multi-document Kubernetes config)', () => {
  const replaced = renderTalosPatches({talosVersion: '1.14.1', kubeProxy: 'replaced', ciliumManifest: SMALL_CILIUM_MANIFEST})
  const withProxy = renderTalosPatches({talosVersion: 'v1.14.0', kubeProxy: 'kube-proxy', ciliumManifest: SMALL_CILIUM_MANIFEST})

  it('control plane: deletes the flannel document, disables kube-proxy, KubePrism on 7445, Cilium inline', () => {
    const cp = docs(replaced.controlPlane)
    expect(cp).toContainEqual({apiVersion: 'v1alpha1', kind: 'KubeFlannelCNIConfig', $patch: 'delete'})
    expect(cp).toContainEqual({apiVersion: 'v1alpha1', kind: 'KubeProxyConfig', enabled: false})
    expect(cp).toContainEqual({apiVersion: 'v1alpha1', kind: 'KubePrismConfig', port: 7445})
    const inline = cp.find((d) => d.kind === 'KubeInlineManifestConfig')
    expect(inline).toEqual({apiVersion: 'v1alpha1', kind: 'KubeInlineManifestConfig', name: 'cilium', manifest: SMALL_CILIUM_MANIFEST})
  })

  it('never mixes in the legacy v1alpha1 fields Talos refuses beside the documents', () => {
    for (const patch of [replaced.controlPlane, replaced.worker, withProxy.controlPlane, withProxy.worker]) {
      for (const d of docs(patch)) {
        expect(d.kind, 'a legacy v1alpha1 document in a v1.14 patch').toBeDefined()
        expect(d.cluster).toBeUndefined()
        expect(d.machine).toBeUndefined()
      }
    }
  })

  it('kube-proxy mode keeps kube-proxy: no KubeProxyConfig in either patch', () => {
    expect(kinds(withProxy.controlPlane)).toEqual(['KubeFlannelCNIConfig', 'KubePrismConfig', 'KubeInlineManifestConfig'])
    expect(kinds(withProxy.worker)).toEqual(['KubePrismConfig'])
  })

  it('workers never carry the inline manifest, the flannel delete or the kube-proxy switch', () => {
    expect(kinds(replaced.worker)).toEqual(['KubePrismConfig'])
    expect(replaced.worker).not.toContain('cilium-config')
  })

  it.each([true, false])('forwardKubeDNSToHost=%s goes into ResolverConfig.hostDNS on both roles', (forward) => {
    const p = renderTalosPatches({talosVersion: 'v1.14.1', kubeProxy: 'replaced', ciliumManifest: SMALL_CILIUM_MANIFEST, forwardKubeDNSToHost: forward})
    const expected = {
      apiVersion: 'v1alpha1',
      kind: 'ResolverConfig',
      hostDNS: forward ? {enabled: true, forwardKubeDNSToHost: true} : {forwardKubeDNSToHost: false},
    }
    expect(docs(p.controlPlane)).toContainEqual(expected)
    expect(docs(p.worker)).toContainEqual(expected)
  })

  it('without forwardKubeDNSToHost there is no ResolverConfig', () => {
    expect(replaced.controlPlane).not.toContain('ResolverConfig')
  })

  it('no worker: the control planes lose the control-plane taint gen config puts in KubeNodeConfig (a map key under $patch: delete)', () => {
    const p = renderTalosPatches({talosVersion: 'v1.14.1', kubeProxy: 'replaced', ciliumManifest: SMALL_CILIUM_MANIFEST, allowSchedulingOnControlPlanes: true})
    expect(docs(p.controlPlane)).toContainEqual({
      apiVersion: 'v1alpha1',
      kind: 'KubeNodeConfig',
      taints: {'node-role.kubernetes.io/control-plane': {$patch: 'delete'}},
    })
    expect(p.worker).not.toContain('KubeNodeConfig')
    expect(replaced.controlPlane).not.toContain('KubeNodeConfig')
  })
})

describe('renderTalosPatches below v1.14 (legacy v1alpha1 fields)', () => {
  const p = renderTalosPatches({talosVersion: 'v1.12.4', kubeProxy: 'replaced', ciliumManifest: SMALL_CILIUM_MANIFEST, forwardKubeDNSToHost: false})

  it('control plane: cni none, proxy disabled, kubePrism 7445, hostDNS, cluster.inlineManifests', () => {
    const [cp, ...rest] = docs(p.controlPlane)
    expect(rest).toEqual([])
    expect(cp!.cluster.network).toEqual({cni: {name: 'none'}})
    expect(cp!.cluster.proxy).toEqual({disabled: true})
    expect(cp!.cluster.inlineManifests).toEqual([{name: 'cilium', contents: SMALL_CILIUM_MANIFEST}])
    expect(cp!.machine.features).toEqual({kubePrism: {enabled: true, port: 7445}, hostDNS: {forwardKubeDNSToHost: false}})
  })

  it('worker: same switches, never the manifest', () => {
    const [w] = docs(p.worker)
    expect(w!.cluster).toEqual({network: {cni: {name: 'none'}}, proxy: {disabled: true}})
    expect(w!.machine.features.kubePrism).toEqual({enabled: true, port: 7445})
  })

  it('kube-proxy mode leaves cluster.proxy alone', () => {
    const kp = renderTalosPatches({talosVersion: 'v1.10.0', kubeProxy: 'kube-proxy', ciliumManifest: SMALL_CILIUM_MANIFEST})
    expect(docs(kp.controlPlane)[0]!.cluster.proxy).toBeUndefined()
    expect(docs(kp.worker)[0]!.cluster.proxy).toBeUndefined()
  })

  it('no worker: cluster.allowSchedulingOnControlPlanes on control planes only', () => {
    const open = renderTalosPatches({
      talosVersion: 'v1.12.4',
      kubeProxy: 'replaced',
      ciliumManifest: SMALL_CILIUM_MANIFEST,
      allowSchedulingOnControlPlanes: true,
    })
    expect(docs(open.controlPlane)[0]!.cluster.allowSchedulingOnControlPlanes).toBe(true)
    expect(docs(open.worker)[0]!.cluster.allowSchedulingOnControlPlanes).toBeUndefined()
    expect(docs(p.controlPlane)[0]!.cluster.allowSchedulingOnControlPlanes).toBeUndefined()
  })

  it('a custom inline manifest name is used as given', () => {
    const named = renderTalosPatches({
      talosVersion: 'v1.13.0',
      kubeProxy: 'replaced',
      ciliumManifest: SMALL_CILIUM_MANIFEST,
      inlineManifestName: 'cilium-bootstrap',
    })
    expect(docs(named.controlPlane)[0]!.cluster.inlineManifests[0].name).toBe('cilium-bootstrap')
  })
})

describe('renderTalosPatches for a node joining a running cluster (no manifest: Helm owns Cilium)', () => {
  it('v1.14: the same switches as init, no KubeInlineManifestConfig', () => {
    const join = docs(renderTalosPatches({talosVersion: 'v1.14.1', kubeProxy: 'replaced', ciliumManifest: null}).controlPlane)
    const init = docs(renderTalosPatches({talosVersion: 'v1.14.1', kubeProxy: 'replaced', ciliumManifest: SMALL_CILIUM_MANIFEST}).controlPlane)
    expect(join).toEqual(init.filter((d) => d.kind !== 'KubeInlineManifestConfig'))
    expect(init.some((d) => d.kind === 'KubeInlineManifestConfig')).toBe(true)
  })

  it('below v1.14: cni none and proxy disabled, no cluster.inlineManifests', () => {
    const [cp] = docs(
      renderTalosPatches({talosVersion: 'v1.13.9', kubeProxy: 'replaced', ciliumManifest: null, allowSchedulingOnControlPlanes: true}).controlPlane,
    )
    expect(cp!.cluster).toEqual({allowSchedulingOnControlPlanes: true, network: {cni: {name: 'none'}}, proxy: {disabled: true}})
  })
})

describe('removeInlineManifestPatch', () => {
  it('v1.14: a document delete selector matched by kind and name', () => {
    expect(docs(removeInlineManifestPatch('v1.14.1', 'cilium'))).toEqual([
      {apiVersion: 'v1alpha1', kind: 'KubeInlineManifestConfig', name: 'cilium', $patch: 'delete'},
    ])
  })

  it('below v1.14: a list element delete with name as the first key (Talos selects by it)', () => {
    const patch = removeInlineManifestPatch('v1.13.9')
    expect(docs(patch)).toEqual([{cluster: {inlineManifests: [{name: 'cilium', $patch: 'delete'}]}}])
    expect(patch).toMatch(/- name: cilium\n\s+\$patch: delete\n/)
  })
})

describe('renderTalosPatches refuses bad input', () => {
  it.each([
    ['an unsupported Talos version', {talosVersion: 'v1.9.0'}, '--talos-version'],
    ['a malformed Talos version', {talosVersion: 'v1.14'}, '--talos-version'],
    ['an unknown kube-proxy mode', {kubeProxy: 'strict'}, '--kube-proxy'],
    ['an empty manifest', {ciliumManifest: '  \n'}, 'empty'],
    ['a name Talos refuses', {inlineManifestName: 'Cilium_CNI'}, 'DNS-1123'],
  ])('%s', (_label, override, expected) => {
    const input = {talosVersion: 'v1.14.1', kubeProxy: 'replaced', ciliumManifest: SMALL_CILIUM_MANIFEST, ...override} as Parameters<
      typeof renderTalosPatches
    >[0]
    expect(() => renderTalosPatches(input)).toThrow(IchorError)
    expect(() => renderTalosPatches(input)).toThrow(expected)
  })
})

describe('renderTalosPatches with the real Cilium 1.18.0 chart (real helm)', () => {
  it.each(['v1.14.1', 'v1.13.9'])('%s: the inline manifest reads back byte-for-byte as rendered', async (talosVersion) => {
    const manifest = addHelmOwnership(await renderRealCilium())
    const p = renderTalosPatches({talosVersion, kubeProxy: 'replaced', ciliumManifest: manifest})
    const cp = docs(p.controlPlane)
    const contents = talosVersion === 'v1.14.1' ? cp.find((d) => d.kind === 'KubeInlineManifestConfig')!.manifest : cp[0]!.cluster.inlineManifests[0].contents
    expect(contents).toBe(manifest)
    expect(p.worker).not.toContain('kind: DaemonSet')
  })
})
