// Issue 20: the session lifecycle is written once. A mutating command's session is the plan
// runner's (plans/run.ts), a read-only command's is withSession's (session/session.ts); no other
// file opens one, so none can forget to close it or to check that the named cluster answers.
import {readdirSync, readFileSync} from 'node:fs'
import {join, relative} from 'node:path'
import {describe, expect, it} from 'vitest'
import {PROJECT_ROOT} from '../support/upstream.js'

function sources(dir: string): string[] {
  return readdirSync(dir, {withFileTypes: true}).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  )
}

// An import or re-export statement (prettier leaves no semicolons): it names openSession without using it.
const IMPORT_OR_REEXPORT = /^\s*(?:import|export)\s+(?:type\s+)?(?:\{[^}]*\}|\*(?:\s+as\s+\w+)?|\w+(?:\s*,\s*\{[^}]*\})?)\s+from\s*['"][^'"]*['"];?/gm

/**
 * Whether a file can open a session: it uses openSession as a value (a call, direct or as
 * `(deps.open ?? openSession)(`, or handed on as `f(openSession)`), imports it under another
 * name, or constructs a Session. Its declaration, a plain import, a type and a comment do not.
 */
function opensSession(source: string): boolean {
  const code = source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:])\/\/.*$/gm, '$1')
  if (/\bopenSession\s+as\s+\w+/.test(code)) return true
  const body = code.replace(IMPORT_OR_REEXPORT, '')
  return /(?<!\bfunction\s+|\btypeof\s+)\bopenSession\b/.test(body) || /\bnew\s+Session\s*[(<]/.test(body)
}

describe('who opens a session', () => {
  it('the matcher sees every way to open one, and not a mention', () => {
    const opens = [
      'const session = openSession({command: "status"})',
      'const session = (deps.open ?? openSession)({...plan.session, command: plan.command})',
      'return withRetry(openSession, 3)',
      'const open = openSession',
      'const deps = {open: openSession}',
      'const s = sessions.openSession(options)',
      "import {openSession as open} from '../session/session.js'",
      'return new Session(options)',
    ]
    const mentions = [
      "import {openSession, type Session} from '../session/session.js'",
      "export {openSession} from './session.js'",
      'export function openSession(options: SessionOptions): Session {',
      'type Deps = {open?: typeof openSession}',
      '// openSession( is called by the runner only',
      '/** see openSession(options) */',
      'const s: Session = await session()',
    ]
    for (const line of opens) expect(opensSession(line), line).toBe(true)
    for (const line of mentions) expect(opensSession(line), line).toBe(false)
  })

  it('only the plan runner, withSession, and the offline init plan listing (a session that contacts nothing)', () => {
    const src = join(PROJECT_ROOT, 'src')
    const openers = sources(src)
      .filter((f) => opensSession(readFileSync(f, 'utf8')))
      .map((f) => relative(PROJECT_ROOT, f))
      .sort()
    expect(openers).toEqual(['src/lib/plans/init.ts', 'src/lib/plans/run.ts', 'src/lib/session/session.ts'])
  })
})
