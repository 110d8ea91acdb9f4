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

describe('who opens a session', () => {
  it('only withSession, and the offline init plan listing (a session that contacts nothing)', () => {
    const src = join(PROJECT_ROOT, 'src')
    const openers = sources(src)
      .filter((f) => /\bopenSession\(/.test(readFileSync(f, 'utf8')))
      .map((f) => relative(PROJECT_ROOT, f))
      .sort()
    expect(openers).toEqual(['src/lib/plans/init.ts', 'src/lib/session/session.ts'])
  })
})
