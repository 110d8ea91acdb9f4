// Killing ichor in e2e tests: the kill-at-every-boundary pattern the day-2 tests share (the
// plan's step ids from a --json run's start event, a `killOn` predicate that SIGKILLs the CLI as
// step k starts), and a SIGKILL of ichor together with the processes it started (helm): what a
// kill of its process group does (Ctrl-C, `kill -- -PGID`, a CI timeout), without killing the
// test runner, which shares that group with the ichor it spawned.
import {execFileSync, type ChildProcess} from 'node:child_process'
import {jsonEvents, type CliRun} from './cluster.js'
function childPids(pid: number): number[] {
  try {
    return execFileSync('ps', ['-o', 'pid=', '--ppid', String(pid)], {encoding: 'utf8'})
      .split('\n')
      .map((s) => Number(s.trim()))
      .filter((n) => n > 0)
  } catch {
    return [] // ps exits 1 when there is none
  }
}

/** Every process under `pid`, deepest first. */
export function descendants(pid: number): number[] {
  return childPids(pid).flatMap((c) => [...descendants(c), c])
}

/** Stops `pid` (it cannot react to its children dying), SIGKILLs everything under it, then it. */
export function killTree(pid: number): void {
  process.kill(pid, 'SIGSTOP')
  for (const p of [...descendants(pid), pid]) {
    try {
      process.kill(p, 'SIGKILL')
    } catch {
      // already gone
    }
  }
}

/** Polls `condition` until it holds; throws naming `what` after `timeoutMs`. */
export async function waitUntil(what: string, condition: () => Promise<boolean>, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

type Event = Record<string, unknown>

/** The ids of the steps a --json run announced in its start event. */
export function taskIds(run: CliRun): string[] {
  const start = jsonEvents(run).find((e) => e.event === 'start') as {tasks?: {id: string}[]} | undefined
  if (!start?.tasks) throw new Error(`no start event in the run's output:\n${run.stderr.slice(-2000)}`)
  return start.tasks.map((t) => t.id)
}

/**
 * runIchor's `onEvent` that SIGKILLs ichor and what it started (talosctl) at the first event
 * `when` accepts: a step starting, a progress line of one (mid-drain, mid-reboot).
 */
export function killTreeWhen(when: (e: Event) => boolean): {onEvent: (e: Event, child: {pid?: number}) => void} {
  let killed = false
  return {
    onEvent: (e, child) => {
      if (killed || !when(e)) return
      killed = true
      killTree(child.pid!)
    },
  }
}

/** A step starting (`checking`), by id. */
export const stepStarts = (id: string) => (e: Event) => e.event === 'task' && e.id === id && e.status === 'checking'

/** A progress line of the step `id` that matches `re`. */
export const progressOf = (id: string, re: RegExp) => (e: Event) => e.event === 'progress' && e.id === id && re.test(String(e.message ?? ''))

/** SIGKILL as step `k` starts. */
export const killBeforeTask = (k: number) => (e: Event) => e.event === 'task' && e.index === k && e.status === 'checking'

/** The ids of the steps a run finished with `done` (ran and proved). */
export const doneTaskIds = (run: CliRun) =>
  jsonEvents(run)
    .filter((e) => e.event === 'task' && e.status === 'done')
    .map((e) => e.id as string)

type OnEvent = (event: Event, child: ChildProcess) => void

/**
 * A run paused from outside: `start` spawns the CLI with the given `onEvent`; at the first
 * `--json` event `when` matches, the CLI is SIGSTOPped (as a suspended laptop or a debugger
 * would hold it), `meanwhile` runs, and the CLI is SIGCONTed, also when `meanwhile` throws.
 */
export async function pausedWhile<T>(
  start: (onEvent: OnEvent) => Promise<CliRun>,
  when: (event: Event) => boolean,
  meanwhile: () => Promise<T>,
): Promise<{resumed: CliRun; meanwhile: T}> {
  let child: ChildProcess | undefined
  let stopped!: () => void
  const paused = new Promise<void>((r) => (stopped = r))
  const run = start((e, c) => {
    if (child || !when(e)) return
    c.kill('SIGSTOP')
    child = c
    stopped()
  })
  // A run that ends before the event would otherwise leave this waiting forever.
  await Promise.race([
    paused,
    run.then((r) => Promise.reject(new Error(`the run ended (exit ${r.code}) before the event to pause at:\n${r.stderr.slice(-2000)}`))),
  ])
  let result: T
  try {
    result = await meanwhile()
  } finally {
    child!.kill('SIGCONT')
  }
  return {resumed: await run, meanwhile: result}
}

/**
 * Work started now and awaited later (by a later test): a file that drives two harness clusters
 * lets the second one's long run (a kill loop) go on while the tests on the first one run. A
 * failure surfaces where the promise is awaited, never as an unhandled rejection before that.
 */
export function inBackground<T>(work: () => Promise<T>): Promise<T> {
  const running = work()
  running.catch(() => undefined)
  return running
}

/**
 * Starts a --json run and resolves, with the run still going, once its start event names the
 * plan's steps (so work that needs only the step ids can begin beside it).
 */
export async function runWithStepIds(start: (onEvent: OnEvent) => Promise<CliRun>): Promise<{ids: string[]; run: Promise<CliRun>}> {
  let announced!: (ids: string[]) => void
  const ids = new Promise<string[]>((r) => (announced = r))
  const run = start((e) => {
    if (e.event === 'start') announced(((e as {tasks?: {id: string}[]}).tasks ?? []).map((t) => t.id))
  })
  const stepIds = await Promise.race([
    ids,
    run.then((r) => Promise.reject(new Error(`the run ended (exit ${r.code}) before its start event:\n${r.stderr.slice(-2000)}`))),
  ])
  return {ids: stepIds, run}
}
