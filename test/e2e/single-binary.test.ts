// The single binary (`npm run build:binary`), run as a user without Node would run it:
// copied alone into an empty directory, started under `env -i` with PATH holding only
// that directory and helm's. Built here from the mirror, whose Argo CD chart and Kokumi
// manifest are older than the pins: the binary embeds them and says they are not pinned.
import {execa} from 'execa'
import {copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {dirname, join, relative} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {PROJECT_ROOT, UPSTREAM} from '../support/upstream.js'

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
  return run(process.execPath, [NPM_BIN, ...args], {env: {ICHOR_HELM: helm(), ICHOR_MIRROR: '', ICHOR_ASSETS_DIR: join(work, 'no-assets'), ...env}})
}

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
  it('builds one executable and says which embedded artifacts are not the pinned ones', () => {
    expect(built.stdout).toMatch(/ichor$/)
    expect(statSync(join(binDir, 'ichor')).mode & 0o111).not.toBe(0)
    expect(built.stderr).toMatch(/cilium: .*cilium-1\.18\.0\.tgz .* matches the pin 1\.18\.0/)
    expect(built.stderr).toMatch(/NOT all pinned: argocd 10\.1\.1, kokumi 0\.14\.0/)
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
    // The binary carries ichor's own commands, not oclif's plugin commands (help, autocomplete):
    // the same help once those two entries are left out, layout whitespace aside.
    const words = (text: string) => text.replace(/^\s+(autocomplete|help)\s+Display .*$/gm, '').split(/\s+/).filter(Boolean).join(' ')
    expect(words(fromBinary.stdout)).toBe(words((await npmBuild(['--help'])).stdout))
    const initHelp = await binary(['init', '--help'])
    expect(initHelp.code, initHelp.stderr).toBe(0)
    expect(initHelp.stdout).toBe((await npmBuild(['init', '--help'])).stdout)
  })

  it('reads the terminal width and colour support when it starts, not when its startup snapshot was built', async () => {
    // The snapshot is made by a build with no terminal and no colour: a binary that kept
    // what oclif, ansis and supports-color read at load time would print 80 columns, plain.
    const env = {OCLIF_COLUMNS: '60', FORCE_COLOR: '3'}
    for (const args of [['init', '--help'], ['cni', 'values', 'set', '--help']]) {
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
    expect(bin.stderr).toMatch(/cilium: .* \(cilium 1\.18\.0, sha256 7f9557f24b94, from embedded\) matches the pin 1\.18\.0/)
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
