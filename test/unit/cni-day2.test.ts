// The offline parts of the Cilium day-2 commands: duration flags, KEY=VALUE arguments,
// how a change builds the new user layer, and the upgrade verdict of `cni status`.
import {mkdtempSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {describe, expect, it} from 'vitest'
import {newUserLayer} from '../../src/lib/cilium/change.js'
import {chartUpgrade} from '../../src/lib/cilium/status.js'
import {valuesInputFrom} from '../../src/lib/cli/values-args.js'

describe('KEY=VALUE arguments', () => {
  it('are checked in helm --set syntax before anything runs', () => {
    expect(valuesInputFrom(['a.b=1'], {})).toEqual({kind: 'edit', files: [], sets: ['a.b=1'], replace: false})
    expect(() => valuesInputFrom(['hubble.relay.enabled'], {})).toThrowError(expect.objectContaining({exitCode: 2, message: expect.stringMatching(/argument "hubble\.relay\.enabled": expected KEY=VALUE/)}))
  })
})

describe('newUserLayer', () => {
  const stored = {hubble: {relay: {enabled: true}}, operator: {replicas: 1}}
  it('merges KEY=VALUE onto the stored layer without changing it', () => {
    const next = newUserLayer(stored, {kind: 'edit', files: [], sets: ['hubble.ui.enabled=true'], replace: false})
    expect(next).toEqual({hubble: {relay: {enabled: true}, ui: {enabled: true}}, operator: {replicas: 1}})
    expect(stored).toEqual({hubble: {relay: {enabled: true}}, operator: {replicas: 1}})
  })
  it('with --replace, files then arguments are the whole layer', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'ichor-unit-')), 'v.yaml')
    writeFileSync(file, 'bandwidthManager:\n  enabled: true\n')
    expect(newUserLayer(stored, {kind: 'edit', files: [file], sets: ['operator.replicas=2'], replace: true})).toEqual({bandwidthManager: {enabled: true}, operator: {replicas: 2}})
  })
  it('with no input, is the stored layer (a reapply)', () => {
    expect(newUserLayer(stored, {kind: 'edit', files: [], sets: [], replace: false})).toEqual(stored)
  })
})

describe('chartUpgrade: one minor at a time, never down', () => {
  it('judges the installed chart against the pinned 1.18.0', () => {
    expect(chartUpgrade('1.18.0').upgrade).toBe('up-to-date')
    expect(chartUpgrade('1.17.4')).toMatchObject({upgrade: 'available', detail: 'ichor cni upgrade --to 1.18.0'})
    expect(chartUpgrade('1.16.9').upgrade).toBe('too-far')
    expect(chartUpgrade('1.19.6').upgrade).toBe('installed-is-newer')
  })
})
