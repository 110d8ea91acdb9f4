import {describe, expect, it} from 'vitest'
import {hasTalosManager, releaseObjectRefs} from '../../src/lib/talos/field-manager.js'

describe('releaseObjectRefs: the objects a Helm release manifest names', () => {
  it('given namespaced objects without a namespace, cluster-scoped ones and empty documents, when read, then each object once, in the release namespace unless it names its own', () => {
    const manifest = [
      '---\n# Source: cilium/templates/cilium-agent/serviceaccount.yaml\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: cilium\n',
      '---\n# Source: cilium/templates/empty.yaml\n',
      '---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: cilium\n',
      '---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: cilium-ca\n  namespace: cilium-secrets\n',
    ].join('')
    expect(releaseObjectRefs(manifest, 'kube-system')).toEqual([
      {apiVersion: 'v1', kind: 'ServiceAccount', name: 'cilium', namespace: 'kube-system'},
      // A cluster-scoped kind keeps the namespace here; resolving its URL ignores it.
      {apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', name: 'cilium', namespace: 'kube-system'},
      {apiVersion: 'v1', kind: 'Secret', name: 'cilium-ca', namespace: 'cilium-secrets'},
    ])
  })
})

describe('hasTalosManager', () => {
  it('given managedFields, then true only when one entry is the manager talos', () => {
    expect(hasTalosManager({metadata: {managedFields: [{manager: 'helm'}, {manager: 'talos'}]}})).toBe(true)
    expect(hasTalosManager({metadata: {managedFields: [{manager: 'helm'}]}})).toBe(false)
    expect(hasTalosManager(undefined)).toBe(false)
  })
})
