// The single binary (`npm run build:binary`), run as a user without Node would run it:
// copied alone into an empty directory, started under `env -i` with PATH holding only
// that directory and helm's. Built here from the mirror, whose Argo CD chart and Kokumi
// manifest are older than the pins: the binary embeds them and says they are not pinned.
import {execa} from 'execa'
import {copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {basename, dirname, join, relative} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {pinnedAssets} from '../../src/lib/assets/lock.js'
import {terminal} from '../support/terminal.js'
import {PROJECT_ROOT, UPSTREAM} from '../support/upstream.js'

/** The pinned Cilium chart, which the binary embeds from the mirror. */
const PIN = pinnedAssets().cilium
const re = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

const BUILD = join(PROJECT_ROOT, 'scripts', 'build-binary.mjs')
const NPM_BIN = join(PROJECT_ROOT, 'bin', 'run.js')
const NODES = ['--cluster-name', 'homelab', '--endpoint', 'https://192.0.2.10:6443', '--control-plane', '192.0.2.10', '--worker', '192.0.2.11']

let work: string
let binDir: string
let built: {stdout: string; stderr: string}

function helm(): string {
  const path = process.env.ICHOR_HELM
  if (!path || !existsSync(path)) throw new Error(`no helm at ICHOR_HELM=${path}: vitest.config.ts points it at the Go-built Helm 4`)
  return path
}

// Asynchronous runs: a long synchronous one would stall vitest's worker.
async function run(file: string, args: string[], opts: {env?: Record<string, string>; extendEnv?: boolean; cwd?: string} = {}) {
  const r = await execa(file, args, {reject: false, stripFinalNewline: false, ...opts})
  return {code: r.exitCode, stdout: r.stdout, stderr: r.stderr}
}

/** The binary with nothing but its own directory and helm's on PATH, and no other environment than `env`. */
function binary(args: string[], env: Record<string, string> = {}) {
  const vars = Object.entries(env).map(([k, v]) => `${k}=${v}`)
  return run('env', ['-i', `PATH=${binDir}:${dirname(helm())}`, `HOME=${join(work, 'home')}`, ...vars, 'ichor', ...args], {cwd: binDir})
}

function npmBuild(args: string[], env: Record<string, string> = {}) {
  // The binary's HOME, so both keep the autocomplete cache in one place; not vitest's NODE_ENV=test,
  // under which oclif adds developer warnings (@oclif/core 4.14 lib/util/util.js isProd); and no
  // CI, which the binary's empty environment lacks too (oclif's action spinner writes otherwise).
  return run(process.execPath, [NPM_BIN, ...args], {
    env: {
      ICHOR_HELM: helm(),
      ICHOR_MIRROR: '',
      ICHOR_ASSETS_DIR: join(work, 'no-assets'),
      HOME: join(work, 'home'),
      XDG_CACHE_HOME: '',
      NODE_ENV: '',
      CI: '',
      ...env,
    },
  })
}

const manifest = JSON.parse(readFileSync(join(PROJECT_ROOT, 'oclif.manifest.json'), 'utf8')) as {commands: Record<string, unknown>}
// Every topic of the built manifest (`cni`, `cni values`, ...), so a new one cannot skip the comparison.
const TOPICS = [
  ...new Set(
    Object.keys(manifest.commands).flatMap((id) =>
      id
        .split(':')
        .slice(0, -1)
        .map((_, i, parts) => parts.slice(0, i + 1).join(' ')),
    ),
  ),
].sort()

async function buildBinary(args: string[]) {
  const r = await run(process.execPath, [BUILD, ...args], {env: {ICHOR_ASSETS_DIR: join(work, 'no-assets')}})
  return {...r, stdout: r.stdout.trim()}
}

/** Every file under `dir`, relative path -> bytes. */
function tree(dir: string): Map<string, Buffer> {
  const files = new Map<string, Buffer>()
  const walk = (d: string) => {
    for (const e of readdirSync(d, {withFileTypes: true})) {
      const p = join(d, e.name)
      if (e.isDirectory()) walk(p)
      else files.set(relative(dir, p), readFileSync(p))
    }
  }
  walk(dir)
  return files
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'ichor-binary-'))
  const out = join(work, 'build', 'ichor')
  const r = await buildBinary(['--from', UPSTREAM.dir, '--out', out])
  if (r.code !== 0) throw new Error(`build-binary failed (${r.code}):\n${r.stderr}`)
  built = r
  // An empty directory holding only the binary.
  binDir = join(work, 'bin')
  mkdirSync(binDir)
  copyFileSync(out, join(binDir, 'ichor'))
})

afterAll(() => {
  if (work) rmSync(work, {recursive: true, force: true})
})

describe('npm run build:binary', () => {
  it('builds one executable and says in a short summary which embedded artifacts are not the pinned ones; the rest is in its log', () => {
    expect(built.stdout).toMatch(/ichor$/)
    expect(statSync(join(binDir, 'ichor')).mode & 0o111).not.toBe(0)
    expect(built.stderr).toMatch(/NOT all pinned: argocd 10\.1\.1, kokumi 0\.14\.0/)
    // A summary, not a page of the tools' warnings: at most 4 lines, naming the count and the log.
    const lines = built.stderr.trimEnd().split('\n')
    expect(lines.length, built.stderr).toBeLessThanOrEqual(4)
    expect(built.stderr).toMatch(/node v\d+\.\d+\.\d+/)
    expect(built.stderr).toMatch(/(\d+ warnings?|no warnings).*the full log: .*ichor\.build\.log/)
    const log = readFileSync(join(work, 'build', 'ichor.build.log'), 'utf8')
    expect(log).toMatch(new RegExp(`cilium: .*${re(basename(PIN.file))} .* matches the pin ${re(PIN.version)}`))
  })

  it('refuses a non-pinned artifact with --pinned-only, and a --from that is not a directory, with exit code 2', async () => {
    const pinnedOnly = await buildBinary(['--from', UPSTREAM.dir, '--pinned-only', '--out', join(work, 'never')])
    expect(pinnedOnly.code).toBe(2)
    expect(pinnedOnly.stderr).toMatch(/--pinned-only: .*argo-cd-10\.1\.1\.tgz is not the pinned Argo CD Helm chart .*10\.11\.6/)
    const badFrom = await buildBinary(['--from', join(work, 'nonexistent'), '--out', join(work, 'never')])
    expect(badFrom.code).toBe(2)
    expect(badFrom.stderr).toMatch(/--from: .*nonexistent is not a directory/)
    expect(existsSync(join(work, 'never'))).toBe(false)
  })
})

describe('the binary, alone in an empty directory, without Node', () => {
  it('prints the same --help as the npm build', async () => {
    // No node on the PATH the binary gets: its directory holds only itself, helm's no node.
    expect(readdirSync(binDir)).toEqual(['ichor'])
    expect(existsSync(join(dirname(helm()), 'node'))).toBe(false)
    const fromBinary = await binary(['--help'])
    expect(fromBinary.code, fromBinary.stderr).toBe(0)
    expect(fromBinary.stderr).toBe('')
    // oclif's plugin command (help) and ichor's completion included.
    expect(fromBinary.stdout).toMatch(/^\s+completion\s+Print the completion script for bash/m)
    expect(fromBinary.stdout).toMatch(/^\s+help\s+Display help for ichor/m)
    expect(fromBinary.stdout).toBe((await npmBuild(['--help'])).stdout)
    const initHelp = await binary(['init', '--help'])
    expect(initHelp.code, initHelp.stderr).toBe(0)
    expect(initHelp.stdout).toBe((await npmBuild(['init', '--help'])).stdout)
  })

  // The same answers as the npm build, byte for byte: help, topics, completion scripts and mistyped commands.
  it.each(
    [
      ['help'],
      ['help', 'init'],
      ['help', 'cni', 'values'],
      ['help', 'inti'],
      ...TOPICS.map((t) => t.split(' ')),
      ['completion', 'bash'],
      ['completion', 'zsh'],
      ['autocomplete', 'script', 'bash'],
      ['autocomplete', 'bash'],
      ['cni', '--foo'],
      ['inti'],
      ['inti', '--yes'],
      ['cni', 'valeus', 'set'],
      ['hepl', '--json'],
      ['verison'],
      ['status', '--help'],
      ['stack', 'password', '--help'],
      ['status', '--kubeconfig', '/nonexistent/kubeconfig', '--json'],
      ['open', '--help'],
      ['open', 'grafana'],
      ['open', 'argocd', '--port', '99999'],
      ['open', 'argocd', '--kubeconfig', '/nonexistent/kubeconfig', '--json'],
    ].map((args) => [args.join(' '), args]),
  )('`ichor %s` answers as the npm build does', async (_name, args) => {
    const fromBinary = await binary(args)
    const fromNpm = await npmBuild(args)
    expect({code: fromBinary.code, stdout: fromBinary.stdout, stderr: fromBinary.stderr}).toEqual({
      code: fromNpm.code,
      stdout: fromNpm.stdout,
      stderr: fromNpm.stderr,
    })
    if (args[0] === 'inti' || args[0] === 'verison') expect(fromBinary.stderr).toMatch(/did you mean ichor (init|version)\?/)
  })

  it('`ichor completion bash` knows every command, flag value and argument, and writes nothing', async () => {
    const r = await binary(['completion', 'bash'])
    expect(r.code, r.stderr).toBe(0)
    for (const line of ['cni:values:set --json B', 'cni:values:get -o W yaml json', 'stack:values:set #0 W argocd kokumi', 'complete -F _ichor_complete ichor'])
      expect(r.stdout.split('\n')).toContain(line)
    expect(existsSync(join(work, 'home', '.cache', 'ichor', 'autocomplete'))).toBe(false)
  })

  it("`--version` prints ichor's version output, as `ichor version` and the npm build do, plus what it embeds", async () => {
    const fromBinary = await binary(['--version'])
    expect(fromBinary.code, fromBinary.stderr).toBe(0)
    expect(fromBinary.stdout).toBe((await binary(['version'])).stdout)
    const fromNpm = (await npmBuild(['--version'])).stdout
    expect(fromNpm).toMatch(/^ichor \d+\.\d+\.\d+ \(node v[\d.]+, linux-x64\)\nPinned:/)
    expect(fromBinary.stdout.startsWith(fromNpm.trimEnd())).toBe(true)
    expect(fromBinary.stdout).toMatch(/Embedded in this binary:\n {2}cilium /)
    const json = JSON.parse((await binary(['--version', '--json'])).stdout)
    expect(json.pinned).toEqual(JSON.parse((await npmBuild(['--version', '--json'])).stdout).pinned)
  })

  it('compiles its commands from the V8 code cache built with it, and evaluates only the command it runs', async () => {
    // DEBUG=ichor:binary is the binary's own debug line (oclif's logger, the debug package).
    const r = await binary(['version'], {DEBUG: 'ichor:binary'})
    expect(r.code, r.stderr).toBe(0)
    expect(r.stderr).toMatch(/ichor:binary commands compiled, code cache accepted/)
    expect(r.stderr).toMatch(/ichor:binary evaluated command version \(1 of \d+\)/)
    expect(r.stdout).toBe((await binary(['version'])).stdout)
  })

  it('a mistyped command on a terminal is not run: the suggestion and exit 2, as the npm build does', async () => {
    const session = terminal(['verison'], {executable: join(binDir, 'ichor')})
    await session.expect('did you mean ichor version?')
    session.type('\r')
    expect(await session.exited).toBe(2)
    expect(session.screen()).not.toMatch(/Pinned:/)
  })

  it('reads the terminal width and colour support when it starts, not when its startup snapshot was built', async () => {
    // The snapshot is made by a build with no terminal and no colour: a binary that kept
    // what oclif, ansis and supports-color read at load time would print 80 columns, plain.
    const env = {OCLIF_COLUMNS: '60', FORCE_COLOR: '3'}
    for (const args of [
      ['init', '--help'],
      ['cni', 'values', 'set', '--help'],
    ]) {
      const fromBinary = await binary(args, env)
      expect(fromBinary.code, fromBinary.stderr).toBe(0)
      expect(fromBinary.stdout, args.join(' ')).toBe((await npmBuild(args, env)).stdout)
      expect(fromBinary.stdout).toContain('\u001B[1mUSAGE\u001B[22m')
      // Wrapped at 60 columns, not at the 80 of a help without a terminal.
      const uncoloured = fromBinary.stdout.replace(/\u001B\[[0-9;]*m/g, '')
      expect(uncoloured).not.toBe((await binary(args)).stdout)
    }
  })

  it('renders `init --dry-run --output DIR` from its embedded artifacts, byte for byte as the npm build does from the mirror', async () => {
    const fromNpm = join(work, 'dry-npm')
    const fromBinary = join(work, 'dry-binary')
    const npm = await npmBuild(['init', '--dry-run', '--output-dir', fromNpm, ...NODES, '--mirror', UPSTREAM.dir])
    expect(npm.code, npm.stderr).toBe(0)
    const bin = await binary(['init', '--dry-run', '--output-dir', fromBinary, ...NODES])
    expect(bin.code, bin.stderr).toBe(0)
    expect(bin.stderr).toMatch(
      new RegExp(`cilium: .* \\(cilium ${re(PIN.version)}, sha256 ${PIN.sha256.slice(0, 12)}, from embedded\\) matches the pin ${re(PIN.version)}`),
    )
    expect(bin.stderr).toMatch(/argocd: .* from embedded\) does NOT match the pin 10\.11\.6/)
    expect(bin.stderr).toMatch(/kokumi: .* from embedded\) does NOT match the pin 0\.17\.0/)

    const a = tree(fromNpm)
    const b = tree(fromBinary)
    expect([...b.keys()].sort()).toEqual([...a.keys()].sort())
    expect(a.size).toBeGreaterThan(10)
    for (const [file, bytes] of a) expect(b.get(file)?.equals(bytes), file).toBe(true)
  })

  it('names a bad flag with exit code 2, as the npm build does', async () => {
    const r = await binary(['init', '--dry-run', '--output-dir', join(work, 'x'), ...NODES, '--tunnel', 'gre'])
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(/--tunnel/)
  })
})
