// User-facing errors. Commands print `message` (and each issue) without a stack trace
// and exit with `exitCode`; anything else is a bug and keeps its stack.
import {EXIT} from './exit-codes.js'

export interface Issue {
  /** Dotted path of the value, flag name (`--tunnel`) or file the issue is about. */
  path: string
  /** What is wrong and what would be accepted. */
  message: string
}

export class IchorError extends Error {
  readonly exitCode: number
  readonly hint?: string
  constructor(message: string, options: {exitCode?: number; hint?: string; cause?: unknown} = {}) {
    super(message, {cause: options.cause})
    this.name = 'IchorError'
    this.exitCode = options.exitCode ?? 1
    this.hint = options.hint
  }
}

/**
 * One or more issues, all reported together. Bad input: exit code 2, like a usage error; a
 * machine that does not answer is a failure of the run, not of its input: exit code 1 (`failed`).
 */
export class ValidationError extends IchorError {
  readonly issues: Issue[]
  constructor(subject: string, issues: Issue[], options: {exitCode?: typeof EXIT.usage | typeof EXIT.failed; hint?: string} = {}) {
    super(`${subject}: ${issues.length} problem${issues.length === 1 ? '' : 's'}\n${formatIssues(issues)}`, {
      exitCode: options.exitCode ?? EXIT.usage,
      hint: options.hint,
    })
    this.name = 'ValidationError'
    this.issues = issues
  }
}

export function formatIssues(issues: Issue[]): string {
  return issues.map((i) => `  - ${i.path}: ${i.message}`).join('\n')
}

export function isIchorError(err: unknown): err is IchorError {
  return err instanceof IchorError
}
