// One colour decision for every diff printer (src/lib/log/colour.ts): FORCE_COLOR when set, then
// NO_COLOR (no-color.org), then whether stdout is a terminal, in Node's order. `stack values diff` used its own
// test (a terminal, NO_COLOR ignored); it runs here in-process on a terminal-like stdout, its
// cluster read replaced by a fixed diff, since only the printing is under test.
import {afterEach, beforeEach, describe, expect, it, vi} from 'vitest'
import {wantsColour} from '../../src/lib/log/colour.js'
import {PROJECT_ROOT} from '../support/upstream.js'

const DIFF = '--- published (effective values)\n+++ proposed (effective values)\n@@ -1 +1 @@\n-a: 1\n+a: 2\n'

vi.mock('../../src/lib/plans/stack-values.js', () => ({
  runStackValuesDiff: async () => ({component: 'argocd', changed: true, values: DIFF, manifest: ''}),
}))

const ESC = '\u001B['

describe('wantsColour', () => {
  it.each([
    [{}, true, true],
    [{}, false, false],
    [{NO_COLOR: '1'}, true, false],
    [{NO_COLOR: ''}, true, true],
    [{FORCE_COLOR: '1'}, false, true],
    [{FORCE_COLOR: '0'}, true, false],
    [{NO_COLOR: '1', FORCE_COLOR: '1'}, false, true],
    [{FORCE_COLOR: ''}, false, true],
  ] as const)('%j on a terminal: %s → %s', (env, isTTY, colour) => {
    expect(wantsColour({isTTY}, env)).toBe(colour)
  })
})

describe('stack values diff', () => {
  let written = ''
  const tty = process.stdout.isTTY
  const env = {...process.env}
  beforeEach(() => {
    written = ''
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written += String(chunk)
      return true
    })
    // oclif's this.log goes through console.log, which vitest intercepts.
    vi.spyOn(console, 'log').mockImplementation((...args: unknown[]) => {
      written += `${args.join(' ')}\n`
    })
    process.stdout.isTTY = true
    process.env.OCLIF_COLUMNS = '120' // oclif asks a terminal its width otherwise
    delete process.env.FORCE_COLOR
    delete process.env.NO_COLOR
  })
  afterEach(() => {
    vi.restoreAllMocks()
    process.stdout.isTTY = tty
    process.env = {...env}
  })

  const run = async () => {
    const {default: StackValuesDiff} = await import('../../src/commands/stack/values/diff.js')
    await StackValuesDiff.run(['argocd', 'a=2'], PROJECT_ROOT)
    return written
  }

  it('NO_COLOR=1 on a terminal prints no ANSI escape', async () => {
    process.env.NO_COLOR = '1'
    const out = await run()
    expect(out).toContain('+a: 2')
    expect(out).not.toContain(ESC)
  })

  it('on a terminal without NO_COLOR the diff is coloured', async () => {
    expect(await run()).toContain(`${ESC}32m+a: 2`)
  })
})
