import {describe, expect, it} from 'vitest'
import {hasTalosManager, managedFieldsHandedToHelm, releaseObjectRefs, unionFieldsV1, type ManagedEntry} from '../../src/lib/talos/field-manager.js'

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

describe('unionFieldsV1: field sets as structured-merge-diff serialises them', () => {
  it('given a member leaf in one set and children of the same path in the other, then the path stays a member (".") beside the children', () => {
    expect(unionFieldsV1({'f:data': {}}, {'f:data': {'f:a': {}}})).toEqual({'f:data': {'.': {}, 'f:a': {}}})
    expect(unionFieldsV1({'f:data': {'f:a': {}}}, {'f:data': {}})).toEqual({'f:data': {'.': {}, 'f:a': {}}})
  })
  it('given disjoint and shared children, list keys included, then every path of either set once', () => {
    const a = {'f:spec': {'f:containers': {'k:{"name":"agent"}': {'.': {}, 'f:env': {'k:{"name":"A"}': {'.': {}, 'f:value': {}}}}}}}
    const b = {'f:spec': {'f:containers': {'k:{"name":"agent"}': {'f:env': {'k:{"name":"B"}': {'.': {}, 'f:value': {}}}}}, 'f:replicas': {}}}
    expect(unionFieldsV1(a, b)).toEqual({
      'f:spec': {
        'f:containers': {'k:{"name":"agent"}': {'.': {}, 'f:env': {'k:{"name":"A"}': {'.': {}, 'f:value': {}}, 'k:{"name":"B"}': {'.': {}, 'f:value': {}}}}},
        'f:replicas': {},
      },
    })
    expect(unionFieldsV1(a, undefined)).toBe(a)
    expect(unionFieldsV1({}, {})).toEqual({})
  })
})

describe('managedFieldsHandedToHelm', () => {
  const talosApply: ManagedEntry = {
    manager: 'talos',
    operation: 'Apply',
    apiVersion: 'v1',
    time: 't0',
    fieldsType: 'FieldsV1',
    fieldsV1: {'f:data': {'f:a': {}, 'f:b': {}}},
  }
  const helmUpdate: ManagedEntry = {
    manager: 'helm',
    operation: 'Update',
    apiVersion: 'v1',
    time: 't1',
    fieldsType: 'FieldsV1',
    fieldsV1: {'f:metadata': {'f:labels': {'f:x': {}}}},
  }

  it('given a Helm 3 adoption (only an Update entry of helm), then the fields of talos become a new Apply entry of helm and the Update entry is kept as it is', () => {
    expect(managedFieldsHandedToHelm([talosApply, helmUpdate])).toEqual([
      helmUpdate,
      {manager: 'helm', operation: 'Apply', apiVersion: 'v1', time: 't0', fieldsType: 'FieldsV1', fieldsV1: {'f:data': {'f:a': {}, 'f:b': {}}}},
    ])
  })

  it("given a Helm 4 adoption (an Apply entry of helm) and Talos 1.12 Create entries, then helm's Apply entry holds both sets and no talos entry is left", () => {
    const helmApply: ManagedEntry = {
      manager: 'helm',
      operation: 'Apply',
      apiVersion: 'v1',
      time: 't2',
      fieldsType: 'FieldsV1',
      fieldsV1: {'f:data': {'f:a': {}}},
    }
    const talosCreate: ManagedEntry = {...talosApply, operation: 'Update', fieldsV1: {'f:data': {'f:c': {}}}}
    const other: ManagedEntry = {manager: 'kube-controller-manager', operation: 'Update', subresource: 'status', fieldsV1: {'f:status': {}}}
    expect(managedFieldsHandedToHelm([talosApply, helmApply, talosCreate, other])).toEqual([
      {...helmApply, fieldsV1: {'f:data': {'f:a': {}, 'f:b': {}, 'f:c': {}}}},
      other,
    ])
  })

  it('given no talos entry, then the list unchanged; a talos entry of a subresource is dropped, not handed over', () => {
    expect(managedFieldsHandedToHelm([helmUpdate])).toEqual([helmUpdate])
    expect(managedFieldsHandedToHelm([helmUpdate, {...talosApply, subresource: 'status'}])).toEqual([helmUpdate])
  })
})
