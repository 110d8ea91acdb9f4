// The task engine behind every mutating command (DESIGN.md, "The one rule"): probe each
// step, skip what holds, run what is missing, probe again to prove the action worked,
// and stop at the first failure with a message that says what to do. Rendering is a
// separate concern (renderers.ts); this file only decides and reports.
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import {log} from '../log/log.js'
import {createRenderer} from './renderers.js'
import type {OutputMode, RunResult, Task, TaskInfo, TaskRenderer, TaskReport} from './types.js'

export interface RunOptions {
  output: OutputMode
  /** Run only the probes and report `would-run` for what is missing; nothing is changed. */
  dryRun: boolean
  /** Where output goes (default: stdout, but stderr for json: stdout carries only the final document, README "JSON output"). */
  stream?: NodeJS.WritableStream
  /** Replaces the renderer chosen by `output` (tests, embedding). */
  renderer?: TaskRenderer
  /** Clock in milliseconds, for tests. */
  now?: () => number
  /**
   * Called before every mutating action (after its probe said it is needed): the session's
   * Lease check, so a command whose lock was broken or taken over changes nothing more.
   */
  guard?: () => Promise<void>
}

const RERUN_ADVICE = 'fix the cause above and run the same command again; the steps already done are skipped'

/** A step failed. Carries the partial result so `--json` callers can still report it. */
export class TaskFailedError extends IchorError {
  constructor(
    readonly taskId: string,
    readonly taskTitle: string,
    readonly reason: string,
    readonly result: RunResult,
    options: {hint?: string; cause?: unknown; exitCode?: number} = {},
  ) {
    super(`step "${taskTitle}" failed: ${reason}`, {hint: options.hint ?? RERUN_ADVICE, cause: options.cause, exitCode: options.exitCode})
    this.name = 'TaskFailedError'
  }
}

/** tty when the stream is a terminal, plain otherwise; json when asked for. */
export function outputModeFor(opts: {json?: boolean; stream?: NodeJS.WritableStream}): OutputMode {
  if (opts.json) return 'json'
  const stream = (opts.stream ?? process.stdout) as NodeJS.WritableStream & {isTTY?: boolean}
  return stream.isTTY ? 'tty' : 'plain'
}

export async function runTasks(tasks: readonly Task[], opts: RunOptions): Promise<RunResult> {
  assertUniqueIds(tasks)
  const now = opts.now ?? (() => performance.now())
  const renderer = opts.renderer ?? createRenderer(opts.output, opts.stream ?? (opts.output === 'json' ? process.stderr : process.stdout))
  const result: RunResult = {tasks: [], changed: false, dryRun: opts.dryRun}
  const infos: TaskInfo[] = tasks.map((t) => ({id: t.id, title: t.title, mutating: t.mutating !== false}))
  let failure: TaskFailedError | undefined

  renderer.begin({tasks: infos, dryRun: opts.dryRun})
  try {
    for (const [index, task] of tasks.entries()) {
      const info = infos[index]!
      const started = now()
      renderer.taskStarted(info, index)
      let outcome = await runOne(task, info, index, opts, renderer)
      if (outcome.status === 'failed' && !opts.dryRun) outcome = await leaseExplains(outcome, opts)
      const report: TaskReport = {id: task.id, title: task.title, status: outcome.status, ms: Math.round(now() - started)}
      if (outcome.detail !== undefined) report.detail = outcome.detail
      result.tasks.push(report)
      if ((outcome.status === 'done' || outcome.status === 'would-run') && info.mutating) result.changed = true
      renderer.taskFinished(info, index, report)
      if (outcome.status === 'failed') {
        failure ??= new TaskFailedError(task.id, task.title, outcome.detail ?? 'unknown error', result, {
          hint: task.hint ?? outcome.hint,
          cause: outcome.cause,
          exitCode: outcome.exitCode,
        })
        // A dry run keeps probing so the operator sees the whole picture at once.
        if (!opts.dryRun) break
      }
    }
  } finally {
    await renderer.end(result, failure)
  }
  if (failure) throw failure
  return result
}

interface Outcome {
  status: TaskReport['status']
  detail?: string
  hint?: string
  cause?: unknown
  exitCode?: number
}

async function runOne(task: Task, info: TaskInfo, index: number, opts: RunOptions, renderer: TaskRenderer): Promise<Outcome> {
  let probe
  try {
    await task.enter?.()
    probe = await task.probe()
  } catch (error) {
    return failed(task.check ? '' : 'checking whether it is needed failed: ', error)
  }
  log.verbose(`${task.title}: ${probe.done ? `holds${probe.detail ? ` (${probe.detail})` : ''}` : `needed: ${probe.reason}`}`)
  if (probe.done) return probe.detail === undefined ? {status: 'skipped'} : {status: 'skipped', detail: probe.detail}
  if (opts.dryRun) return {status: 'would-run', detail: probe.reason}
  if (info.mutating && opts.guard) {
    try {
      await opts.guard()
    } catch (error) {
      return failed('', error)
    }
  }

  renderer.taskRunning(info, index, probe.reason)
  let finished = false
  const progress = (msg: string): void => {
    if (!finished) renderer.progress(info, index, msg)
  }
  try {
    await task.run(progress)
  } catch (error) {
    return failed('', error)
  } finally {
    finished = true
  }

  let after
  try {
    after = await task.probe()
  } catch (error) {
    return failed('the action finished but checking its result failed: ', error)
  }
  if (!after.done) {
    return {status: 'failed', detail: `the action finished but the step still does not hold: ${after.reason}`}
  }
  return {status: 'done', detail: after.detail}
}

/**
 * A step that failed after this process was paused past the Lease's TTL (a SIGSTOP, a laptop
 * asleep) failed for a reason of its own, often a request whose timer ran out during the pause:
 * "cannot reach the API server" would send the operator after the wrong cause. When the Lease
 * is gone meanwhile, that is what is reported (exit 3), the step's own error after it.
 */
async function leaseExplains(outcome: Outcome, opts: RunOptions): Promise<Outcome> {
  if (!opts.guard || outcome.exitCode === EXIT.lease) return outcome
  try {
    await opts.guard()
    return outcome
  } catch (error) {
    if (!(error instanceof IchorError) || error.exitCode !== EXIT.lease) return outcome // cannot tell: the step's own error stands
    return {...failed('', error), detail: `${error.message} (the step then failed: ${outcome.detail ?? 'unknown error'})`}
  }
}

function failed(prefix: string, error: unknown): Outcome {
  const message = error instanceof Error ? error.message : String(error)
  const outcome: Outcome = {status: 'failed', detail: prefix + message, cause: error}
  if (error instanceof IchorError) {
    outcome.hint = error.hint
    outcome.exitCode = error.exitCode
  }
  return outcome
}

function assertUniqueIds(tasks: readonly Task[]): void {
  const seen = new Set<string>()
  for (const task of tasks) {
    if (seen.has(task.id)) throw new Error(`task id "${task.id}" is used twice`)
    seen.add(task.id)
  }
}
