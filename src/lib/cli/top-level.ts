// Errors that reach the entry point (bin/run.js, and the single binary's build/sea-entry.cjs):
// a command's own catch already printed its error and exits with its code; anything else
// (an unknown command, a failing hook) is printed here with the same rules: one JSON object
// on stdout under --json, no stack trace without --debug, exit codes from the EXIT table.
import {EXIT} from '../errors/exit-codes.js'
import {IchorError} from '../errors/errors.js'
import {closest, errorJson, errorText, reportOf, type ErrorReport} from './error-report.js'

/** What an unknown command is compared with: oclif's loaded Config has these fields. */
export interface CommandCatalog {
  bin: string
  commands: ReadonlyArray<{id: string; hidden?: boolean; aliases?: readonly string[]}>
  topics: ReadonlyArray<{name: string; hidden?: boolean}>
}

// oclif's error for an id that no command has, once no command_not_found hook answered
// (@oclif/core 4.14 lib/config/config.js runCommand), and plugin-help's for `help ID`
// (@oclif/plugin-help 6.3 through @oclif/core 4.14 lib/help/index.js showHelp).
const NOT_FOUND = /^command (\S+) not found\.?$/i

export async function handleTopLevelError(err: unknown, argv: readonly string[], catalog?: () => Promise<CommandCatalog>): Promise<never> {
  const e = err as {code?: string; message?: string; oclif?: {exit?: number}}
  if (e?.code === 'EEXIT') process.exit(e.oclif?.exit ?? EXIT.failed)
  const end = argv.indexOf('--')
  const before = end === -1 ? argv : argv.slice(0, end)
  const unknown = typeof e?.message === 'string' ? NOT_FOUND.exec(e.message)?.[1] : undefined
  const report = unknown ? await unknownCommand(unknown, before[0] === 'help', catalog) : reportOf(err)
  if (before.includes('--json')) process.stdout.write(`${JSON.stringify(errorJson(report), null, 2)}\n`)
  else process.stderr.write(errorText(report, {debug: before.includes('--debug')}))
  process.exit(report.exitCode)
}

/** A flag given to a topic (entry-argv.ts flagGivenToTopic): a usage error, nothing runs. */
export function topicFlagError(found: {topic: string; flag: string}, bin = 'ichor'): IchorError {
  return new IchorError(`unknown flag ${found.flag}: ${bin} ${found.topic} is a topic, and its commands take the flags`, {
    exitCode: EXIT.usage,
    hint: `Run ${bin} ${found.topic} --help for its commands.`,
  })
}

// A mistyped command is a usage error that names the command meant and runs nothing: a
// guess is never run, also not on a terminal (plugin-not-found asks there, and Enter ran it).
async function unknownCommand(id: string, forHelp: boolean, catalog?: () => Promise<CommandCatalog>): Promise<ErrorReport> {
  let bin = 'ichor'
  let suggestion: string | undefined
  try {
    const c = await catalog?.()
    if (c) {
      bin = c.bin
      const known = [
        ...c.commands.filter((cmd) => !cmd.hidden).flatMap((cmd) => [cmd.id, ...(cmd.aliases ?? [])]),
        ...c.topics.filter((t) => !t.hidden).map((t) => t.name),
      ]
      suggestion = closest(id, known)
    }
  } catch {
    // Without the catalog there is no suggestion; the error itself still stands.
  }
  const words = (s: string) => s.split(':').join(' ')
  const help = `Run ${bin} help for a list of commands.`
  return {
    message: `${words(id)} is not a${/^[aeiou]/i.test(bin) ? 'n' : ''} ${bin} command`,
    exitCode: EXIT.usage,
    code: 'usage',
    hint: suggestion ? `did you mean ${bin} ${forHelp ? 'help ' : ''}${words(suggestion)}? ${help}` : help,
  }
}
