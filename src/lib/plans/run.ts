// The one owner of a mutating command's lifecycle, as k0sctl's phase/manager.go is (one
// manager runs the phases a command lists; the command itself is data). A plan says what it
// checks locally, what it reads, what it asks and which steps it runs; runPlan does the rest
// in the same order for every command:
//   1. this machine's input (exit 2 even when the cluster is down),
//   2. the confirmation rule (cli/consent.ts): refused without a terminal before any connection,
//   3. the session: the named cluster must answer,
//   4. prepare (read-only, no Lease yet), then the question on a terminal, never after a change,
//   5. the steps, the Lease first and visible, every mutating step guarded by it,
//   6. the result; the session (Lease, tunnel, temp files) is closed on every path, and on
//      SIGINT/SIGTERM by the session's own interrupt handler.
import {confirm, consentNeeded, confirmOrAbort} from '../cli/consent.js'
import {openPrivateTempDir} from '../fs/private-files.js'
import {openSession, type Session, type SessionOptions} from '../session/session.js'
import {leaseTask} from '../session/tasks.js'
import {runTasks} from '../tasks/engine.js'
import type {OutputMode, RunResult} from '../tasks/types.js'
import type {Task} from '../tasks/types.js'
import type {PlanOptions} from './options.js'

/** What a plan is given besides its session. */
export interface PlanContext {
  session: Session
  /** A private (0700) folder removed when the run ends; only when the plan asks for one (`tempDir`). */
  tempDir: string
}

export interface Plan<P, R> {
  /** The command as typed (`stack sync`): the Lease's holder and the refusal's subject. */
  command: string
  session?: Omit<SessionOptions, 'command'>
  /** A private temp folder for the run (talosconfigs opened from the cluster): its name prefix. */
  tempDir?: string
  /** This machine's input, checked before anything else (exit 2 with nothing contacted). */
  checkLocal?(): void | Promise<void>
  /** Reads what the plan needs before any step: read-only, no Lease held yet. */
  prepare?(ctx: PlanContext): Promise<P>
  /**
   * The question a terminal is asked, specific about what changes. Undefined only when the
   * operator already agreed in prepare (an editor buffer saved).
   */
  consent(prepared: P, ctx: PlanContext): string | undefined | Promise<string | undefined>
  /** After the answer, before the steps: what may prompt for a secret (a state key). */
  afterConsent?(prepared: P, ctx: PlanContext): Promise<void>
  /** The steps after the Lease, in order. */
  steps(prepared: P, ctx: PlanContext): Task[]
  result(run: RunResult, prepared: P, ctx: PlanContext): R | Promise<R>
}

/** How a command runs any plan, from its flags. */
export interface PlanRunOptions {
  output: OutputMode
  dryRun: boolean
  /** -y/--yes: no question. */
  yes: boolean
  /** --json: never a prompt. */
  json: boolean
  stream?: NodeJS.WritableStream
  /** --break-lock: delete a Lease left by a command that is gone, then take it. */
  breakLock?: boolean
}

/** The runner's options from the ones every plan takes (no --yes given: none). */
export function runOptions(o: PlanOptions & {yes?: boolean; json?: boolean}): PlanRunOptions {
  return {output: o.output, dryRun: o.dryRun, yes: o.yes ?? false, json: o.json ?? false, stream: o.stream, breakLock: o.breakLock}
}

/** For tests: another session, terminal or answer. */
export interface PlanRunDeps {
  open?: (options: SessionOptions) => Session
  tty?: boolean
  ask?: (question: string) => Promise<boolean>
}

export async function runPlan<P, R>(plan: Plan<P, R>, o: PlanRunOptions, deps: PlanRunDeps = {}): Promise<R> {
  await plan.checkLocal?.()
  const ask = consentNeeded({command: plan.command, yes: o.yes, dryRun: o.dryRun, json: o.json}, deps.tty) === 'ask'
  const session = (deps.open ?? openSession)({...plan.session, command: plan.command})
  const temp = plan.tempDir ? openPrivateTempDir(plan.tempDir) : undefined
  try {
    await session.clusterAnswers()
    const ctx: PlanContext = {session, tempDir: temp?.dir ?? ''}
    const prepared = (plan.prepare ? await plan.prepare(ctx) : undefined) as P
    if (ask) {
      const question = await plan.consent(prepared, ctx)
      if (question !== undefined) await confirmOrAbort(question, deps.ask ?? confirm)
    }
    await plan.afterConsent?.(prepared, ctx)
    const steps = [leaseTask({session, breakLock: o.breakLock}), ...plan.steps(prepared, ctx)]
    const run = await runTasks(steps, {output: o.output, dryRun: o.dryRun, stream: o.stream, guard: () => session.guard()})
    return await plan.result(run, prepared, ctx)
  } finally {
    try {
      await session.close()
    } finally {
      temp?.remove()
    }
  }
}
