// The task engine's decisions: probe, skip, run, re-probe, stop at the first failure,
// and dry runs that only probe. Output is checked in tasks-output.test.ts.
import {describe, expect, it} from 'vitest'
import {IchorError} from '../../src/lib/errors/errors.js'
import {runTasks, TaskFailedError} from '../../src/lib/tasks/engine.js'
import {bindTasks, type WorldTask} from '../support/context-tasks.js'
import type {RunResult, TaskRenderer} from '../../src/lib/tasks/types.js'

/** A toy cluster: a set of facts that tasks make true. */
interface World {
  facts: Set<string>
  log: string[]
}

function world(...facts: string[]): World {
  return {facts: new Set(facts), log: []}
}

/** A task that makes `fact` true, unless told to break. */
function ensure(
  fact: string,
  opts: {mutating?: boolean; actionForgets?: boolean; actionThrows?: Error; probeThrows?: Error; hint?: string} = {},
): WorldTask<World> {
  return {
    id: `ensure-${fact}`,
    title: `Ensure ${fact}`,
    mutating: opts.mutating,
    hint: opts.hint,
    async probe(w) {
      w.log.push(`probe ${fact}`)
      if (opts.probeThrows) throw opts.probeThrows
      return w.facts.has(fact) ? {done: true, detail: `${fact} is there`} : {done: false, reason: `${fact} is missing`}
    },
    async run(w, progress) {
      w.log.push(`run ${fact}`)
      progress(`making ${fact}`)
      if (opts.actionThrows) throw opts.actionThrows
      if (!opts.actionForgets) w.facts.add(fact)
    },
  }
}

const silent: TaskRenderer = {
  begin() {},
  taskStarted() {},
  taskRunning() {},
  progress() {},
  taskFinished() {},
  async end() {},
}

const run = (tasks: WorldTask<World>[], w: World, dryRun = false) => runTasks(bindTasks(tasks, w), {output: 'plain', dryRun, renderer: silent})

async function failureOf(promise: Promise<unknown>): Promise<TaskFailedError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(error).toBeInstanceOf(TaskFailedError)
  return error as TaskFailedError
}

describe('runTasks', () => {
  it('given every step already holds, when run, then it skips them all, runs no action and reports no change', async () => {
    const w = world('a', 'b')
    const result = await run([ensure('a'), ensure('b')], w)
    expect(result.tasks.map((t) => [t.id, t.status, t.detail])).toEqual([
      ['ensure-a', 'skipped', 'a is there'],
      ['ensure-b', 'skipped', 'b is there'],
    ])
    expect(result.changed).toBe(false)
    expect(w.log).toEqual(['probe a', 'probe b'])
  })

  it('given a missing step, when run, then it runs the action, probes again and reports done', async () => {
    const w = world('a')
    const result = await run([ensure('a'), ensure('b')], w)
    expect(result.tasks.map((t) => t.status)).toEqual(['skipped', 'done'])
    expect(result.changed).toBe(true)
    expect(w.log).toEqual(['probe a', 'probe b', 'run b', 'probe b'])
    expect(w.facts.has('b')).toBe(true)
    for (const t of result.tasks) expect(t.ms).toBeGreaterThanOrEqual(0)
  })

  it('given a second run on the converged world, then nothing runs (idempotent)', async () => {
    const w = world()
    const tasks = [ensure('a'), ensure('b'), ensure('c')]
    expect((await run(tasks, w)).changed).toBe(true)
    w.log.length = 0
    const again = await run(tasks, w)
    expect(again.changed).toBe(false)
    expect(w.log.filter((l) => l.startsWith('run'))).toEqual([])
  })

  it('given an action that returns but does not make its step hold, then the re-probe fails the run and says so', async () => {
    const w = world()
    const error = await failureOf(run([ensure('a', {actionForgets: true}), ensure('b')], w))
    expect(error.message).toContain('Ensure a')
    expect(error.message).toContain('the action finished but the step still does not hold: a is missing')
    expect(error.taskId).toBe('ensure-a')
    expect(error.hint).toMatch(/run the same command again/)
    expect(w.log).toEqual(['probe a', 'run a', 'probe a'])
    expect(error.result.tasks.map((t) => t.status)).toEqual(['failed'])
  })

  it('given a failing action, then it stops at that step: later steps are neither probed nor run', async () => {
    const w = world()
    const error = await failureOf(run([ensure('a'), ensure('b', {actionThrows: new Error('apiserver said no')}), ensure('c')], w))
    expect(error).toBeInstanceOf(IchorError)
    expect(error.message).toBe('step "Ensure b" failed: apiserver said no')
    expect(w.log).toEqual(['probe a', 'run a', 'probe a', 'probe b', 'run b'])
    expect(error.result.tasks.map((t) => [t.id, t.status])).toEqual([
      ['ensure-a', 'done'],
      ['ensure-b', 'failed'],
    ])
    expect(error.result.changed).toBe(true)
  })

  it("keeps the hint and exit code of an IchorError thrown by an action, and a task's own hint wins", async () => {
    const cause = new IchorError('lease is held by bob@laptop (pid 42)', {hint: 'wait for bob, or break the lease', exitCode: 3})
    const fromCause = await failureOf(run([ensure('a', {actionThrows: cause})], world()))
    expect(fromCause.hint).toBe('wait for bob, or break the lease')
    expect(fromCause.exitCode).toBe(3)
    expect(fromCause.cause).toBe(cause)
    const own = await failureOf(run([ensure('a', {actionThrows: cause, hint: 'check the lease'})], world()))
    expect(own.hint).toBe('check the lease')
  })

  it('given a probe that throws, then the step fails before any action', async () => {
    const w = world()
    const error = await failureOf(run([ensure('a', {probeThrows: new Error('connection refused')}), ensure('b')], w))
    expect(error.message).toContain('checking whether it is needed failed: connection refused')
    expect(w.log).toEqual(['probe a'])
  })

  it('given a dry run, then only probes run, missing steps are would-run with their reason, and the list continues', async () => {
    const w = world('b')
    const result = await run([ensure('a'), ensure('b'), ensure('c')], w, true)
    expect(result.tasks.map((t) => [t.status, t.detail])).toEqual([
      ['would-run', 'a is missing'],
      ['skipped', 'b is there'],
      ['would-run', 'c is missing'],
    ])
    expect(result.dryRun).toBe(true)
    expect(result.changed).toBe(true)
    expect(w.log).toEqual(['probe a', 'probe b', 'probe c'])
    expect([...w.facts]).toEqual(['b'])
  })

  it('given a dry run where only read-only steps are missing, then it reports no change', async () => {
    const result = await run([ensure('ready', {mutating: false}), ensure('b')], world('b'), true)
    expect(result.tasks.map((t) => t.status)).toEqual(['would-run', 'skipped'])
    expect(result.changed).toBe(false)
  })

  it('given a run where only read-only steps run, then it reports no change', async () => {
    const result = await run([ensure('ready', {mutating: false})], world())
    expect(result.tasks[0]!.status).toBe('done')
    expect(result.changed).toBe(false)
  })

  it('given a dry run with a failing probe, then it probes the rest and fails at the end with all reports', async () => {
    const w = world()
    const error = await failureOf(run([ensure('a', {probeThrows: new Error('forbidden')}), ensure('b')], w, true))
    expect(w.log).toEqual(['probe a', 'probe b'])
    expect(error.taskTitle).toBe('Ensure a')
    expect(error.result.tasks.map((t) => t.status)).toEqual(['failed', 'would-run'])
  })

  it('ignores progress reported after the action finished', async () => {
    let late: ((m: string) => void) | undefined
    const seen: string[] = []
    const renderer: TaskRenderer = {...silent, progress: (_t, _i, m) => void seen.push(m)}
    const task: WorldTask<World> = {
      id: 't',
      title: 'T',
      probe: async (w) => (w.facts.has('t') ? {done: true} : {done: false, reason: 'no t'}),
      async run(w, progress) {
        progress('early')
        late = progress
        w.facts.add('t')
      },
    }
    await runTasks(bindTasks([task], world()), {output: 'plain', dryRun: false, renderer})
    late!('late')
    expect(seen).toEqual(['early'])
  })

  it('always ends the renderer, also on failure, with the error', async () => {
    const ends: Array<[RunResult, Error | undefined]> = []
    const renderer: TaskRenderer = {...silent, end: async (r, e) => void ends.push([r, e])}
    await expect(runTasks(bindTasks([ensure('a', {actionThrows: new Error('boom')})], world()), {output: 'plain', dryRun: false, renderer})).rejects.toThrow(
      /boom/,
    )
    expect(ends).toHaveLength(1)
    expect(ends[0]![1]).toBeInstanceOf(TaskFailedError)
  })

  it('refuses a task list with a repeated id', async () => {
    await expect(run([ensure('a'), ensure('a')], world())).rejects.toThrow(/used twice/)
  })

  it('given a guard, when a mutating step is about to act, then the guard runs first and a failing guard stops the run before the action', async () => {
    const w = world('a')
    const calls: string[] = []
    const lost = new IchorError('lost the lock (Lease ichor-system/ichor-lock): it is now held by bob@other pid 7 (init)', {exitCode: 3})
    const guard = async () => {
      calls.push(`guard before ${w.log.length} entries`)
      if (w.facts.has('b')) throw lost
    }
    const tasks = [ensure('a'), ensure('b'), ensure('wait', {mutating: false}), ensure('c')]
    const error = await failureOf(runTasks(bindTasks(tasks, w), {output: 'plain', dryRun: false, renderer: silent, guard}))
    // a held: no guard; b acted after a guard; the read-only wait step needs none; c refused before acting
    expect(w.log).toEqual(['probe a', 'probe b', 'run b', 'probe b', 'probe wait', 'run wait', 'probe wait', 'probe c'])
    expect(calls).toHaveLength(2)
    expect(error.taskId).toBe('ensure-c')
    expect(error.exitCode).toBe(3)
    expect(error.message).toMatch(/held by bob@other/)
    expect(w.facts.has('c')).toBe(false)
  })

  it('given a step that fails after a pause past the Lease TTL (its request timed out), when the Lease was taken meanwhile, then the lost Lease is reported (exit 3), not the timeout', async () => {
    const lost = new IchorError('lost the lock (Lease ichor-system/ichor-lock): it is now held by nobody', {exitCode: 3, hint: 'check the other command'})
    let paused = false
    const guard = async () => {
      if (paused) throw lost
    }
    const unreachable = new IchorError('cannot reach the Kubernetes API server https://127.0.0.1:6443 (context "admin"): no answer within 30 s', {exitCode: 1})
    // The wait step is read-only (no guard before it); the process is paused while it waits.
    const wait: WorldTask<World> = {
      ...ensure('ready', {mutating: false}),
      async run() {
        paused = true
        throw unreachable
      },
    }
    const error = await failureOf(runTasks(bindTasks([ensure('a'), wait, ensure('c')], world()), {output: 'plain', dryRun: false, renderer: silent, guard}))
    expect(error.taskId).toBe('ensure-ready')
    expect(error.exitCode).toBe(3)
    expect(error.reason).toMatch(/^lost the lock .*held by nobody.*no answer within 30 s/)
    expect(error.hint).toBe(lost.hint)
  })

  it('given a step that fails while the Lease still holds (or cannot be checked), then its own error is reported', async () => {
    for (const unreachable of [false, true]) {
      let acted = false
      const failing: WorldTask<World> = {
        ...ensure('b'),
        async run() {
          acted = true
          throw new IchorError('helm upgrade failed', {exitCode: 1})
        },
      }
      const guard = async () => {
        if (acted && unreachable) throw new IchorError('cannot reach the Kubernetes API server', {exitCode: 1})
      }
      const error = await failureOf(runTasks(bindTasks([failing], world()), {output: 'plain', dryRun: false, renderer: silent, guard}))
      expect(error.reason).toBe('helm upgrade failed')
      expect(error.exitCode).toBe(1)
    }
  })

  it('given a dry run, the guard is never called', async () => {
    let called = false
    await run([ensure('a')], world())
    await runTasks(bindTasks([ensure('a')], world()), {output: 'plain', dryRun: true, renderer: silent, guard: async () => void (called = true)})
    expect(called).toBe(false)
  })

  it('reports a failing check step with its own message, not as a failed probe', async () => {
    const check: WorldTask<World> = {...ensure('inputs', {probeThrows: new IchorError('--worker: 127.0.0.99 does not answer', {exitCode: 2})}), check: true}
    const error = await failureOf(run([check, ensure('b')], world()))
    expect(error.reason).toBe('--worker: 127.0.0.99 does not answer')
    expect(error.exitCode).toBe(2)
  })
})
