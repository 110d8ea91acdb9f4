// A rerun of init on a cluster that stores user layers keeps them; a values file that
// differs is refused, naming the day-2 command that changes them safely.
import {describe, expect, it} from 'vitest'
import {ValidationError} from '../../src/lib/errors/errors.js'
import {keepStoredLayers} from '../../src/lib/init/init.js'
import type {InstallationSpec} from '../../src/lib/state/installation.js'
import type {Values} from '../../src/lib/values/path.js'

const stored = (cilium: Values, argocd: Values = {}): InstallationSpec => ({
  talos: {clusterName: 'c', endpoint: 'https://192.0.2.10:6443', talosVersion: 'v1.14.1', kubernetesVersion: '1.37.0', controlPlanes: ['192.0.2.10'], workers: []},
  cni: {kubeProxy: 'replaced', tunnel: 'vxlan', cilium: {values: cilium}},
  stack: {promotion: 'Automatic', argocd: {values: argocd}, kokumi: {values: {}}},
})

describe('keepStoredLayers', () => {
  it('Given no cluster yet, Then the flags are the layers and a missing flag is empty', () => {
    expect(keepStoredLayers({cilium: {a: 1}}, undefined)).toEqual({cilium: {a: 1}, argocd: {}, kokumi: {}})
  })
  it('Given a stored layer and no flag, Then the stored layer is kept (the file used at init may be gone)', () => {
    expect(keepStoredLayers({}, stored({hubble: {relay: {enabled: true}}}, {server: {replicas: 2}}))).toEqual({cilium: {hubble: {relay: {enabled: true}}}, argocd: {server: {replicas: 2}}, kokumi: {}})
  })
  it('Given the same file again, Then it is accepted', () => {
    expect(keepStoredLayers({cilium: {a: 1}}, stored({a: 1})).cilium).toEqual({a: 1})
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
    expect(error.issues.map((i) => i.path)).toEqual(['--cilium-values', '--argocd-values'])
    expect(error.issues[0]!.message).toMatch(/ichor cni values set -f FILE/)
    expect(error.issues[1]!.message).toMatch(/ichor stack values set argocd -f FILE/)
  })
})
