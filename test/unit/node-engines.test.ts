// README names Node 20: `npm ci` on it must not warn EBADENGINE, so every locked package's
// engines.node accepts it (npm checks the same field against the running node).
import {readFileSync} from 'node:fs'
import {createRequire} from 'node:module'
import {describe, expect, it} from 'vitest'

// semver is npm's own range logic; loaded untyped, it is only a dependency of our dependencies.
const semver = createRequire(import.meta.url)('semver') as {satisfies(version: string, range: string): boolean}
// The oldest Node 20 every runtime dependency accepts (@noble/* ask for >= 20.19.0).
const NODE_20 = '20.19.0'

describe('package-lock.json on Node 20', () => {
  it(`every locked package's engines.node accepts Node ${NODE_20}`, () => {
    const lock = JSON.parse(readFileSync(new URL('../../package-lock.json', import.meta.url), 'utf8')) as {
      packages: Record<string, {version?: string; engines?: {node?: string} | string[]}>
    }
    const refused = Object.entries(lock.packages)
      .filter(([, p]) => p.engines && !Array.isArray(p.engines) && p.engines.node && !semver.satisfies(NODE_20, p.engines.node))
      .map(([path, p]) => `${path.replace(/^.*node_modules\//, '')}@${p.version} (node ${(p.engines as {node: string}).node})`)
    expect(refused).toEqual([])
  })
})
