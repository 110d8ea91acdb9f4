// The one owner of a mutating command's lifecycle, as k0sctl's phase/manager.go is (one
// manager runs the phases a command lists; the command itself is data). A plan says what it
// checks locally, what it reads, what it asks and which steps it runs; runPlan does the rest
// in the same order for every command:
//   1. this machine's input (exit 2 even when the cluster is down),
//   2. the confirmation rule (consent.ts): refused without a terminal before any connection,
//   3. the session: the named cluster must answer,
//   4. an editor when the plan has one (`values edit`: saving it is the confirmation), prepare
//      (read-only, no Lease yet), then the question on a terminal, never after a change,
//   5. the steps, the Lease first and visible (or, for a plan that makes its cluster, right after
//      the step that brings the API server up), every mutating step guarded by it,
//   6. the result; the session (Lease, tunnel, temp files) is closed on every path, and on
//      SIGINT/SIGTERM by the session's own interrupt handler.
// A command that only reads (runReadPlan) takes 1, 3 and 6 with the same Talos access.
import {confirm, consentNeeded, confirmOrAbort} from './consent.js'
import {openPrivateTempDir} from '../fs/private-files.js'
import {openSession, type Session, type SessionOptions} from '../session/session.js'
import {leaseTask} from '../session/tasks.js'
import {TalosAccess} from '../talos/access.js'
import {runTasks} from '../tasks/engine.js'
import type {OutputMode, RunResult} from '../tasks/types.js'
import type {Task} from '../tasks/types.js'
import type {PlanOptions} from './options.js'
import type {Reporter} from '../log/reporter.js'
import type {StateKey} from '../state/state-key.js'

/** What a plan is given besides its session. */
export interface PlanContext {
  session: Session
  /** A private (0700) folder removed when the run ends; only when the plan asks for one (`tempDir`). */
  tempDir: string
  /** The run's one way to the Talos nodes (see Plan.talos): the talosconfig, each node's config read once, writes. */
  talos: TalosAccess
  /** Frees a local resource (a state-folder lock) when the run ends, on every path, before the session closes. */
  onClose(release: () => void): void
}

/** How a plan reaches the Talos nodes, from its flags. */
export interface PlanTalos {
  /** --talosconfig */
  talosconfig?: string
  /** --state-dir */
  stateDir?: string
  /**
   * The sealed copy in the cluster may be opened when this machine has no talosconfig: its key
   * from --state-passphrase-file (read with this machine's input), else asked on a terminal.
   */
  sealed?: {statePassphraseFile?: string; needed?: string}
  /** The exit code of the "not set up by ichor init" refusal (default 1). */
  missingInstallationExit?: number
}

/**
 * L: what checkLocal parsed (files read, versions checked), handed to prepare so nothing is read twice.
 * U: what a plan with an editor returns when the buffer was left unchanged (none without one).
 */
export interface Plan<P, R, L = void, U = never> {
  /** The command as typed (`stack sync`): the Lease's holder and the refusal's subject. */
  command: string
  session?: Omit<SessionOptions, 'command'>
  /** A private temp folder for the run (talosconfigs opened from the cluster): its name prefix. */
  tempDir?: string
  /** The nodes: ctx.talos follows these flags (absent: this machine's talosconfig in init's default state folder). */
  talos?: PlanTalos
  /** This machine's input, checked before anything else (exit 2 with nothing contacted); what it parsed goes to prepare. */
  checkLocal?(): L | Promise<L>
  /**
   * An editor the operator fills in (`values edit`), in the run's session before prepare, with no
   * Lease held while it is open: what was saved replaces what checkLocal parsed; undefined (a
   * buffer left unchanged) ends the run with `unchanged()`. Saving is the confirmation: no
   * question follows it.
   */
  edit?: {open(ctx: PlanContext, local: L): Promise<L | undefined>; unchanged(): U}
  /** Reads what the plan needs before any step: read-only, no Lease held yet. */
  prepare?(ctx: PlanContext, local: L): Promise<P>
  /**
   * The question a terminal is asked, specific about what changes, and what the runner shows
   * before it (the plan, a diff; its warnings). Undefined when there is nothing to ask.
   */
  consent(prepared: P, ctx: PlanContext): Consent | undefined | Promise<Consent | undefined>
  /** After the answer, before the steps: what may prompt for a secret (a state key). */
  afterConsent?(prepared: P, ctx: PlanContext): Promise<void>
  /**
   * A plan whose cluster does not exist before some of its steps (init: no API server before
   * Talos bootstrap): the Lease step goes right after step `after`. When the cluster already
   * answers before the steps (a rerun, another machine), the Lease step's action runs before
   * the first step, so no step runs unlocked; the step then shows it held.
   */
  lease?: {after: string}
  /** The steps, in order; the runner adds the Lease step. */
  steps(prepared: P, ctx: PlanContext): Task[]
  result(run: RunResult, prepared: P, ctx: PlanContext): R | Promise<R>
}

/** A question, or a question with what is shown before it. */
export type Consent = string | {question: string; preview: string; warnings?: readonly string[]}

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
  /** Where the preview before the question goes (the command's reporter; none: not shown). */
  report?: Reporter
}

/** The runner's options from the ones every plan takes (no --yes given: none). */
export function runOptions(o: PlanOptions & {yes?: boolean; json?: boolean}): PlanRunOptions {
  return {output: o.output, dryRun: o.dryRun, yes: o.yes ?? false, json: o.json ?? false, stream: o.stream, breakLock: o.breakLock, report: o.report}
}

/** For tests: another session, terminal or answer. */
export interface PlanRunDeps {
  open?: (options: SessionOptions) => Session
  tty?: boolean
  ask?: (question: string) => Promise<boolean>
}

export async function runPlan<P, R, L = void, U = never>(plan: Plan<P, R, L, U>, o: PlanRunOptions, deps: PlanRunDeps = {}): Promise<R | U> {
  const local = (await plan.checkLocal?.()) as L
  const sealedKey = await sealedKeyFor(plan, o)
  const ask = consentNeeded({command: plan.command, yes: o.yes, dryRun: o.dryRun, json: o.json}, deps.tty) === 'ask'
  return inPlanContext<R | U>(plan, sealedKey, deps, async (ctx) => {
    const {session} = ctx
    let input = local
    if (plan.edit) {
      const saved = await plan.edit.open(ctx, local)
      if (saved === undefined) return plan.edit.unchanged()
      input = saved
    }
    const prepared = (plan.prepare ? await plan.prepare(ctx, input) : undefined) as P
    if (ask && !plan.edit) {
      const consent = await plan.consent(prepared, ctx)
      if (typeof consent === 'object') {
        o.report?.show(consent.preview)
        for (const w of consent.warnings ?? []) o.report?.warn(w)
      }
      if (consent !== undefined) await confirmOrAbort(typeof consent === 'string' ? consent : consent.question, deps.ask ?? confirm)
    }
    await plan.afterConsent?.(prepared, ctx)
    const lease = leaseTask({session, breakLock: o.breakLock})
    // The one place the Lease is taken: its step's action, early when the cluster is already there.
    if (plan.lease && !o.dryRun && (await session.clusterAnswers())) await lease.run(() => undefined)
    const steps = withLease(plan.steps(prepared, ctx), lease, plan.lease)
    const run = await runTasks(steps, {output: o.output, dryRun: o.dryRun, stream: o.stream, guard: () => session.guard()})
    return await plan.result(run, prepared, ctx)
  })
}

/**
 * A command that only reads (`talos status`): the same local check, session and Talos access as
 * a plan's, so it has no preamble of its own; no question, no Lease, no steps.
 */
export interface ReadPlan<R, L = void> {
  command: string
  session?: Omit<SessionOptions, 'command'>
  /** The nodes: ctx.talos follows these flags, as a plan's does. */
  talos?: PlanTalos
  /** A private folder for the run (ctx.tempDir), with this name prefix; removed when it ends. */
  tempDir?: string
  /** This machine's input, checked before anything else (exit 2 with nothing contacted); what it parsed goes to read. */
  checkLocal?(): L | Promise<L>
  read(ctx: PlanContext, local: L): Promise<R>
}

export async function runReadPlan<R, L = void>(plan: ReadPlan<R, L>, o: {json: boolean}, deps: Pick<PlanRunDeps, 'open'> = {}): Promise<R> {
  const local = (await plan.checkLocal?.()) as L
  const sealedKey = await sealedKeyFor(plan, {yes: false, json: o.json})
  return inPlanContext(plan, sealedKey, deps, (ctx) => plan.read(ctx, local))
}

/** The key file is this machine's input too: read now, refused (exit 2) before any connection. */
async function sealedKeyFor(plan: {talos?: PlanTalos}, o: {yes: boolean; json: boolean}): Promise<(() => Promise<StateKey>) | undefined> {
  const sealed = plan.talos?.sealed
  if (!sealed) return undefined
  // Imported only here: age (post-quantum crypto included) is for plans that may open the sealed copy.
  const {sealedKeySource} = await import('./sealed-talosconfig.js')
  return sealedKeySource({...sealed, stateDir: plan.talos?.stateDir, yes: o.yes, json: o.json})
}

/** Opens the session (the named cluster must answer) and the run's Talos access; closes them on every path. */
async function inPlanContext<T>(
  plan: {command: string; session?: Omit<SessionOptions, 'command'>; tempDir?: string; talos?: PlanTalos},
  sealedKey: (() => Promise<StateKey>) | undefined,
  deps: Pick<PlanRunDeps, 'open'>,
  body: (ctx: PlanContext) => Promise<T>,
): Promise<T> {
  const session = (deps.open ?? openSession)({...plan.session, command: plan.command})
  // An opened sealed talosconfig is written into the run's private folder, removed when the run ends.
  const temp = plan.tempDir || sealedKey ? openPrivateTempDir(plan.tempDir ?? 'ichor-talos-') : undefined
  const releases: (() => void)[] = []
  try {
    await session.clusterAnswers()
    const talos = new TalosAccess(() => session.kube(), {...plan.talos, sealedKey, privateDir: temp?.dir})
    return await body({session, tempDir: temp?.dir ?? '', talos, onClose: (release) => releases.push(release)})
  } finally {
    try {
      for (const release of releases.reverse()) release()
    } finally {
      try {
        await session.close()
      } finally {
        temp?.remove()
      }
    }
  }
}

/** The plan's steps with the Lease step first, or right after the step the plan names. */
export function withLease(steps: Task[], lease: Task, at?: {after: string}): Task[] {
  if (!at) return [lease, ...steps]
  const i = steps.findIndex((s) => s.id === at.after)
  if (i < 0) throw new Error(`the Lease goes after step "${at.after}", which the plan does not have`)
  return [...steps.slice(0, i + 1), lease, ...steps.slice(i + 1)]
}
