import {spawnSync} from 'node:child_process'
import {existsSync, mkdtempSync, writeFileSync, mkdirSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {describe, expect, it} from 'vitest'
import {loadUserValues} from '../../src/lib/cilium/user-values.js'
import {MAX_VALUES_FILE_BYTES, parseValuesText, readValuesFile} from '../../src/lib/values/input.js'
import {applySetFlags, checkSetFlag} from '../../src/lib/values/set-flags.js'
import {deepMerge} from '../../src/lib/values/merge.js'
import {setPath} from '../../src/lib/values/path.js'
import {PROJECT_ROOT, UPSTREAM} from '../support/upstream.js'

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
    expect(applySetFlags({}, ['a=x\\,y'])).toEqual({a: 'x,y'})
  })
  it.each([
    ['novalue', /key "novalue" has no value/],
    ['a..b=1', /key map "a" has no value/],
    ['a[x]=1', /error parsing index: "x" is not an integer/],
    ['a={x', /list must terminate with '\}'/],
  ])('refuses %s', (flag, message) => {
    expect(() => checkSetFlag(flag)).toThrow(message)
  })
})

describe('merge', () => {
  it('maps merge, lists and scalars replace, null is kept for helm to drop the default', () => {
    expect(deepMerge({a: {b: 1, c: [1, 2]}, d: 1}, {a: {c: [3], e: null}, d: {x: 1}})).toEqual({a: {b: 1, c: [3], e: null}, d: {x: 1}})
  })
})

describe('hostile values files (exit 2, a named error, nothing parsed that need not be)', () => {
  it('a file over the cap is refused by its size before it is parsed', () => {
    // Invalid YAML past the cap: the size is what gets reported, so nothing was parsed.
    const big = file('big.yaml', `a: [${'x'.repeat(MAX_VALUES_FILE_BYTES)}\n`)
    expect(() => readValuesFile(big, '--cilium-values')).toThrow(
      new RegExp(`--cilium-values .*big\\.yaml: the values file is ${MAX_VALUES_FILE_BYTES + 5} bytes; at most ${MAX_VALUES_FILE_BYTES} bytes \\(256 KiB\\)`),
    )
  })
  it('a device such as /dev/zero is refused without reading it', () => {
    expect(() => readValuesFile('/dev/zero', '--cilium-values')).toThrow(
      /--cilium-values \/dev\/zero: cannot read the values file: is not a regular file.*or - to read standard input/,
    )
  })
  it('the errors carry exit code 2', () => {
    try {
      readValuesFile('/dev/zero')
      expect.unreachable()
    } catch (error) {
      expect((error as {exitCode?: number}).exitCode).toBe(2)
    }
  })
  it('a duplicate key in a map of 20,000 keys is found, with its line', () => {
    const keys = Array.from({length: 20_000}, (_, i) => `k${i.toString(36)}: 1`)
    keys.push('kh: 2')
    expect(() => parseValuesText(`${keys.join('\n')}\n`, 'f.yaml')).toThrow(
      /f\.yaml: not valid YAML at line 20001, column 1: map keys must be unique; "kh" is repeated/,
    )
  })
  it('a map key that is a list is refused', () => {
    expect(() => parseValuesText('? [a, b]\n: 1\n', 'f.yaml')).toThrow(/map key must be a plain string/)
  })
  it('a billion-laughs alias bomb is a clear error naming the file', () => {
    let bomb = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    const names = 'abcdefghij'
    for (let i = 1; i < 10; i++)
      bomb += `${names[i]}: &${names[i]} [${Array(9)
        .fill(`*${names[i - 1]}`)
        .join(',')}]\n`
    expect(() => readValuesFile(file('bomb.yaml', bomb), '--cilium-values')).toThrow(/--cilium-values .*bomb\.yaml: its aliases \(\*name\) expand too much/)
  })
  it('a few aliases still work', () => {
    expect(parseValuesText('a: &r {cpu: 1}\nb: *r\n', 'f')).toEqual({a: {cpu: 1}, b: {cpu: 1}})
  })
  it.each([
    ['__proto__:\n  polluted: 1\n', '__proto__'],
    ['{"hubble": {"__proto__": {"polluted": 1}}}', 'hubble.__proto__'],
    ['constructor:\n  prototype:\n    polluted: 1\n', 'constructor'],
    ['a:\n  prototype: 1\n', 'a.prototype'],
  ])('refuses a prototype key (%j) naming its path', (text, path) => {
    expect(() => parseValuesText(text, 'f.yaml')).toThrow(
      new RegExp(`f\\.yaml: 1 problem\\n  - ${path.replace(/[_.]/g, '\\$&')}: the key "[a-z_]+" is not accepted`),
    )
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
  })
  it('refuses nesting deeper than 64 levels', () => {
    const deep = `${Array.from({length: 80}, (_, i) => `${'  '.repeat(i)}a:`).join('\n')} 1\n`
    expect(() => parseValuesText(deep, 'f.yaml')).toThrow(/f\.yaml: 1 problem\n  - a\.a\.a…: nests deeper than 64 levels/)
  })
  it('refuses integers beyond 2^53 with their path, from YAML', () => {
    expect(() => parseValuesText('operator:\n  replicas: 99999999999999999999999999\n', 'f.yaml')).toThrow(
      /f\.yaml: 1 problem\n  - operator\.replicas: 99999999999999999999999999 is an integer beyond ±9007199254740991/,
    )
    expect(() => parseValuesText('a: [1, -9007199254740993]\n', 'f.yaml')).toThrow(/a\[1\]: -9007199254740993 is an integer beyond/)
  })
  it('keeps safe integers, octal and hex as numbers and floats as floats', () => {
    expect(parseValuesText('a: 9007199254740991\nb: 0x1f\nc: 1.5\nd: 1e3\n', 'f')).toEqual({a: 9007199254740991, b: 31, c: 1.5, d: 1000})
  })
})

describe('hostile --set flags', () => {
  it.each(['__proto__.polluted=1', 'constructor.prototype.polluted=1', 'a.__proto__.polluted=1', 'a[0].__proto__=1'])('refuses %s', (flag) => {
    expect(() => applySetFlags({}, [flag])).toThrow(/--set .*: the key "(__proto__|constructor)" is not accepted/)
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
  })
  it('refuses a 20,000-segment path by its depth', () => {
    const flag = `${Array(20_000).fill('a').join('.')}=1`
    expect(() => applySetFlags({}, [flag])).toThrow(/: the key nests more than 30 levels/)
    expect(() => applySetFlags({}, [`a${'[0]'.repeat(20_000)}=1`])).toThrow(/: the key path is deeper than 64 levels/)
  })
  it('refuses integers beyond 2^53 that helm would keep as int64, with their path and the --set-string that keeps them', () => {
    expect(() => applySetFlags({}, ['operator.replicas=9223372036854775807'])).toThrow(
      /--set .*: operator\.replicas: 9223372036854775807 is an integer beyond .*pass --set-string operator\.replicas=9223372036854775807 /,
    )
    expect(() => applySetFlags({}, ['a={1,9007199254740993}'])).toThrow(/a\[1\]: 9007199254740993 is an integer beyond/)
  })
  it('keeps past int64 the text helm keeps', () => {
    expect(applySetFlags({}, ['operator.replicas=99999999999999999999999999'])).toEqual({operator: {replicas: '99999999999999999999999999'}})
  })
})

describe('merging user data', () => {
  it('refuses an own __proto__ key (as JSON.parse makes one) instead of setting the prototype', () => {
    const overlay = JSON.parse('{"hubble": {"__proto__": {"polluted": 1}}}') as Record<string, unknown>
    expect(() => deepMerge({hubble: {}}, overlay)).toThrow(/values hubble\.__proto__: the key "__proto__" is not accepted/)
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
  })
  it('setPath refuses a prototype key', () => {
    expect(() => setPath({}, ['constructor', 'prototype', 'polluted'], 1)).toThrow(/the key "constructor" is not accepted/)
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
  })
})

describe('standard input (the built CLI)', () => {
  const bin = join(PROJECT_ROOT, 'bin', 'run.js')
  it('reads "-" with the same cap', () => {
    if (!existsSync(join(PROJECT_ROOT, 'dist', 'commands', 'cni', 'values', 'validate.js'))) throw new Error('dist/ is missing: run `npm run build` first')
    const r = spawnSync(process.execPath, [bin, 'cni', 'values', 'validate', '--cilium-chart', UPSTREAM.ciliumChart, '-f', '-'], {
      input: 'a: 1\n'.repeat(60_000),
      encoding: 'utf8',
      env: {...process.env, ICHOR_MIRROR: ''},
    })
    expect(r.stderr).toMatch(/-f -: the values file is more than 262144 bytes/)
    expect(r.status).toBe(2)
  })
})
