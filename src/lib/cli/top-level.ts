// Errors that reach the entry point (bin/run.js): a command's own catch already printed
// its error and exits with its code; anything else (an unknown command, a failing hook)
// is printed here with the same rules: one JSON object on stdout under --json, no stack
// trace without --debug, exit codes from the EXIT table.
import {EXIT} from '../errors/exit-codes.js'
import {errorJson, errorText, reportOf} from './error-report.js'

export function handleTopLevelError(err: unknown, argv: readonly string[]): never {
  const e = err as {code?: string; oclif?: {exit?: number}}
  if (e?.code === 'EEXIT') process.exit(e.oclif?.exit ?? EXIT.failed)
  const end = argv.indexOf('--')
  const before = end === -1 ? argv : argv.slice(0, end)
  const report = reportOf(err)
  // plugin-not-found ends with exit 127 (the shell's "command not found"); for ichor it is a usage error.
  if (e?.oclif?.exit === 127) {
    report.exitCode = EXIT.usage
    report.code = 'usage'
  }
  if (before.includes('--json')) process.stdout.write(`${JSON.stringify(errorJson(report), null, 2)}\n`)
  else process.stderr.write(errorText(report, {debug: before.includes('--debug')}))
  process.exit(report.exitCode)
}
