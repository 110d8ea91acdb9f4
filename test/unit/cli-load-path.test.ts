// The CLI must not load @kubernetes/client-node on its way to running a command: its
// import alone costs about half a second and 70 MB. A child node records every module it
// resolves (an ESM resolve hook, plus the CommonJS cache) while it imports the built
// command; client-node may appear only where a tunnel or an auth provider needs it, and
// these imports open neither. Needs `npm run build` first (dist/).
import {spawnSync} from 'node:child_process'
import {existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'
import {afterAll, describe, expect, it} from 'vitest'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const dir = mkdtempSync(join(tmpdir(), 'ichor-load-path-'))
afterAll(() => rmSync(dir, {recursive: true, force: true}))

const HOOK = `import {appendFileSync} from 'node:fs'
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context)
  appendFileSync(process.env.ICHOR_LOAD_LOG, resolved.url + '\\n')
  return resolved
}`
const REGISTER = `import {register} from 'node:module'; register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(HOOK)}`)})`
const IMPORT_AND_LIST_CJS = `await import(process.argv[1])
const {createRequire} = await import('node:module')
process.stdout.write(JSON.stringify(Object.keys(createRequire(import.meta.url).cache)))`

/** Every module (file URL or path) loaded by importing `target` in a fresh node. */
function modulesLoadedBy(target: string): string[] {
  const log = join(dir, `${Math.random().toString(36).slice(2)}.log`)
  const run = spawnSync(
    process.execPath,
    ['--import', `data:text/javascript,${encodeURIComponent(REGISTER)}`, '--input-type=module', '-e', IMPORT_AND_LIST_CJS, target],
    {cwd: ROOT, env: {...process.env, ICHOR_LOAD_LOG: log}, encoding: 'utf8'},
  )
  if (run.status !== 0) throw new Error(`importing ${target} failed (exit ${run.status}): ${run.stderr}`)
  const esm = existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean) : []
  return [...esm, ...(JSON.parse(run.stdout) as string[])]
}

const fromClientNode = (modules: string[]) => modules.filter((m) => m.includes('node_modules/@kubernetes/client-node/'))

describe('the CLI load path', () => {
  it('the probe sees client-node when something imports it (so the checks below can fail)', () => {
    const modules = modulesLoadedBy('@kubernetes/client-node')
    expect(fromClientNode(modules).length).toBeGreaterThan(10)
  })

  it.each(['commands/init.js', 'lib/plans/init.js', 'lib/kube/client.js'])('importing dist/%s loads no module of @kubernetes/client-node', (file) => {
    const target = join(ROOT, 'dist', file)
    if (!existsSync(target)) throw new Error(`${target} is missing: run \`npm run build\` first`)
    const modules = modulesLoadedBy(target)
    // it did record the command's own modules and its dependencies
    expect(modules.some((m) => m.includes('/dist/lib/kube/client.js'))).toBe(true)
    expect(modules.some((m) => m.includes('node_modules/yaml/'))).toBe(true)
    expect(fromClientNode(modules)).toEqual([])
  })
})

describe('the day-2 load path', () => {
  // age (with its post-quantum crypto) is for commands that open the sealed Talos bundle.
  it.each(['commands/cni/status.js', 'commands/cni/values/set.js', 'commands/cni/values/diff.js', 'commands/stack/status.js', 'commands/stack/sync.js'])(
    'importing dist/%s loads no module of age-encryption',
    (file) => {
      const target = join(ROOT, 'dist', file)
      if (!existsSync(target)) throw new Error(`${target} is missing: run \`npm run build\` first`)
      const modules = modulesLoadedBy(target)
      expect(modules.some((m) => m.includes('/dist/lib/state/installation.js'))).toBe(true)
      expect(modules.filter((m) => m.includes('node_modules/age-encryption/'))).toEqual([])
    },
  )
})

describe('the entry point under a developer NODE_ENV', () => {
  // oclif treats NODE_ENV=development|test as "transpile TypeScript sources": it loads the
  // typescript compiler to read tsconfig.json on every run (0.6 s of CPU). ichor runs dist/ only.
  const preload = join(dir, 'cjs-on-exit.cjs')
  writeFileSync(preload, "process.on('exit', () => require('node:fs').writeFileSync(process.env.ICHOR_CJS_LOG, JSON.stringify(Object.keys(require.cache))))")

  it.each(['development', 'test'])('NODE_ENV=%s: `ichor --version` loads no module of typescript', (nodeEnv) => {
    const log = join(dir, `entry-${nodeEnv}.json`)
    const run = spawnSync(process.execPath, ['--require', preload, join(ROOT, 'bin', 'run.js'), '--version'], {
      cwd: ROOT,
      env: {...process.env, NODE_ENV: nodeEnv, ICHOR_CJS_LOG: log},
      encoding: 'utf8',
    })
    expect(run.status, run.stderr).toBe(0)
    const modules = JSON.parse(readFileSync(log, 'utf8')) as string[]
    // it did record oclif's own modules (CommonJS), which is where typescript would come from
    expect(modules.some((m) => m.includes('node_modules/@oclif/core/'))).toBe(true)
    expect(modules.filter((m) => m.includes('node_modules/typescript/'))).toEqual([])
  })
})
