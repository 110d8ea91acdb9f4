// What an error looks like to the operator: one message, an exit code from the EXIT table,
// the issues and a hint when there are some. Used by every command's catch and by the
// entry point for errors before a command runs (unknown command), with and without --json.
import levenshtein from 'fast-levenshtein'
import {EXIT} from '../errors/exit-codes.js'
import {isIchorError, ValidationError, type Issue} from '../errors/errors.js'

/** Version of every JSON document ichor prints on stdout (results and errors). */
export const SCHEMA_VERSION = 1

export type ExitName = keyof typeof EXIT

export interface ErrorReport {
  message: string
  exitCode: number
  /** The EXIT table's name of `exitCode` (`usage`, `lease`, ...). */
  code: ExitName | 'other'
  issues?: Issue[]
  hint?: string
  /** Set for errors that are not ichor's own (a bug or an unexpected failure); shown with --debug. */
  stack?: string
}

export interface ReportContext {
  /** The command's flags (`--dry-run`, `-o`), to suggest one for a typo. */
  knownFlags?: string[]
}

// Node's errors for a path the operator named: usage errors (exit 2) saying what is wrong with it.
const PATH_ERRORS: Record<string, string> = {
  ENOENT: 'does not exist',
  EISDIR: 'is a directory, expected a file',
  ENOTDIR: 'is not a directory (or a part of the path is a file)',
  EACCES: 'cannot be accessed (permission denied)',
  EPERM: 'cannot be accessed (operation not permitted)',
  EEXIST: 'already exists',
  ELOOP: 'has too many levels of symbolic links',
  ENAMETOOLONG: 'is too long a path',
}

export function reportOf(err: unknown, context: ReportContext = {}): ErrorReport {
  const e = (err ?? {}) as Error & {
    code?: unknown
    path?: unknown
    file?: unknown
    syscall?: unknown
    oclif?: {exit?: number}
    parse?: unknown
    flags?: string[]
  }
  if (isIchorError(err)) {
    return withCode({
      message: cleanOclifDecoration(err.message),
      exitCode: err.exitCode,
      issues: err instanceof ValidationError ? err.issues : undefined,
      hint: err.hint,
    })
  }
  // Ctrl-C at an @inquirer prompt.
  if (e.name === 'ExitPromptError' || e.name === 'AbortPromptError') {
    return withCode({message: 'aborted: nothing was changed', exitCode: EXIT.interrupted})
  }
  // A program that cannot be started (spawn ENOENT) is the machine's problem, not the input's.
  if (typeof e.code === 'string' && e.code in PATH_ERRORS && !String(e.syscall ?? '').startsWith('spawn')) {
    if (typeof e.path === 'string') return withCode({message: `${e.path}: ${PATH_ERRORS[e.code]}`, exitCode: EXIT.usage})
    // readFileSync of a directory fails on the read, which names no path.
    if (e.code === 'EISDIR') return withCode({message: 'a directory was given where a file was expected (EISDIR)', exitCode: EXIT.usage})
  }
  if (typeof e.code === 'string' && /^TAR_(BAD_ARCHIVE|ABORT|ENTRY_INVALID)$/.test(e.code)) {
    const file = typeof e.path === 'string' ? e.path : typeof e.file === 'string' ? e.file : 'the archive'
    return withCode({message: `${file}: not a gzip tarball (${cleanOclifDecoration(e.message)})`, exitCode: EXIT.usage})
  }
  if (e.oclif && e.name !== 'ExitError') {
    // oclif's own usage errors: an unknown flag or command, a missing value, a bad option.
    const report: ErrorReport = withCode({message: cleanOclifDecoration(e.message), exitCode: EXIT.usage})
    if (Array.isArray(e.flags) && e.flags.length > 0 && context.knownFlags) {
      const suggestions = e.flags.map((f) => closest(f, context.knownFlags!)).filter((s): s is string => Boolean(s))
      if (suggestions.length > 0) report.hint = `did you mean ${suggestions.join(', ')}?`
    }
    return report
  }
  return withCode({message: e.message || String(err), exitCode: EXIT.failed, stack: e.stack})
}

function withCode(report: Omit<ErrorReport, 'code'>): ErrorReport {
  const code = (Object.keys(EXIT) as ExitName[]).find((name) => EXIT[name] === report.exitCode) ?? 'other'
  const out: ErrorReport = {...report, code}
  for (const key of ['issues', 'hint', 'stack'] as const) if (out[key] === undefined) delete out[key]
  return out
}

/** oclif wraps a flag's parse error in "Parsing --x \n\t...\nSee more help with --help". */
function cleanOclifDecoration(message: string): string {
  return message.replace(/^Parsing --[\w-]+ \n\t/, '').replace(/\nSee more help with --help$/, '')
}

/** Flags of helm, kubectl and talosctl whose ichor name is another: suggested by name, not by spelling. */
const OTHER_TOOLS_FLAGS: Record<string, string> = {
  '--kube-context': '--context', // helm's name for kubectl's --context
}

/** Never offered for a typo: a suggestion to skip the question on a command that may erase disks is no help. */
const NEVER_SUGGESTED = new Set(['--yes', '-y'])

/** The known flag nearest to a typo, when it is near enough to be a typo (or the name another tool gives it). */
export function closest(typo: string, known: readonly string[]): string | undefined {
  const name = typo.replace(/=.*$/, '')
  const renamed = OTHER_TOOLS_FLAGS[name]
  if (renamed && known.includes(renamed)) return renamed
  let best: {flag: string; distance: number} | undefined
  for (const flag of known) {
    if (NEVER_SUGGESTED.has(flag)) continue
    const distance = levenshtein.get(name, flag)
    if (!best || distance < best.distance) best = {flag, distance}
  }
  const bare = name.replace(/^-+/, '')
  return best && best.distance <= Math.max(2, Math.floor(bare.length / 3)) ? best.flag : undefined
}

/** The `--json` form of an error: one object, the same exit code as without --json. */
export function errorJson(report: ErrorReport): {schemaVersion: number; error: Omit<ErrorReport, 'stack'>} {
  const {stack: _stack, ...error} = report
  if (error.issues) error.message = error.message.split('\n')[0]!
  return {schemaVersion: SCHEMA_VERSION, error}
}

/** The text form, for stderr: `Error: ...`, `Hint: ...`, the stack only when asked for. */
export function errorText(report: ErrorReport, options: {debug?: boolean; skipMessage?: boolean} = {}): string {
  const lines: string[] = []
  if (!options.skipMessage) lines.push(`Error: ${report.message}`)
  if (report.hint) lines.push(`Hint: ${report.hint}`)
  if (options.debug && report.stack) lines.push(report.stack)
  return lines.length > 0 ? `${lines.join('\n')}\n` : ''
}
