// A rerun of init on a cluster that stores user layers keeps them; a values file that
// differs is refused, naming the day-2 command that changes them safely.
import {describe, expect, it} from 'vitest'
import {ValidationError} from '../../src/lib/errors/errors.js'
import {keepStoredLayers, keepStoredSettings} from '../../src/lib/init/stored-settings.js'
import {checkInitInputs} from '../../src/lib/init/inputs.js'
import type {InstallationSpec} from '../../src/lib/state/installation.js'
import type {Values} from '../../src/lib/values/path.js'

const stored = (cilium: Values, argocd: Values = {}): InstallationSpec => ({
  talos: {
    clusterName: 'c',
    endpoint: 'https://192.0.2.10:6443',
    talosVersion: 'v1.14.1',
    kubernetesVersion: '1.37.0',
    controlPlanes: ['192.0.2.10'],
    workers: [],
  },
  cni: {kubeProxy: 'replaced', tunnel: 'vxlan', cilium: {values: cilium}},
  stack: {promotion: 'Automatic', argocd: {values: argocd}, kokumi: {values: {}}},
})

describe('keepStoredLayers', () => {
  it('Given no cluster yet, Then the flags are the layers and a missing flag is empty', () => {
    expect(keepStoredLayers({cilium: {a: 1}}, undefined)).toEqual({cilium: {a: 1}, argocd: {}, kokumi: {}})
  })
  it('Given a stored layer and no flag, Then the stored layer is kept (the file used at init may be gone)', () => {
    expect(keepStoredLayers({}, stored({hubble: {relay: {enabled: true}}}, {server: {replicas: 2}}))).toEqual({
      cilium: {hubble: {relay: {enabled: true}}},
      argocd: {server: {replicas: 2}},
      kokumi: {},
    })
  })
  it('Given the same file again, Then it is accepted', () => {
    expect(keepStoredLayers({cilium: {a: 1}}, stored({a: 1})).cilium).toEqual({a: 1})
  })
  it("Given the same file with owned keys at ichor's values (stored without them), Then it is accepted as the same, and kept whole for validation", () => {
    const given = {a: 1, ipam: {mode: 'kubernetes'}, cgroup: {hostRoot: '/sys/fs/cgroup'}}
    expect(keepStoredLayers({cilium: given}, stored({a: 1})).cilium).toEqual(given)
    expect(keepStoredLayers({argocd: {global: {networkPolicy: {create: false}}}}, stored({}, {})).argocd).toEqual({global: {networkPolicy: {create: false}}})
  })
  it('Given a file that differs, Then exit 2 naming the flag and the command that changes it', () => {
    const error = (() => {
      try {
        keepStoredLayers({cilium: {a: 2}, argocd: {x: 1}}, stored({a: 1}, {x: 0}))
      } catch (e) {
        return e
      }
    })() as ValidationError
    expect(error).toBeInstanceOf(ValidationError)
    expect(error.exitCode).toBe(2)
    expect(error.issues.map((i) => i.path)).toEqual(['-f/--values, --set', '--argocd-values'])
    expect(error.issues[0]!.message).toMatch(/ichor cni values set -f FILE/)
    expect(error.issues[1]!.message).toMatch(/ichor stack values set argocd -f FILE/)
  })
})

// Issue 21 point 6: every init flag with a default that the cluster stores follows one rule.
describe('keepStoredSettings', () => {
  const flags = {clusterName: 'c', endpoint: 'https://192.0.2.10:6443', controlPlanes: ['192.0.2.10'], workers: []}
  const manual = (): InstallationSpec => {
    const s = stored({})
    return {...s, cni: {...s.cni, kubeProxy: 'kube-proxy', tunnel: 'geneve'}, stack: {...s.stack, promotion: 'Manual'}}
  }
  it('Given a rerun that omits every such flag, Then the stored settings are kept (not the defaults)', () => {
    const r = keepStoredSettings({flags}, checkInitInputs(flags, {requireNodes: true}), manual())
    expect(r.issues).toEqual([])
    expect(r.promotion).toBe('Manual')
    expect(checkInitInputs(r.flags, {requireNodes: true})).toMatchObject({
      kubeProxy: 'kube-proxy',
      tunnel: 'geneve',
      talosVersion: {tag: 'v1.14.1'},
      kubernetesVersion: {version: '1.37.0'},
    })
  })
  it('Given flags that differ, Then each is an issue naming the flag and what changes it', () => {
    const given = {...flags, kubeProxy: 'replaced', tunnel: 'vxlan'}
    const r = keepStoredSettings({flags: given, promotion: 'Automatic'}, checkInitInputs(given, {requireNodes: true}), manual())
    expect(r.issues.map((i) => i.path)).toEqual(['--promotion', '--kube-proxy', '--tunnel'])
    expect(r.issues[0]!.message).toMatch(/"Automatic" differs from the Manual .*ichor stack promotion set Automatic/)
    expect(r.issues[1]!.message).toMatch(/ichor cni kube-proxy replace/)
    expect(() => keepStoredLayers({}, manual(), r.issues)).toThrow(ValidationError)
  })
  it('Given the same values as stored, Then no issue', () => {
    const given = {...flags, kubeProxy: 'kube-proxy', tunnel: 'geneve', talosVersion: 'v1.14.1', kubernetesVersion: '1.37.0'}
    expect(keepStoredSettings({flags: given, promotion: 'Manual'}, checkInitInputs(given, {requireNodes: true}), manual()).issues).toEqual([])
  })
})
