// The one confirmation rule (src/lib/plans/consent.ts) every command that changes a cluster follows.
import {describe, expect, it} from 'vitest'
import {reportOf} from '../../src/lib/cli/error-report.js'
import {confirmOrAbort, consentNeeded} from '../../src/lib/plans/consent.js'

describe('consentNeeded', () => {
  const base = {command: 'stack sync', yes: false, dryRun: false, json: false}
  it('asks on a terminal for a real run without --yes', () => {
    expect(consentNeeded(base, true)).toBe('ask')
  })
  it('never asks with --yes or --dry-run, terminal or not', () => {
    for (const tty of [true, false]) {
      expect(consentNeeded({...base, yes: true}, tty)).toBe('no')
      expect(consentNeeded({...base, dryRun: true}, tty)).toBe('no')
      expect(consentNeeded({...base, json: true, yes: true}, tty)).toBe('no')
    }
  })
  it.each([
    ['without a terminal', {}, false, /no terminal to confirm on: pass --yes/],
    ['with --json on a terminal', {json: true}, true, /with --json nothing is asked: pass --yes/],
  ] as const)('refuses a real run %s: exit 2, naming the command and --yes', (_name, o, tty, message) => {
    const error = (() => {
      try {
        consentNeeded({...base, ...o}, tty)
      } catch (e) {
        return e
      }
    })()
    expect(reportOf(error)).toMatchObject({exitCode: 2, code: 'usage', message: expect.stringMatching(/^ichor stack sync changes the cluster/)})
    expect(reportOf(error).message).toMatch(message)
  })
})

describe('confirmOrAbort', () => {
  it('"no" is "aborted: nothing was changed", exit 1; "yes" goes on', async () => {
    const error = await confirmOrAbort('go?', async () => false).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(reportOf(error)).toMatchObject({message: 'aborted: nothing was changed', exitCode: 1})
    await expect(confirmOrAbort('go?', async () => true)).resolves.toBeUndefined()
  })
})
