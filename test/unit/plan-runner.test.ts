// The plan runner (src/lib/plans/run.ts): the one lifecycle every mutating command goes
// through. A session stand-in records what the runner does with it; the steps are plain tasks.
import {Writable} from 'node:stream'
import {describe, expect, it, vi} from 'vitest'
import {reportOf} from '../../src/lib/cli/error-report.js'
import {runPlan, runReadPlan, type Plan, type PlanRunOptions} from '../../src/lib/plans/run.js'
import type {Session} from '../../src/lib/session/session.js'
import {holds, missing} from '../../src/lib/tasks/probe.js'
import type {Task} from '../../src/lib/tasks/types.js'

function fakeSession(o: {answers?: () => boolean} = {}) {
  const calls: string[] = []
  let held: {holder: string; lost: boolean} | undefined
  const session = {
    calls,
    get lease() {
      return held
    },
    async clusterAnswers() {
      calls.push('clusterAnswers')
      return o.answers ? o.answers() : true
    },
    async takeLease() {
      calls.push('takeLease')
      held = {holder: 'test', lost: false}
      return held
    },
    async guard() {
      calls.push('guard')
    },
    close: vi.fn(async () => {
      calls.push('close')
    }),
  }
  return session
}

function step(id: string, calls: string[], fail = false): Task {
  let done = false
  return {
    id,
    title: `step ${id}`,
    async probe() {
      return done ? holds('done') : missing('not yet')
    },
    async run() {
      calls.push(`run ${id}`)
      if (fail) throw new Error(`${id} broke`)
      done = true
    },
  }
}

const sink = () => new Writable({write: (_c, _e, cb) => cb()})
const opts = (o: Partial<PlanRunOptions> = {}): PlanRunOptions => ({output: 'plain', dryRun: false, yes: true, json: false, stream: sink(), ...o})

function plan(calls: string[], o: {fail?: boolean; prepareFails?: boolean} = {}): Plan<{n: number}, {ids: string[]; n: number}> {
  return {
    command: 'test plan',
    async prepare() {
      calls.push('prepare')
      if (o.prepareFails) throw new Error('prepare broke')
      return {n: 7}
    },
    consent: (p) => `change ${p.n} things?`,
    steps: () => [step('a', calls), step('b', calls, o.fail)],
    result: (run, p) => ({ids: run.tasks.map((t) => t.id), n: p.n}),
  }
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => expect.unreachable('resolved'),
    (e: unknown) => e,
  )
}

describe('runPlan', () => {
  it('given a plan that succeeds, then the Lease is the first step, every mutating step is guarded, and the session is closed', async () => {
    const s = fakeSession()
    const r = await runPlan(plan(s.calls), opts(), {open: () => s as unknown as Session, tty: false})
    expect(r).toEqual({ids: ['lease', 'a', 'b'], n: 7})
    expect(s.calls).toEqual(['clusterAnswers', 'prepare', 'takeLease', 'guard', 'run a', 'guard', 'run b', 'close'])
    expect(s.close).toHaveBeenCalledTimes(1)
  })

  it('given a step that fails, then the error reaches the caller and the session is closed', async () => {
    const s = fakeSession()
    const e = await rejection(runPlan(plan(s.calls, {fail: true}), opts(), {open: () => s as unknown as Session, tty: false}))
    expect(reportOf(e).message).toMatch(/step b.*b broke/)
    expect(s.close).toHaveBeenCalledTimes(1)
  })

  it('given prepare fails, then no step runs and the session is closed', async () => {
    const s = fakeSession()
    await rejection(runPlan(plan(s.calls, {prepareFails: true}), opts(), {open: () => s as unknown as Session, tty: false}))
    expect(s.calls).toEqual(['clusterAnswers', 'prepare', 'close'])
  })

  it('given a terminal and no --yes, then it asks the plan\'s question after prepare; "no" is "aborted: nothing was changed", exit 1, nothing run, session closed', async () => {
    const s = fakeSession()
    const asked: string[] = []
    const e = await rejection(
      runPlan(plan(s.calls), opts({yes: false}), {open: () => s as unknown as Session, tty: true, ask: async (q) => (asked.push(q), false)}),
    )
    expect(asked).toEqual(['change 7 things?'])
    expect(reportOf(e)).toMatchObject({message: 'aborted: nothing was changed', exitCode: 1})
    expect(s.calls).toEqual(['clusterAnswers', 'prepare', 'close'])
  })

  it('given a terminal and "yes", then the steps run', async () => {
    const s = fakeSession()
    const r = await runPlan(plan(s.calls), opts({yes: false}), {open: () => s as unknown as Session, tty: true, ask: async () => true})
    expect(r.ids).toEqual(['lease', 'a', 'b'])
  })

  it.each([
    ['no terminal', {yes: false}, false],
    ['--json on a terminal', {yes: false, json: true}, true],
  ] as const)('given %s and no --yes, then exit 2 naming --yes before any session is opened', async (_name, o, tty) => {
    const open = vi.fn()
    const e = await rejection(runPlan(plan([]), opts(o), {open, tty}))
    expect(reportOf(e)).toMatchObject({exitCode: 2, message: expect.stringMatching(/ichor test plan changes the cluster.*--yes/)})
    expect(open).not.toHaveBeenCalled()
  })

  it('given --dry-run, then nothing is asked and nothing refused; the steps are probed only', async () => {
    const s = fakeSession()
    const r = await runPlan(plan(s.calls), opts({yes: false, dryRun: true}), {
      open: () => s as unknown as Session,
      tty: false,
      ask: async () => expect.unreachable('asked'),
    })
    expect(r.ids).toEqual(['lease', 'a', 'b'])
    expect(s.calls).not.toContain('run a')
    expect(s.close).toHaveBeenCalledTimes(1)
  })

  // init: no API server before Talos bootstrap, so its Lease cannot be the first step (issue 20 point 1).
  describe('a plan whose cluster comes up during its steps (lease: {after})', () => {
    const makes = (calls: string[]): Plan<void, string[]> => ({
      command: 'test init',
      lease: {after: 'a'},
      consent: () => 'go?',
      steps: () => [step('a', calls), step('b', calls)],
      result: (run) => run.tasks.map((t) => `${t.id}:${t.status}`),
    })

    it('given no cluster at the start, then the Lease is the step right after the named one, taken by that step once', async () => {
      let up = false
      const s = fakeSession({answers: () => up})
      const p = makes(s.calls)
      const first = p.steps
      p.steps = (prepared, ctx) => first(prepared, ctx).map((t) => (t.id === 'a' ? {...t, run: async (pr) => (await t.run(pr), (up = true), undefined)} : t))
      const r = await runPlan(p, opts(), {open: () => s as unknown as Session, tty: false})
      expect(r).toEqual(['a:done', 'lease:done', 'b:done'])
      expect(s.calls.filter((c) => c === 'takeLease')).toHaveLength(1)
      expect(s.calls.indexOf('takeLease')).toBeGreaterThan(s.calls.indexOf('run a'))
      expect(s.calls.indexOf('takeLease')).toBeLessThan(s.calls.indexOf('run b'))
    })

    it('given the cluster answers at the start (a rerun), then the Lease is taken once before any step and its step shows it held', async () => {
      const s = fakeSession()
      const r = await runPlan(makes(s.calls), opts(), {open: () => s as unknown as Session, tty: false})
      expect(r).toEqual(['a:done', 'lease:skipped', 'b:done'])
      expect(s.calls.filter((c) => c === 'takeLease')).toHaveLength(1)
      expect(s.calls.indexOf('takeLease')).toBeLessThan(s.calls.indexOf('run a'))
      expect(s.close).toHaveBeenCalledTimes(1)
    })

    it('given --dry-run on a cluster that answers, then no Lease is taken and its step would run', async () => {
      const s = fakeSession()
      const r = await runPlan(makes(s.calls), opts({dryRun: true}), {open: () => s as unknown as Session, tty: false})
      expect(r).toEqual(['a:would-run', 'lease:would-run', 'b:would-run'])
      expect(s.calls).not.toContain('takeLease')
    })

    it('given a local resource the plan holds (a state-folder lock), then it is released on every path before the session closes', async () => {
      const s = fakeSession()
      const p: Plan<void, void> = {
        command: 'test init',
        lease: {after: 'a'},
        consent: () => 'go?',
        afterConsent: async (_, ctx) => ctx.onClose(() => s.calls.push('unlock')),
        steps: () => [step('a', s.calls, true)],
        result: () => undefined,
      }
      await rejection(runPlan(p, opts(), {open: () => s as unknown as Session, tty: false}))
      expect(s.calls.slice(-2)).toEqual(['unlock', 'close'])
    })
  })
})

describe('the preview before the question', () => {
  const previewed = (calls: string[]): Plan<void, string[]> => ({
    command: 'test plan',
    consent: () => ({question: 'go?', preview: 'the plan and its diff', warnings: ['an untested pair']}),
    steps: () => [step('a', calls)],
    result: (run) => run.tasks.map((t) => t.id),
  })
  const recorder = (log: string[]) => ({
    note: (l: string) => log.push(`note ${l}`),
    warn: (l: string) => log.push(`warn ${l}`),
    show: (t: string) => log.push(`show ${t}`),
  })

  it('given a terminal, then the reporter shows the preview and its warnings, then the question is asked', async () => {
    const s = fakeSession()
    const log: string[] = []
    await runPlan(previewed(s.calls), opts({yes: false, report: recorder(log)}), {
      open: () => s as unknown as Session,
      tty: true,
      ask: async (q) => (log.push(`ask ${q}`), true),
    })
    expect(log).toEqual(['show the plan and its diff', 'warn an untested pair', 'ask go?'])
  })

  it('given --yes, then nothing is asked and nothing is shown', async () => {
    const s = fakeSession()
    const log: string[] = []
    const r = await runPlan(previewed(s.calls), opts({yes: true, report: recorder(log)}), {open: () => s as unknown as Session, tty: true})
    expect(r).toEqual(['lease', 'a'])
    expect(log).toEqual([])
  })
})

describe('a plan with an editor (values edit)', () => {
  const editing = (calls: string[], saved: string | undefined): Plan<string, string, string, string> => ({
    command: 'test edit',
    checkLocal: () => 'seed',
    edit: {
      async open(_ctx, seed) {
        calls.push(`edit ${seed}`)
        return saved
      },
      unchanged: () => 'unchanged',
    },
    async prepare(_ctx, input) {
      calls.push(`prepare ${input}`)
      return input
    },
    consent: () => 'apply?',
    steps: () => [step('a', calls)],
    result: (_run, p) => p,
  })

  it('given a saved buffer, then the editor opens in the same session before prepare, prepare gets what was saved, and nothing is asked after it', async () => {
    const s = fakeSession()
    const opened = vi.fn(() => s as unknown as Session)
    const r = await runPlan(editing(s.calls, 'saved'), opts({yes: false}), {open: opened, tty: true, ask: async () => expect.unreachable('asked')})
    expect(r).toBe('saved')
    expect(opened).toHaveBeenCalledTimes(1)
    expect(s.calls).toEqual(['clusterAnswers', 'edit seed', 'prepare saved', 'takeLease', 'guard', 'run a', 'close'])
  })

  it('given a buffer left unchanged, then nothing is prepared, taken or run, and the plan says so', async () => {
    const s = fakeSession()
    const r = await runPlan(editing(s.calls, undefined), opts({yes: false}), {open: () => s as unknown as Session, tty: true})
    expect(r).toBe('unchanged')
    expect(s.calls).toEqual(['clusterAnswers', 'edit seed', 'close'])
  })

  it('given no terminal and no --yes, then exit 2 before the session opens: the editor never opens', async () => {
    const open = vi.fn()
    const e = await rejection(runPlan(editing([], 'saved'), opts({yes: false}), {open, tty: false}))
    expect(reportOf(e)).toMatchObject({exitCode: 2})
    expect(open).not.toHaveBeenCalled()
  })
})

describe('runReadPlan', () => {
  it('given a read plan, then it reads on the session without a question, a Lease or a guard, even with no terminal and no --yes; the session is closed', async () => {
    const s = fakeSession()
    const r = await runReadPlan(
      {
        command: 'test read',
        read: async ({session, talos}) => (s.calls.push('read'), {same: session === (s as unknown as Session), talos: typeof talos.installation}),
      },
      {json: true},
      {open: () => s as unknown as Session},
    )
    expect(r).toEqual({same: true, talos: 'function'})
    expect(s.calls).toEqual(['clusterAnswers', 'read', 'close'])
  })

  it("given this machine's input is bad, then it fails before any session is opened", async () => {
    const s = fakeSession()
    const e = await rejection(
      runReadPlan(
        {
          command: 'test read',
          checkLocal: () => {
            throw new Error('bad flag')
          },
          read: async () => s.calls.push('read'),
        },
        {json: false},
        {open: () => s as unknown as Session},
      ),
    )
    expect(reportOf(e).message).toBe('bad flag')
    expect(s.calls).toEqual([])
  })

  it('given the read fails, then the error reaches the caller and the session is closed', async () => {
    const s = fakeSession()
    const e = await rejection(
      runReadPlan(
        {
          command: 'test read',
          read: async () => {
            throw new Error('read broke')
          },
        },
        {json: false},
        {open: () => s as unknown as Session},
      ),
    )
    expect(reportOf(e).message).toBe('read broke')
    expect(s.close).toHaveBeenCalledTimes(1)
  })
})
