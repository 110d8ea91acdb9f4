// A plan file (src/lib/plans/*.ts) lists steps; it defines none. A step (a Task: a probe beside
// its action) lives in its concern's *tasks.ts, or in plans/steps/ when it needs several
// concerns, so the next command can take it from there instead of copying it.
import {readdirSync, readFileSync} from 'node:fs'
import {join} from 'node:path'
import {describe, expect, it} from 'vitest'
import {PROJECT_ROOT} from '../support/upstream.js'

const PLANS = join(PROJECT_ROOT, 'src/lib/plans')
const planFiles = readdirSync(PLANS).filter((f) => f.endsWith('.ts'))
/** A step's read-only half: every Task has one. */
const definesStep = (source: string) => /\basync probe\(|\bprobe: *(async )?\(/.test(source)

describe('plan files define no steps', () => {
  it('the check sees a step when a file defines one (so the next case can fail)', () => {
    expect(definesStep(readFileSync(join(PLANS, 'steps/state.ts'), 'utf8'))).toBe(true)
    expect(definesStep("const t: Task = {id: 'x', title: 'x', probe: async () => holds('x'), async run() {}}")).toBe(true)
  })

  it.each(planFiles)('%s', (file) => {
    expect(definesStep(readFileSync(join(PLANS, file), 'utf8'))).toBe(false)
  })
})
