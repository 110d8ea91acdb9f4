// How lib tells the operator something while a command runs: a note (progress, which artifact
// was used), a warning (accepted but unwise), or text shown before a question (a plan, a diff).
// The command creates one (IchorCommand.reporter(): stderr for notes and warnings, stdout for
// what is shown, nothing under --json) and lib prints only through it, never to the console.
export interface Reporter {
  note(line: string): void
  warn(line: string): void
  show(text: string): void
}

/** For a caller with no operator to tell (tests, a nested read). */
export const SILENT: Reporter = {note: () => undefined, warn: () => undefined, show: () => undefined}
