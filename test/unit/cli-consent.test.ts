// When a day-2 change asks before it runs (cni values set, cni kube-proxy replace|restore).
import {describe, expect, it} from 'vitest'
import {asksForConfirmation} from '../../src/lib/cli/consent.js'

describe('asksForConfirmation', () => {
  const base = {yes: false, dryRun: false, json: false}
  it('asks on a terminal for a real run without --yes', () => {
    expect(asksForConfirmation(base, true)).toBe(true)
  })
  it('never asks with --yes, --dry-run, --json or without a terminal', () => {
    expect(asksForConfirmation({...base, yes: true}, true)).toBe(false)
    expect(asksForConfirmation({...base, dryRun: true}, true)).toBe(false)
    expect(asksForConfirmation({...base, json: true}, true)).toBe(false)
    expect(asksForConfirmation(base, false)).toBe(false)
  })
})
