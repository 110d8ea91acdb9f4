// The closing summary of a test run: each file's wall time, slowest first, and the sum per project.
import {describe, expect, it} from 'vitest'
import {fileTimeLines} from '../support/summary-reporter.js'

describe('summary reporter', () => {
  it('lists the files slowest first with their project, then the seconds per project', () => {
    expect(
      fileTimeLines([
        {project: 'unit', file: 'test/unit/a.test.ts', ms: 1_400},
        {project: 'e2e', file: 'test/e2e/init-kill.test.ts', ms: 893_100},
        {project: 'e2e', file: 'test/e2e/init.test.ts', ms: 203_000},
      ]),
    ).toEqual([
      'time per test file:',
      '  893 s  e2e   test/e2e/init-kill.test.ts',
      '  203 s  e2e   test/e2e/init.test.ts',
      '    1 s  unit  test/unit/a.test.ts',
      'sum per project: e2e 1096 s, unit 1 s',
    ])
  })
})
