// Issue 12 point 3: the hand-over's removal applied to a machine config file (the state
// folder's controlplane.yaml), in both forms Talos uses: the v1.14 KubeInlineManifestConfig
// document and `cluster.inlineManifests` below v1.14. Everything else stays as written.
import {describe, expect, it} from 'vitest'
import {parseAllDocuments} from 'yaml'
import {inlineManifestForms, withoutInlineManifest} from '../../src/lib/talos/handover.js'

const docs = (text: string) => parseAllDocuments(text).map((d) => d.toJS())

describe('withoutInlineManifest', () => {
  it('Given a v1.14 config with the cilium document and another inline manifest, Then only the cilium document goes', () => {
    const config = [
      'version: v1alpha1\nmachine:\n  type: controlplane\ncluster:\n  clusterName: lab\n',
      'apiVersion: v1alpha1\nkind: KubeInlineManifestConfig\nname: cilium\nmanifest: |\n  kind: ConfigMap\n',
      'apiVersion: v1alpha1\nkind: KubeInlineManifestConfig\nname: other\nmanifest: |\n  kind: Secret\n',
      'apiVersion: v1alpha1\nkind: KubePrismConfig\nport: 7445\n',
    ].join('---\n')
    const out = withoutInlineManifest(config)!
    expect(inlineManifestForms(out)).toEqual([])
    expect(docs(out)).toEqual([docs(config)[0], docs(config)[2], docs(config)[3]])
  })

  it('Given a legacy config with cluster.inlineManifests, Then the cilium entry goes and an emptied list is dropped', () => {
    const config =
      'version: v1alpha1\n# kept comment\ncluster:\n  clusterName: lab\n  inlineManifests:\n    - name: cilium\n      contents: |\n        kind: ConfigMap\n'
    const out = withoutInlineManifest(config)!
    expect(docs(out)).toEqual([{version: 'v1alpha1', cluster: {clusterName: 'lab'}}])
    expect(out).toContain('# kept comment')
    const two = 'version: v1alpha1\ncluster:\n  inlineManifests:\n    - name: cilium\n      contents: a\n    - name: mine\n      contents: b\n'
    expect(docs(withoutInlineManifest(two)!)).toEqual([{version: 'v1alpha1', cluster: {inlineManifests: [{name: 'mine', contents: 'b'}]}}])
  })

  it('Given a config without the entry, Then there is nothing to write', () => {
    expect(withoutInlineManifest('version: v1alpha1\ncluster:\n  clusterName: lab\n')).toBeUndefined()
  })
})
