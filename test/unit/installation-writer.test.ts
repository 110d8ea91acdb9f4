// state/ is the one writer of the IchorInstallation: every other folder changes it through
// state/installation.ts (writeInstallationSpec, writeInstallationStatus, replaceStackValues),
// which carry the resourceVersion read, the CRD and the field manager. A concern that sends its
// own PATCH, PUT, POST or DELETE to the IchorInstallation's path fails here.
import {readdirSync, readFileSync, statSync} from 'node:fs'
import {join, relative} from 'node:path'
import {describe, expect, it} from 'vitest'
import {PROJECT_ROOT} from '../support/upstream.js'

const LIB = join(PROJECT_ROOT, 'src/lib')
const files = (dir: string): string[] =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? files(path) : path.endsWith('.ts') ? [path] : []
  })
/** A request that writes, whose path names the IchorInstallation's resource. */
const writesInstallation = (source: string) => /request[^(]*\(\s*'(PATCH|PUT|POST|DELETE)'[^;]*?INSTALLATION\.(plural|name)/s.test(source)

describe('the IchorInstallation has one writer', () => {
  it('the check sees a write when a file sends one (so the next case can fail)', () => {
    expect(writesInstallation(readFileSync(join(LIB, 'state/installation.ts'), 'utf8'))).toBe(true)
    expect(writesInstallation("await kube.request('GET', `/apis/${INSTALLATION.apiVersion}/${INSTALLATION.plural}`)")).toBe(false)
  })

  it('no file outside state/ writes it', () => {
    const writers = files(LIB)
      .filter((f) => !relative(LIB, f).startsWith('state/'))
      .filter((f) => writesInstallation(readFileSync(f, 'utf8')))
      .map((f) => relative(LIB, f))
    expect(writers).toEqual([])
  })
})
