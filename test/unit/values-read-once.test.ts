// The -f files and --set flags of a values change are read once, when this machine's input is
// checked (checkLocal); the plan merges what was read onto the stored layer later, so a file that
// changes or goes away meanwhile cannot give the check and the change different values.
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, describe, expect, it} from 'vitest'
import {checkCiliumValuesInput, checkStackValuesInput} from '../../src/lib/plans/local-input.js'
import {newUserLayer, readValuesInput, type ValuesInput} from '../../src/lib/values/layer.js'

const dir = mkdtempSync(join(tmpdir(), 'ichor-values-once-'))
afterAll(() => rmSync(dir, {recursive: true, force: true}))

function input(yaml: string, replace = false): ValuesInput {
  const file = join(dir, `${Math.random().toString(36).slice(2)}.yaml`)
  writeFileSync(file, yaml)
  return {kind: 'edit', files: [file], sets: [{flag: 'set', text: 'hubble.ui.enabled=true'}], replace}
}

describe('a values change read once', () => {
  it('readValuesInput gives the files then the flags, as helm does; the file is not read again', () => {
    const edit = input('hubble:\n  relay:\n    enabled: true\n  ui:\n    enabled: false\n')
    const read = readValuesInput(edit)
    expect(read).toEqual({kind: 'given', given: {hubble: {relay: {enabled: true}, ui: {enabled: true}}}, replace: false})
    if (edit.kind === 'edit') rmSync(edit.files[0]!)
    expect(newUserLayer({hubble: {relay: {enabled: false}}, ipam: {mode: 'kubernetes'}}, read)).toEqual({
      hubble: {relay: {enabled: true}, ui: {enabled: true}},
      ipam: {mode: 'kubernetes'},
    })
    expect(() => newUserLayer({}, edit)).toThrow(/values/)
  })

  it('--replace: what was read is the whole new layer', () => {
    expect(newUserLayer({ipam: {mode: 'kubernetes'}}, readValuesInput(input('a: 1\n', true)))).toEqual({a: 1, hubble: {ui: {enabled: true}}})
  })

  it('the owned-key checks return what they read, and refuse an owned key', () => {
    expect(checkCiliumValuesInput(input('a: 1\n'))).toMatchObject({kind: 'given', given: {a: 1}})
    expect(() => checkCiliumValuesInput(input('ipam:\n  mode: cluster-pool\n'))).toThrow(/invalid/)
    // An owned key at ichor's own value passes; one whose value depends on the cluster waits for it.
    expect(checkCiliumValuesInput(input('ipam:\n  mode: kubernetes\n'))).toMatchObject({given: {ipam: {mode: 'kubernetes'}}})
    expect(checkCiliumValuesInput(input('kubeProxyReplacement: true\n'))).toMatchObject({given: {kubeProxyReplacement: true}})
    expect(checkStackValuesInput('kokumi', input('b: 2\n'))).toMatchObject({kind: 'given', given: {b: 2}})
    const layer: ValuesInput = {kind: 'layer', user: {c: 3}}
    expect(checkCiliumValuesInput(layer)).toBe(layer)
  })
})
