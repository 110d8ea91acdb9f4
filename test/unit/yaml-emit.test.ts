import {mkdtempSync, mkdirSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {execa} from 'execa'
import jsyaml from 'js-yaml'
import {afterAll, describe, expect, it} from 'vitest'
import {parse} from 'yaml'
import {toYaml} from '../../src/lib/yaml/emit.js'

// Strings a YAML 1.1 reader takes for booleans, numbers, null or timestamps, and strings
// that trip naive emitters (indicators, blanks, line breaks, characters YAML cannot hold raw).
const AMBIGUOUS = [
  'yes',
  'Yes',
  'no',
  'NO',
  'on',
  'ON',
  'off',
  'y',
  'Y',
  'n',
  'true',
  'False',
  'null',
  'Null',
  '~',
  '',
  '0644',
  '0777',
  '08',
  '1e3',
  '1E3',
  '1.5',
  '.5',
  '+1',
  '-1',
  '0x1F',
  '0o17',
  '0b1010',
  '1_000',
  '0b1_0',
  '1_000.5',
  '0x_1F',
  '0_7',
  '190:20:30',
  '1:20',
  '.inf',
  '-.Inf',
  '.NaN',
  '2001-12-14',
  '2001-12-14t21:59:43.10-05:00',
  '<<',
  '=',
]
const TRICKY = [
  ...AMBIGUOUS,
  ' ',
  'a',
  '0.14.0',
  '1Gi',
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
  'e3',
  '.',
  '1,000',
  'Yes please',
  'on: x',
]

const work = mkdtempSync(join(tmpdir(), 'ichor-yaml-'))
afterAll(() => rmSync(work, {recursive: true, force: true}))

/** The data as the real helm binary reads a values file: Go's YAML 1.1 reader, the one kubectl and Argo CD use too. */
async function readWithHelm(text: string): Promise<unknown> {
  const chart = join(work, 'echo')
  mkdirSync(join(chart, 'templates'), {recursive: true})
  writeFileSync(join(chart, 'Chart.yaml'), 'apiVersion: v2\nname: echo\nversion: 0.1.0\n')
  writeFileSync(join(chart, 'templates', 'values.yaml'), 'encoded: {{ .Values | toJson | b64enc }}\n')
  writeFileSync(join(work, 'values.yaml'), text)
  const {stdout} = await execa(process.env.ICHOR_HELM!, ['template', 'echo', chart, '--values', join(work, 'values.yaml')])
  const encoded = /^encoded: (\S+)$/m.exec(stdout)![1]!
  return JSON.parse(Buffer.from(encoded, 'base64').toString('utf8'))
}

describe('toYaml', () => {
  it('double-quotes every string a YAML 1.1 or 1.2 reader would take for a boolean, number, null or date', () => {
    for (const s of AMBIGUOUS) {
      expect(toYaml({k: s}), JSON.stringify(s)).toBe(`k: ${JSON.stringify(s)}\n`)
    }
  })

  it('leaves plain what no reader misreads', () => {
    expect(toYaml({a: '0.14.0', b: '1Gi', c: 'v1', d: 'http://x:5000/y', e: 'e3', f: 'a  b'})).toBe(
      'a: 0.14.0\nb: 1Gi\nc: v1\nd: http://x:5000/y\ne: e3\nf: a  b\n',
    )
  })

  it('gives back the same data through helm (Go YAML 1.1), js-yaml and yaml (YAML 1.2)', async () => {
    const data: Record<string, unknown> = {list: TRICKY, nested: [[1, 'a'], [], {}, [{a: [{}]}], {b: [true, false, null, 1.5, -2, 1e21]}]}
    TRICKY.forEach((s, i) => {
      data[`k${i}`] = s
      if (!/[\u0000-\u001f\u007f-\u009f\u2028\u2029\ufeff]/.test(s)) data[s === '' ? 'empty-key' : s] = i // Go cannot hold control characters in keys
    })
    const text = toYaml(data)
    expect(parse(text)).toEqual(data)
    expect(jsyaml.load(text)).toEqual(data)
    // toJson in the helm template escapes what JSON must; JSON.parse turns it back.
    expect(await readWithHelm(text)).toEqual(data)
  })

  it('sorts keys at every level, unless asked to keep their order', () => {
    const data = {b: 1, a: {d: [{z: 1, y: 2}], c: 2}}
    expect(toYaml(data)).toBe('a:\n  c: 2\n  d:\n    - "y": 2\n      z: 1\nb: 1\n')
    expect(toYaml(data, {sortKeys: false})).toBe('b: 1\na:\n  d:\n    - z: 1\n      "y": 2\n  c: 2\n')
  })

  it('never folds a long line and never writes anchors or aliases', () => {
    const long = Array.from({length: 60}, (_, i) => `word${i}`).join(' ')
    const shared = {x: 1}
    const text = toYaml({long, one: shared, two: shared})
    expect(text).toBe(`long: ${long}\none:\n  x: 1\ntwo:\n  x: 1\n`)
  })

  it('keeps multi-line strings as literal blocks, leaves out undefined values and refuses what is not JSON data', () => {
    expect(toYaml({script: 'set -e\necho hi\n', gone: undefined})).toBe('script: |\n  set -e\n  echo hi\n')
    expect(() => toYaml({f: () => 1})).toThrow(/cannot write YAML/)
  })
})
