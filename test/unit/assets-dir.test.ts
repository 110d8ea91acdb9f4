// Where fetched artifacts live: $XDG_CACHE_HOME/ichor/assets by default, --assets-dir or
// ICHOR_ASSETS_DIR when given, never the installed package (read-only when installed
// globally, replaced on upgrade).
import {spawnSync} from 'node:child_process'
import {existsSync, mkdtempSync, readdirSync} from 'node:fs'
import {homedir, tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterEach, beforeEach, describe, expect, it} from 'vitest'
import {fetchAssets} from '../../src/lib/assets/fetch.js'
import {assetsDir, pinnedAssets} from '../../src/lib/assets/lock.js'
import {resolveAsset} from '../../src/lib/assets/resolve.js'
import {PROJECT_ROOT, UPSTREAM} from '../support/upstream.js'

const BIN = join(PROJECT_ROOT, 'bin', 'run.js')
const CILIUM_FILE = pinnedAssets().cilium.file

/** The package's own assets/charts holds nothing but its placeholder. */
function packageCharts(): string[] {
  return readdirSync(join(PROJECT_ROOT, 'assets', 'charts')).filter((f) => f !== '.gitkeep')
}

let saved: {xdg?: string; dir?: string}
let cache: string

beforeEach(() => {
  saved = {xdg: process.env.XDG_CACHE_HOME, dir: process.env.ICHOR_ASSETS_DIR}
  cache = mkdtempSync(join(tmpdir(), 'ichor-xdg-cache-'))
  process.env.XDG_CACHE_HOME = cache
  delete process.env.ICHOR_ASSETS_DIR
})

afterEach(() => {
  for (const [key, value] of [
    ['XDG_CACHE_HOME', saved.xdg],
    ['ICHOR_ASSETS_DIR', saved.dir],
  ] as const) {
    if (value === undefined) delete process.env[key]
    else process.env[key] = value
  }
})

describe('assetsDir', () => {
  it('is $XDG_CACHE_HOME/ichor/assets by default, ~/.cache/ichor/assets when XDG_CACHE_HOME is unset or relative', () => {
    expect(assetsDir()).toBe(join(cache, 'ichor', 'assets'))
    process.env.XDG_CACHE_HOME = 'relative/cache'
    expect(assetsDir()).toBe(join(homedir(), '.cache', 'ichor', 'assets'))
    delete process.env.XDG_CACHE_HOME
    expect(assetsDir()).toBe(join(homedir(), '.cache', 'ichor', 'assets'))
  })

  it('takes ICHOR_ASSETS_DIR over the default and the --assets-dir flag over both', () => {
    process.env.ICHOR_ASSETS_DIR = join(cache, 'from-env')
    expect(assetsDir()).toBe(join(cache, 'from-env'))
    expect(assetsDir(join(cache, 'from-flag'))).toBe(join(cache, 'from-flag'))
  })
})

describe('fetching and resolving use the assets folder, never the package', () => {
  it('fetchAssets copies into $XDG_CACHE_HOME/ichor/assets, and resolveAsset then finds it there', async () => {
    const [result] = await fetchAssets({from: UPSTREAM.dir, only: ['cilium']})
    expect(result).toMatchObject({id: 'cilium', status: 'copied', path: join(cache, 'ichor', 'assets', CILIUM_FILE)})
    expect(existsSync(result!.path)).toBe(true)
    expect(packageCharts()).toEqual([])
    const resolved = resolveAsset('cilium')
    expect(resolved).toMatchObject({origin: 'assets', path: result!.path, matchesPin: true})
  })

  it('fetchAssets and resolveAsset take an explicit assets folder', async () => {
    const dir = join(cache, 'explicit')
    const [result] = await fetchAssets({from: UPSTREAM.dir, only: ['cilium'], assetsDir: dir})
    expect(result!.path).toBe(join(dir, CILIUM_FILE))
    expect(existsSync(join(cache, 'ichor'))).toBe(false)
    expect(resolveAsset('cilium', {assetsDir: dir})).toMatchObject({origin: 'assets', path: join(dir, CILIUM_FILE)})
  })

  it('`ichor assets fetch` writes into $XDG_CACHE_HOME/ichor/assets, or into --assets-dir DIR', () => {
    const run = (args: string[]) =>
      spawnSync(process.execPath, [BIN, 'assets', 'fetch', '--from', UPSTREAM.dir, '--only', 'cilium', ...args], {
        encoding: 'utf8',
        env: {...process.env, XDG_CACHE_HOME: cache, ICHOR_ASSETS_DIR: ''},
      })
    const byDefault = run([])
    expect(byDefault.status, byDefault.stderr).toBe(0)
    expect(byDefault.stdout).toContain(join(cache, 'ichor', 'assets', CILIUM_FILE))
    expect(existsSync(join(cache, 'ichor', 'assets', CILIUM_FILE))).toBe(true)

    const dir = join(cache, 'flag')
    const byFlag = run(['--assets-dir', dir])
    expect(byFlag.status, byFlag.stderr).toBe(0)
    expect(existsSync(join(dir, CILIUM_FILE))).toBe(true)
    expect(packageCharts()).toEqual([])
  })
})
