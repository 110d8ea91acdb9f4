// A user layer edited in $VISUAL/$EDITOR, for `cni values edit` and `stack values edit`. A
// buffer that does not parse or is refused by `check` is reopened with the problems as
// comments at the top; a buffer left unchanged means "nothing to do".
import {mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {execa} from 'execa'
import {stringify} from 'yaml'
import {IchorError, ValidationError, formatIssues} from '../errors/errors.js'
import {parseValuesText} from './input.js'
import type {Values} from './path.js'
import {EXIT} from '../errors/exit-codes.js'

export interface EditBufferOptions {
  /** Comment lines above the values (each starts with `#`). */
  header: string[]
  /** The stored layer the editor opens with (with the command line's -f/--set/KEY=VALUE applied). */
  initial: Values
  /** The initial buffer holds a change from the command line: left unchanged, it is applied, not dropped. */
  seeded?: boolean
  /** The temporary file's name (its extension picks the editor's syntax mode). */
  fileName: string
  /** Throws a ValidationError (or an exit-2 IchorError) to refuse the buffer. */
  check(user: Values): Promise<void>
}

const SEEDED_HEADER = [
  '# The -f/--set/KEY=VALUE changes given on the command line are already in this buffer:',
  '# save and quit to apply them; quit the editor with an error (vim: :cq) to change nothing.',
]

function editorCommand(): string {
  return process.env.VISUAL || process.env.EDITOR || 'vi'
}

/** Runs the editor on `file`; the variable may hold arguments (`code --wait`), so a shell splits it. */
async function runEditor(file: string): Promise<void> {
  const result = await execa('sh', ['-c', `${editorCommand()} "$1"`, 'ichor-edit', file], {stdio: 'inherit', reject: false})
  if (result.exitCode !== 0) throw new IchorError(`the editor (${editorCommand()}) exited with ${result.exitCode}; nothing was changed`)
}

function stripComments(text: string): string {
  return text
    .split('\n')
    .filter((l) => !l.startsWith('#'))
    .join('\n')
    .trim()
}

/** The accepted layer, or undefined when the buffer was left unchanged. */
export async function editValuesBuffer(o: EditBufferOptions): Promise<Values | undefined> {
  const original = Object.keys(o.initial).length ? stringify(o.initial).trimEnd() : ''
  const dir = await mkdtemp(join(tmpdir(), 'ichor-edit-'))
  const file = join(dir, o.fileName)
  try {
    let body = original
    let problems: string[] = []
    for (;;) {
      const text = [
        ...o.header,
        ...(o.seeded ? SEEDED_HEADER : []),
        ...(problems.length ? ['#', '# The values were not accepted:', ...problems.map((l) => `#   ${l}`), '#'] : []),
        body,
        '',
      ].join('\n')
      await writeFile(file, text, {mode: 0o600})
      await runEditor(file)
      const edited = stripComments(await readFile(file, 'utf8'))
      if (edited === original.trim() && !o.seeded) return undefined
      if (problems.length && edited === body.trim())
        throw new IchorError('the values were left as they were refused; nothing was changed', {exitCode: EXIT.usage, hint: problems.join('\n')})
      body = edited
      try {
        const user = parseValuesText(edited, 'the edited values')
        await o.check(user)
        return user
      } catch (error) {
        if (error instanceof ValidationError)
          problems = formatIssues(error.issues)
            .split('\n')
            .map((l) => l.trim())
        else if (error instanceof IchorError && error.exitCode === 2) problems = error.message.split('\n')
        else throw error
      }
    }
  } finally {
    await rm(dir, {recursive: true, force: true})
  }
}
