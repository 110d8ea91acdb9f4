// The shapes shared by the task engine and its renderers. A task is one idempotent
// step: a read-only probe ("does this already hold?") beside the action that makes
// it hold. The engine decides what runs; a renderer only shows it.

export type ProbeResult = {done: true; detail?: string} | {done: false; reason: string}

export interface Task {
  /** Stable machine name, used in --json events and by tests (`adopt-cilium-release`). */
  id: string
  /** What the step achieves, shown to the operator (`Adopt Cilium into a Helm release`). */
  title: string
  /**
   * `false` for steps that only read or wait (validation, waiting for readiness):
   * running them does not count as changing the cluster. Default `true`.
   */
  mutating?: boolean
  /**
   * A pure check (input validation): the probe is the whole step and its failure is
   * reported as the check's own error, not as "checking whether it is needed failed".
   */
  check?: boolean
  /** What the operator should do when this step fails; overrides the generic advice. */
  hint?: string
  /**
   * Run once as the step starts, before its probe and in a dry run too: frees or opens what
   * this process holds (the registry tunnel), never a change to the cluster. It keeps such
   * effects out of the probe, which runs twice and must only read.
   */
  enter?(): Promise<void>
  /** Read-only: must not change anything, and is run again after `run` to confirm it. */
  probe(): Promise<ProbeResult>
  run(progress: (msg: string) => void): Promise<void>
}

/**
 * Data a plan's earlier step resolves (the render, the nodes' answers) that a later step's
 * factory closes over: read when the step runs, never before, so a plan stopped at its
 * validation leaves no promise behind.
 */
export type Later<T> = () => Promise<T>

export type TaskStatus = 'skipped' | 'done' | 'would-run' | 'failed'

export interface TaskReport {
  id: string
  title: string
  status: TaskStatus
  /** skipped: the probe's detail; would-run: the probe's reason; failed: the error message. */
  detail?: string
  /** Wall time of probe + action + re-probe, in milliseconds. */
  ms: number
}

export interface RunResult {
  tasks: TaskReport[]
  /** A mutating task ran (or, in a dry run, would run). */
  changed: boolean
  dryRun: boolean
}

export type OutputMode = 'tty' | 'plain' | 'json'

/** Where the engine's events go. One instance per run; all calls are in order. */
export interface TaskRenderer {
  begin(info: {tasks: TaskInfo[]; dryRun: boolean}): void
  /** A task starts (its probe is about to run). `index` is 0-based. */
  taskStarted(task: TaskInfo, index: number): void
  /** The probe said the step is missing and its action starts now. */
  taskRunning(task: TaskInfo, index: number, reason: string): void
  progress(task: TaskInfo, index: number, message: string): void
  taskFinished(task: TaskInfo, index: number, report: TaskReport): void
  /** Always called, also after a failure; resolves once the output is flushed. */
  end(result: RunResult, error?: Error): Promise<void>
}

export interface TaskInfo {
  id: string
  title: string
  mutating: boolean
}
