import {describe, expect, it} from 'vitest'
import {parseObjects, serializeObjects, sortObjects} from '../../src/lib/stack/objects.js'
import type {KubeObject} from '../../src/lib/kube/objects.js'

const obj = (kind: string, name: string, namespace?: string, apiVersion = 'v1'): KubeObject => ({
  apiVersion,
  kind,
  metadata: namespace ? {name, namespace} : {name},
})

describe('parseObjects', () => {
  it('skips empty documents and comment-only documents, as helm emits them', () => {
    const objects = parseObjects('---\n# Source: x/templates/empty.yaml\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n')
    expect(objects.map((o) => o.metadata.name)).toEqual(['a'])
  })

  it('refuses a document that is not a Kubernetes object, naming its position', () => {
    expect(() => parseObjects('apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n- 1\n', 'test')).toThrow(
      /test: YAML document 2 is not a Kubernetes object/,
    )
    expect(() => parseObjects('kind: ConfigMap\n', 'test')).toThrow(/no apiVersion, kind or metadata.name/)
  })
})

describe('serializeObjects', () => {
  it('orders Namespaces, CRDs, then Helm install order, then unknown kinds by name; namespace/name within a kind', () => {
    const input = [
      obj('Order', 'x', 'kokumi', 'delivery.kokumi.dev/v1alpha1'),
      obj('Deployment', 'b', 'ns', 'apps/v1'),
      obj('CiliumNetworkPolicy', 'p', 'ns', 'cilium.io/v2'),
      obj('ClusterRole', 'r', undefined, 'rbac.authorization.k8s.io/v1'),
      obj('Deployment', 'a', 'ns', 'apps/v1'),
      obj('CustomResourceDefinition', 'c', undefined, 'apiextensions.k8s.io/v1'),
      obj('ServiceAccount', 'sa', 'ns'),
      obj('Namespace', 'ns'),
      obj('Deployment', 'a', 'an', 'apps/v1'),
    ]
    expect(sortObjects(input).map((o) => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`)).toEqual([
      'Namespace//ns',
      'CustomResourceDefinition//c',
      'ServiceAccount/ns/sa',
      'ClusterRole//r',
      'Deployment/an/a',
      'Deployment/ns/a',
      'Deployment/ns/b',
      'CiliumNetworkPolicy/ns/p',
      'Order/kokumi/x',
    ])
  })

  it('gives the same bytes for any input order, and round-trips', () => {
    const input = [obj('ConfigMap', 'b', 'n'), obj('Namespace', 'n'), obj('ConfigMap', 'a', 'n')]
    const one = serializeObjects(input)
    const two = serializeObjects([...input].reverse())
    expect(two).toBe(one)
    expect(one.startsWith('---\napiVersion: v1\nkind: Namespace\n')).toBe(true)
    expect(serializeObjects(parseObjects(one))).toBe(one)
  })

  it('quotes strings a YAML 1.1 reader (kubectl, Argo CD) would take for booleans or numbers', () => {
    const cm: KubeObject = {...obj('ConfigMap', 'c', 'n'), data: {a: 'yes', b: 'on', c: 'true', d: '0777', e: 'plain', f: 'two\nlines\n'}}
    const text = serializeObjects([cm])
    expect(text).toContain('a: "yes"')
    expect(text).toContain('b: "on"')
    expect(text).toContain('c: "true"')
    expect(text).toContain('d: "0777"')
    expect(text).toContain('e: plain')
    expect(text).toContain('f: |\n')
    expect(parseObjects(text)[0]!.data).toEqual(cm.data)
  })

  it('writes keys in sorted order: objects that differ only in key order give the same bytes', () => {
    const a: KubeObject = {apiVersion: 'v1', kind: 'ConfigMap', metadata: {namespace: 'ns', name: 'c'}, data: {b: '1', a: '2'}}
    const b: KubeObject = {data: {a: '2', b: '1'}, metadata: {name: 'c', namespace: 'ns'}, kind: 'ConfigMap', apiVersion: 'v1'}
    expect(serializeObjects([a])).toBe('---\napiVersion: v1\ndata:\n  a: "2"\n  b: "1"\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: ns\n')
    expect(serializeObjects([b])).toBe(serializeObjects([a]))
  })

  it('refuses two objects with the same identity', () => {
    expect(() => serializeObjects([obj('ConfigMap', 'a', 'n'), obj('ConfigMap', 'a', 'n')])).toThrow(/ConfigMap n\/a/)
  })
})

describe('canonical YAML', () => {
  const tricky = [
    '',
    ' ',
    'a',
    'yes',
    'No',
    'ON',
    'off',
    'y',
    'n',
    '~',
    'null',
    'Null',
    'true',
    'False',
    '.inf',
    '-.inf',
    '.NaN',
    'nan',
    '0',
    '1',
    '-1',
    '+1',
    '0777',
    '0x1F',
    '0o17',
    '1e3',
    '1.5',
    '.5',
    '1_000',
    '1:20',
    '190:20:30',
    '2001-12-14',
    '2001-12-14t21:59:43.10-05:00',
    '0.14.0',
    '1Gi',
    '256Mi',
    'v1',
    '--leader-elect',
    '-',
    '- a',
    '-x',
    '--metrics-bind-address=:8443',
    'a: b',
    'a:',
    'a:b',
    'http://x:5000/y',
    'key #comment',
    '#x',
    'a#b',
    '@x',
    '`x',
    '!x',
    '&x',
    '*',
    '*x',
    '|',
    '>',
    '%x',
    '?',
    '? x',
    '[a]',
    '{a}',
    'a, b',
    '"q"',
    "'q'",
    '=',
    '<<',
    'a  b',
    'trailing ',
    ' leading',
    'tab\there',
    'ümlaut',
    'emoji 🎉',
    'line\u2028sep',
    'nel\u0085x',
    'del\u007fx',
    'bom\ufeffx',
    'nul\u0000x',
    'multi\nline',
    'multi\nline\n',
    'multi\nline\n\n',
    '\nleading newline',
    ' indented\nfirst',
    'trailing space \nx',
    'x\n\ny\n',
    'cr\r\nlf',
    '---\nx',
    'x\n---\ny\n',
    '$2y$05$MG5FZ/WlMewHp8kwaoZixeQ8NCXjhp7ZWwx1N40pQ6oc3VfL9Xu0y',
  ]

  it('reads back identically with YAML 1.2 and YAML 1.1 readers, for values that trip naive emitters', async () => {
    const {parse} = await import('yaml')
    const jsyaml = await import('js-yaml')
    const data: Record<string, unknown> = {}
    tricky.forEach((s, i) => {
      data[`k${i}`] = s
      data[s === '' ? 'empty-key' : s] = i
    })
    const cm: KubeObject = {...obj('ConfigMap', 'c', 'n'), data, list: tricky, nested: [[1, 'a'], [], {}, [{a: [{}]}], {b: [true, false, null, 1.5, -2, 1e21]}]}
    const text = serializeObjects([cm])
    expect(parse(text.slice(4))).toEqual(cm)
    expect(
      parse(text.slice(4), {
        version: '1.1',
        schema: 'yaml-1.1',
        customTags: (tags) => tags.filter((t) => !String((t as {tag?: string}).tag).includes('timestamp')),
      }),
    ).toEqual(cm)
    expect(jsyaml.load(text)).toEqual(cm)
    expect(parseObjects(text)[0]).toEqual(cm)
  })
})

describe('YAML 1.1 octal values, as helm and Kubernetes read them', () => {
  it('reads defaultMode: 0644 as 420', () => {
    const [o] = parseObjects('apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\nspec:\n  defaultMode: 0644\n  name: "0644"\n')
    expect((o as unknown as {spec: {defaultMode: number; name: string}}).spec).toEqual({defaultMode: 420, name: '0644'})
  })
})
