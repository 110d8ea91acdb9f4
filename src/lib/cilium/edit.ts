// `ichor cni values edit`: the stored user layer in $VISUAL/$EDITOR. A buffer that does
// not parse or validate is reopened with the problems as comments at the top; a buffer
// left unchanged is a no-op. The accepted layer is then applied by the values-set plan.
import {mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {execa} from 'execa'
import {stringify} from 'yaml'
import {IchorError, ValidationError, formatIssues} from '../errors/errors.js'
import type {Kube} from '../kube/client.js'
import {parseValuesText} from '../values/input.js'
import type {Values} from '../values/path.js'
import {prepareValuesChange, type ChangeSources} from './change.js'
import {readCniContext} from './context.js'

const HEADER = [
  "# The user layer of Cilium's values (ichor defaults below it, ichor-owned keys above it).",
  '# Save and quit to apply; leave it unchanged to do nothing.',
]

export interface EditOutcome {
  /** undefined: the buffer was left unchanged, nothing to apply. */
  user?: Values
  base: Values
}

function editorCommand(): string {
  return process.env.VISUAL || process.env.EDITOR || 'vi'
}

/** Runs the editor on `file`; the variable may hold arguments (`code --wait`), so a shell splits it. */
async function runEditor(file: string): Promise<void> {
  const result = await execa('sh', ['-c', `${editorCommand()} "$1"`, 'ichor-edit', file], {stdio: 'inherit', reject: false})
  if (result.exitCode !== 0) throw new IchorError(`the editor (${editorCommand()}) exited with ${result.exitCode}; nothing was changed`)
}

function stripComments(text: string): string {
  return text.split('\n').filter((l) => !l.startsWith('#')).join('\n').trim()
}

export async function editCiliumValues(kube: Kube, sources: ChangeSources): Promise<EditOutcome> {
  const base = (await readCniContext(kube)).user
  const original = Object.keys(base).length ? stringify(base).trimEnd() : ''
  const dir = await mkdtemp(join(tmpdir(), 'ichor-edit-'))
  const file = join(dir, 'cilium-values.yaml')
  try {
    let body = original
    let problems: string[] = []
    for (;;) {
      const text = [...HEADER, ...(problems.length ? ['#', '# The values were not accepted:', ...problems.map((l) => `#   ${l}`), '#'] : []), body, ''].join('\n')
      await writeFile(file, text, {mode: 0o600})
      await runEditor(file)
      const edited = stripComments(await readFile(file, 'utf8'))
      if (edited === original.trim()) return {base}
      if (problems.length && edited === body.trim()) throw new IchorError('the values were left as they were refused; nothing was changed', {exitCode: 2, hint: problems.join('\n')})
      body = edited
      try {
        const user = parseValuesText(edited, 'the edited values')
        await prepareValuesChange(kube, {kind: 'layer', user, base}, sources)
        return {user, base}
      } catch (error) {
        if (error instanceof ValidationError) problems = formatIssues(error.issues).split('\n').map((l) => l.trim())
        else if (error instanceof IchorError && error.exitCode === 2) problems = error.message.split('\n')
        else throw error
      }
    }
  } finally {
    await rm(dir, {recursive: true, force: true})
  }
}
