// `npm run build:binary` on success: a short summary on stderr, the bundler's and packager's
// output in a log file beside the binary (scripts/binary-summary.mjs formats both).
import {describe, expect, it} from 'vitest'
import {binarySummary, countWarnings} from '../../scripts/binary-summary.mjs'

// What `node --experimental-sea-config` and postject print on a good build with Node 20 (abridged, one of each kind).
const CAPTURED = [
  '(node:7237) Warning: It\'s not yet fully verified whether built-in module "node:sea" works in user snapshot builder scripts.',
  'It may still work in some cases, but in other cases certain run-time states may be out-of-sync after snapshot deserialization.',
  'To request support for the module, use the Node.js issue tracker: https://github.com/nodejs/node/issues',
  '(Use `node --trace-warnings ...` to show where the warning was created)',
  '(node:7237) Warning: It\'s not yet fully verified whether built-in module "tty" works in user snapshot builder scripts.',
  '(node:7237) ExperimentalWarning: Single executable application is an experimental feature and might change at any time',
  'Wrote single executable preparation blob to /tmp/ichor-sea-x/sea-prep.blob',
  "warning: Can't find string offset for section name '.note.100'",
  'warn',
  "warning: Can't find string offset for section name '.note'",
].join('\n')

describe('build:binary summary', () => {
  it('counts each warning once: Node process warnings, postject warnings, and the bundler warnings it was given', () => {
    expect(countWarnings(CAPTURED, 0)).toBe(5) // postject's stray "warn" line is a fragment, not one more
    expect(countWarnings(CAPTURED, 2)).toBe(7)
    expect(countWarnings('Wrote single executable preparation blob to x\n', 0)).toBe(0)
  })

  it('is 2 to 4 lines: output path, size, node version, pinning, the count of warnings and where the full log is', () => {
    const lines = binarySummary({
      out: 'out/ichor',
      bytes: 111_000_000,
      node: 'v20.20.2',
      notPinned: ['argocd 10.1.1', 'kokumi 0.14.0'],
      warnings: 6,
      log: 'out/ichor.build.log',
    })
    expect(lines.length).toBeGreaterThanOrEqual(2)
    expect(lines.length).toBeLessThanOrEqual(4)
    const text = lines.join('\n')
    expect(text).toContain('out/ichor: 111.0 MB, node v20.20.2')
    expect(text).toContain('NOT all pinned: argocd 10.1.1, kokumi 0.14.0')
    expect(text).toMatch(/6 warnings .*out\/ichor\.build\.log/)
    const clean = binarySummary({out: 'out/ichor', bytes: 1e8, node: 'v22.0.0', notPinned: [], warnings: 0, log: 'out/ichor.build.log'})
    expect(clean.join('\n')).toMatch(/all artifacts pinned/)
    expect(clean.join('\n')).toMatch(/no warnings.*out\/ichor\.build\.log/)
  })
})
