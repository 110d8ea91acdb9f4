// Issue 12 point 6: Helm 4.0.0 cannot take ownership with server-side apply
// (helm/helm#31510, fixed in 4.0.1), so ichor refuses it and names the version it needs.
// The helm here is a stand-in script that only answers `helm version` (the real helms the
// tests build are 3.18+ and 4.0.1+ and cannot show the refusal).
import {chmodSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, afterEach, beforeAll, describe, expect, it} from 'vitest'
import {findHelm, helmVersionProblem} from '../../src/lib/helm/binary.js'

let work: string
const saved = process.env.ICHOR_HELM

/** A helm that only prints `version` as its `helm version --template` answer. */
function helmAnswering(version: string): string {
  const path = join(work, `helm-${version}`)
  writeFileSync(path, `#!/bin/sh\necho ${version}\n`)
  chmodSync(path, 0o755)
  return path
}

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'ichor-helm-version-'))
})
afterEach(() => {
  process.env.ICHOR_HELM = saved
})
afterAll(() => rmSync(work, {recursive: true, force: true}))

describe('the helm version ichor accepts', () => {
  it('refuses Helm 4.0.0 and names 4.0.1 as the version needed', async () => {
    process.env.ICHOR_HELM = helmAnswering('v4.0.0')
    await expect(findHelm()).rejects.toThrow(/helm v4\.0\.0 .*use Helm 4\.0\.1 or newer/)
  })

  it('refuses Helm 3.17 and names 3.18', async () => {
    process.env.ICHOR_HELM = helmAnswering('v3.17.3')
    await expect(findHelm()).rejects.toThrow(/ichor needs Helm 3\.18 or newer/)
  })

  it('accepts 3.18.0, 4.0.1 and 4.1.0', async () => {
    for (const v of ['v3.18.0', 'v4.0.1', 'v4.1.0']) {
      process.env.ICHOR_HELM = helmAnswering(v)
      await expect(findHelm()).resolves.toMatchObject({version: v})
    }
  })

  it('gives the reason with the issue that fixed it', () => {
    expect(helmVersionProblem({major: 4, minor: 0, patch: 0})?.message).toMatch(/helm\/helm#31510/)
    expect(helmVersionProblem({major: 3, minor: 19, patch: 2})).toBeUndefined()
  })
})
