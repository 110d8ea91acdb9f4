import {describe, expect, it} from 'vitest'
import {parseAllDocuments} from 'yaml'
import {IchorError} from '../../src/lib/errors/errors.js'
import {addHelmOwnership} from '../../src/lib/talos/ownership.js'
import {renderRealCilium} from './fixtures.js'

type Obj = {kind: string; metadata?: {name?: string; annotations?: Record<string, string>; labels?: Record<string, string>}}

function objects(manifest: string): Obj[] {
  return parseAllDocuments(manifest)
    .map((d) => d.toJS() as Obj | null)
    .filter((o): o is Obj => o !== null && o !== undefined)
}

function expectOwned(obj: Obj, release = 'cilium', namespace = 'kube-system'): void {
  expect(obj.metadata?.annotations?.['meta.helm.sh/release-name'], `${obj.kind}/${obj.metadata?.name}`).toBe(release)
  expect(obj.metadata?.annotations?.['meta.helm.sh/release-namespace'], `${obj.kind}/${obj.metadata?.name}`).toBe(namespace)
  expect(obj.metadata?.labels?.['app.kubernetes.io/managed-by'], `${obj.kind}/${obj.metadata?.name}`).toBe('Helm')
}

/** The object with the three ownership keys removed and empty or null label/annotation maps dropped. */
function withoutOwnership(obj: Obj): Obj {
  const copy = structuredClone(obj)
  const md = copy.metadata ?? {}
  delete md.annotations?.['meta.helm.sh/release-name']
  delete md.annotations?.['meta.helm.sh/release-namespace']
  delete md.labels?.['app.kubernetes.io/managed-by']
  if (!md.annotations || Object.keys(md.annotations).length === 0) delete md.annotations
  if (!md.labels || Object.keys(md.labels).length === 0) delete md.labels
  return copy
}

describe('addHelmOwnership on small manifests', () => {
  const input = [
    '---',
    '# Source: cilium/templates/sa.yaml',
    'apiVersion: v1',
    'kind: ServiceAccount',
    'metadata:',
    '  name: cilium',
    '  namespace: kube-system',
    '---',
    '---',
    '# Source: cilium/templates/cm.yaml',
    'apiVersion: v1',
    'kind: ConfigMap',
    'metadata:',
    '  name: cilium-config',
    '  annotations: {}',
    '  labels:',
    '    app.kubernetes.io/part-of: cilium',
    'data:',
    '  plain-on: on',
    '  quoted: "0755"',
    '  block: |',
    '    first',
    '    second',
    '',
  ].join('\n')

  it('Given objects with and without metadata maps, every one gets both annotations and the label', () => {
    const out = objects(addHelmOwnership(input))
    expect(out.map((o) => o.kind)).toEqual(['ServiceAccount', 'ConfigMap'])
    for (const o of out) expectOwned(o)
    expect(out[1]!.metadata!.labels!['app.kubernetes.io/part-of']).toBe('cilium')
  })

  it('drops empty documents and keeps scalar styles (plain `on` stays plain, quoted stays quoted)', () => {
    const out = addHelmOwnership(input)
    expect(out.split('\n').filter((l) => l === '---')).toHaveLength(1)
    expect(out).toContain('  plain-on: on\n')
    expect(out).toContain('  quoted: "0755"\n')
    expect(out).toContain('  block: |\n    first\n    second\n')
  })

  it('is deterministic and idempotent', () => {
    const once = addHelmOwnership(input)
    expect(addHelmOwnership(input)).toBe(once)
    expect(addHelmOwnership(once)).toBe(once)
  })

  it('uses the release and namespace given', () => {
    for (const o of objects(addHelmOwnership(input, 'argocd', 'argocd'))) expectOwned(o, 'argocd', 'argocd')
  })

  it('overwrites a foreign owner rather than leaving two', () => {
    const foreign =
      'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  annotations:\n    meta.helm.sh/release-name: other\n  labels:\n    app.kubernetes.io/managed-by: Kustomize\n'
    const [obj] = objects(addHelmOwnership(foreign))
    expectOwned(obj!)
  })

  it('marks the items of a List, not the List itself', () => {
    const list = 'apiVersion: v1\nkind: List\nitems:\n  - apiVersion: v1\n    kind: ConfigMap\n    metadata:\n      name: a\n'
    const [obj] = objects(addHelmOwnership(list)) as unknown as [{metadata?: unknown; items: Obj[]}]
    expect(obj.metadata).toBeUndefined()
    expectOwned(obj.items[0]!)
  })

  it.each([
    ['a scalar document', 'just text\n'],
    ['a map without kind', 'apiVersion: v1\nmetadata:\n  name: x\n'],
    ['metadata that is a list', 'apiVersion: v1\nkind: ConfigMap\nmetadata: [1]\n'],
    ['broken YAML', 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x\n'],
  ])('refuses %s with an IchorError', (_label, manifest) => {
    expect(() => addHelmOwnership(manifest)).toThrow(IchorError)
  })

  it('an empty manifest gives an empty string', () => {
    expect(addHelmOwnership('---\n---\n')).toBe('')
  })
})

describe('addHelmOwnership on the real Cilium 1.18.0 chart (real helm)', () => {
  it('every rendered object carries the ownership metadata and nothing else changes', async () => {
    const rendered = await renderRealCilium()
    const before = objects(rendered)
    expect(before.length).toBeGreaterThan(20)

    const marked = addHelmOwnership(rendered)
    const after = objects(marked)
    expect(after.map((o) => `${o.kind}/${o.metadata?.name}`)).toEqual(before.map((o) => `${o.kind}/${o.metadata?.name}`))
    for (const o of after) expectOwned(o)
    for (const [i, o] of after.entries()) expect(withoutOwnership(o)).toEqual(withoutOwnership(before[i]!))
    expect(addHelmOwnership(rendered)).toBe(marked)
  })
})

describe('YAML 1.1 values keep their meaning', () => {
  it('keeps an octal file mode as written (0400 is 256, not 400)', async () => {
    const {parseAllDocuments} = await import('yaml')
    const out = addHelmOwnership('apiVersion: v1\nkind: Secret\nmetadata:\n  name: x\nspec:\n  defaultMode: 0400\n  readOnly: false\n')
    expect(out).toMatch(/defaultMode: 0400/)
    expect((parseAllDocuments(out, {version: '1.1'})[0]!.toJS() as {spec: {defaultMode: number}}).spec.defaultMode).toBe(256)
  })
})
