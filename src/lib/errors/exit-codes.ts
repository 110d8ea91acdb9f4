// The exit codes every command uses, documented in README ("Exit codes"); scripts gate on them.
export const EXIT = {
  /** Done (or nothing to do). */
  ok: 0,
  /** A step failed; the message says which and what to do. */
  failed: 1,
  /** Bad input or usage: nothing was changed. */
  usage: 2,
  /** The ichor-system Lease is held by another command, or was lost during the run. */
  lease: 3,
  /** Interrupted (SIGINT/SIGTERM, Ctrl-C at a prompt). */
  interrupted: 130,
} as const

export type ExitCode = (typeof EXIT)[keyof typeof EXIT]
