import {mkdtempSync, writeFileSync, mkdirSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {describe, expect, it} from 'vitest'
import {loadUserValues} from '../../src/lib/cilium/user-values.js'
import {parseValuesText, readValuesFile} from '../../src/lib/values/input.js'
import {applySetFlags, parseSetFlag} from '../../src/lib/values/set-flags.js'
import {deepMerge} from '../../src/lib/values/merge.js'

const dir = mkdtempSync(join(tmpdir(), 'ichor-values-'))
function file(name: string, text: string): string {
  const p = join(dir, name)
  writeFileSync(p, text)
  return p
}

describe('values files', () => {
  it('reads YAML 1.2: yes/on/no stay strings, 0755 stays a number in base 10', () => {
    expect(parseValuesText('a: yes\nb: on\nc: no\nd: 0755\ne: 0o755\n', 't')).toEqual({a: 'yes', b: 'on', c: 'no', d: 755, e: 493})
  })
  it('an empty file is no values', () => {
    expect(readValuesFile(file('empty.yaml', '# nothing\n'))).toEqual({})
  })
  it('malformed YAML names the file, line and column', () => {
    expect(() => readValuesFile(file('bad.yaml', 'hubble:\n  relay: {enabled: true\n'))).toThrow(/bad\.yaml: not valid YAML at line \d+, column \d+/)
  })
  it('a list document is refused: a values file is a map', () => {
    expect(() => readValuesFile(file('list.yaml', '- a\n- b\n'))).toThrow(/the document is a list; a values file must be a map/)
  })
  it('a scalar document is refused', () => {
    expect(() => readValuesFile(file('scalar.yaml', 'hello\n'))).toThrow(/the document is a string/)
  })
  it('several documents are refused', () => {
    expect(() => readValuesFile(file('multi.yaml', 'a: 1\n---\nb: 2\n'))).toThrow(/holds 2 YAML documents/)
  })
  it('duplicate keys are refused', () => {
    expect(() => readValuesFile(file('dup.yaml', 'a: 1\na: 2\n'))).toThrow(/not valid YAML.*[Mm]ap keys must be unique/)
  })
  it('a missing file and a directory are clear errors, no stack', () => {
    expect(() => readValuesFile(join(dir, 'nope.yaml'))).toThrow(/-f .*nope\.yaml: cannot read the values file: no such file/)
    const sub = join(dir, 'sub')
    mkdirSync(sub)
    expect(() => readValuesFile(sub)).toThrow(/is a directory/)
  })
  it('files merge in order, then --set wins', () => {
    const a = file('a.yaml', 'hubble:\n  relay:\n    enabled: false\n  ui:\n    enabled: true\n')
    const b = file('b.yaml', 'hubble:\n  relay:\n    enabled: true\n')
    expect(loadUserValues([a, b], ['hubble.ui.enabled=false'])).toEqual({hubble: {relay: {enabled: true}, ui: {enabled: false}}})
  })
})

describe('--set in helm syntax', () => {
  it('types integers, booleans and null like helm; floats stay strings', () => {
    expect(applySetFlags({}, ['a=1,b=true,c=null,d=1.5,e=007,f=-3,g=x'])).toEqual({a: 1, b: true, c: null, d: '1.5', e: '007', f: -3, g: 'x'})
  })
  it('nested keys, escaped dots and lists', () => {
    expect(applySetFlags({}, ['podAnnotations.example\\.com/team=net', 'hubble.metrics.enabled={dns,drop}', 'extraArgs[1]=--b'])).toEqual({
      podAnnotations: {'example.com/team': 'net'},
      hubble: {metrics: {enabled: ['dns', 'drop']}},
      extraArgs: [null, '--b'],
    })
  })
  it('list of maps by index', () => {
    expect(applySetFlags({}, ['tolerations[0].operator=Exists'])).toEqual({tolerations: [{operator: 'Exists'}]})
  })
  it('an escaped comma stays in the value', () => {
    expect(parseSetFlag('a=x\\,y')).toEqual([{path: ['a'], value: 'x,y'}])
  })
  it.each([['novalue', /missing "=value"/], ['=x', /empty key/], ['a..b=1', /empty key segment/], ['a[x]=1', /bad list index/], ['a={x', /unclosed "\{"/]])('refuses %s', (flag, message) => {
    expect(() => parseSetFlag(flag)).toThrow(message)
  })
})

describe('merge', () => {
  it('maps merge, lists and scalars replace, null is kept for helm to drop the default', () => {
    expect(deepMerge({a: {b: 1, c: [1, 2]}, d: 1}, {a: {c: [3], e: null}, d: {x: 1}})).toEqual({a: {b: 1, c: [3], e: null}, d: {x: 1}})
  })
})
