// Issue 11: the built CLI, run as installed (bin/run.js) from a caller in the SAME process
// group, must never signal a child that has no pid (Node then signals whatever pid the
// failed spawn's native handle holds: garbage, or 0 = the caller's whole group), pid 0 or
// a negative pid, whether helm and talosctl are on PATH or not.
//
// The caller is test/exec/support/same-group-parent.mjs, started in a process group of its
// own (so a stray kill(0) ends it, not vitest). Every ichor process loads
// test/exec/support/kill-recorder.mjs through NODE_OPTIONS=--import, which logs each
// process.kill / ChildProcess#kill call (and refuses to forward the forbidden ones, so a
// failing run harms nothing else on the machine).
import {spawn} from 'node:child_process'
import {accessSync, constants, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {delimiter, join} from 'node:path'
import {pathToFileURL} from 'node:url'
import {afterAll, describe, expect, it} from 'vitest'
import {PROJECT_ROOT, UPSTREAM} from '../support/upstream.js'

/** Kept apart from src/lib/exec so this file also runs against a checkout without it (to see it fail). */
function isExecutableFile(path: string): boolean {
  try {
    accessSync(path, constants.X_OK)
    return statSync(path).isFile()
  } catch {
    return false
  }
}

const BIN = join(PROJECT_ROOT, 'bin', 'run.js')
// The real Go-built Helm 4 (vitest.config.ts sets ICHOR_HELM to it).
const SETUP_HELM = process.env.ICHOR_HELM ?? ''
const SIMULATOR = join(PROJECT_ROOT, 'test', 'sim', 'talosctl-simulator.mjs')
const RECORDER = join(PROJECT_ROOT, 'test', 'exec', 'support', 'kill-recorder.mjs')
const PARENT = join(PROJECT_ROOT, 'test', 'exec', 'support', 'same-group-parent.mjs')
if (!existsSync(join(PROJECT_ROOT, 'dist', 'commands', 'init.js'))) throw new Error('dist/ is missing: run `npm run build` first (npm test does)')
if (!isExecutableFile(SETUP_HELM)) throw new Error(`the test helm (ICHOR_HELM=${SETUP_HELM}) is missing: scripts/get-helm.sh 4 puts it in place`)

const work = mkdtempSync(join(tmpdir(), 'ichor-stray-kill-'))
afterAll(() => rmSync(work, {recursive: true, force: true}))

/** PATH without any directory holding a helm or talosctl. */
const PATH_WITHOUT_BINARIES = (process.env.PATH ?? '')
  .split(delimiter)
  .filter((dir) => dir && !['helm', 'talosctl'].some((name) => isExecutableFile(join(dir, name))))
  .join(delimiter)

/** A directory holding `helm` (the test helm) and `talosctl` (the node simulator). */
function binariesDir(): string {
  const dir = join(work, 'bin')
  if (!existsSync(dir)) {
    mkdirSync(dir)
    symlinkSync(SETUP_HELM, join(dir, 'helm'))
    symlinkSync(SIMULATOR, join(dir, 'talosctl'))
  }
  return dir
}

let logCount = 0
function cliEnv(log: string, opts: {binariesOnPath: boolean}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {...process.env}
  for (const name of Object.keys(env)) if (/^(ICHOR_|VITEST|NODE_OPTIONS$)/.test(name)) delete env[name]
  const simState = join(work, 'sim')
  mkdirSync(simState, {recursive: true})
  writeFileSync(join(simState, 'nodes.json'), '[]') // no node answers: every address is unreachable
  return {
    ...env,
    PATH: opts.binariesOnPath ? `${binariesDir()}${delimiter}${PATH_WITHOUT_BINARIES}` : PATH_WITHOUT_BINARIES,
    NODE_OPTIONS: `--import ${pathToFileURL(RECORDER).href}`,
    ICHOR_KILL_LOG: log,
    ICHOR_RENDER_CACHE: 'off',
    XDG_STATE_HOME: join(work, 'state'),
    XDG_CACHE_HOME: join(work, 'cache'),
    TALOS_SIM_STATE: simState,
  }
}

interface KillRecord {
  via: 'process.kill' | 'ChildProcess.kill'
  pid?: number
  childPid?: number | null
  hasHandle?: boolean
  refused: boolean
  self: number
}

interface ParentReport {
  code: number | null
  signal: NodeJS.Signals | null
  survived: boolean
  results: Array<{code: number | null; signal: string | null; stderr: string}>
  kills: KillRecord[]
}

/** Runs the CLI `runs` times from a caller in one process group of its own; reads the kill log. */
async function fromSameGroupCaller(runs: Array<{args: string[]; binariesOnPath: boolean}>, concurrency = 1): Promise<ParentReport> {
  const log = join(work, `kills-${++logCount}.jsonl`)
  writeFileSync(log, '')
  const plan = join(work, `plan-${logCount}.json`)
  writeFileSync(plan, JSON.stringify({concurrency, runs: runs.map((r) => ({args: [BIN, ...r.args], env: cliEnv(log, r)}))}))
  const parent = spawn(process.execPath, [PARENT, plan], {detached: true, stdio: ['ignore', 'pipe', 'inherit']})
  let stdout = ''
  parent.stdout.on('data', (c: Buffer) => (stdout += c))
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => parent.on('close', (c, s) => resolve([c, s])))
  const summary = stdout ? (JSON.parse(stdout) as {survived: boolean; results: ParentReport['results']}) : {survived: false, results: []}
  const kills = readFileSync(log, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as KillRecord)
  return {code, signal, ...summary, kills}
}

/** The calls issue 11 forbids: at a pid-less child, at pid 0, at a negative pid. */
function forbidden(kills: KillRecord[]): KillRecord[] {
  return kills.filter(
    (k) => k.refused || (k.via === 'ChildProcess.kill' && (k.childPid === null || (k.childPid ?? 0) <= 0)) || (k.via === 'process.kill' && (k.pid ?? 0) <= 0),
  )
}

/** The 0600 file with the passphrase a real init seals the Talos bundle with. */
function passphraseFile(): string {
  const file = join(work, 'state-passphrase')
  writeFileSync(file, 'stray-kill test passphrase\n', {mode: 0o600})
  return file
}

function valuesFile(name: string, text: string): string {
  const file = join(work, name)
  writeFileSync(file, text)
  return file
}

describe('no signal ever reaches a pid-less child, pid 0 or a process group (issue 11)', () => {
  const validate = (file: string) => ['cni', 'values', 'validate', '-f', file, '--mirror', UPSTREAM.dir]
  const NODES = [
    '--cluster-name',
    'homelab',
    '--endpoint',
    'https://192.0.2.10:6443',
    '--control-plane',
    '192.0.2.10',
    '--worker',
    '192.0.2.11',
    '--mirror',
    UPSTREAM.dir,
  ]

  it('cni values validate, 50 runs with helm and talosctl absent from PATH, then once with both present: the caller survives', async () => {
    // Given values files that fail the offline checks (the run ends while the helm render it
    // started in parallel is still being set up) and one that passes
    const files = [
      {file: valuesFile('unknown-key.yaml', 'noSuchCiliumKey: 1\n'), code: 2},
      {file: valuesFile('owned-key.yaml', 'kubeProxyReplacement: false\n'), code: 2},
      {file: valuesFile('wrong-type.yaml', 'hubble:\n  enabled: "yes please"\n'), code: 2},
      {file: valuesFile('valid.yaml', 'hubble:\n  relay:\n    enabled: true\n'), code: 0},
    ]
    // (every tenth run renders the chart in full, the others stop at the offline checks)
    const fileOf = (i: number) => (i % 10 === 9 ? files[3]! : files[i % 3]!)
    const runs = Array.from({length: 50}, (_, i) => ({args: validate(fileOf(i).file), binariesOnPath: false}))
    runs.push({args: validate(files[3]!.file), binariesOnPath: true})

    // When a caller in one process group runs them all
    const report = await fromSameGroupCaller(runs, 3)

    // Then the caller survives, every run ends with its own exit code, and no forbidden kill happened
    expect(forbidden(report.kills)).toEqual([])
    expect({code: report.code, signal: report.signal, survived: report.survived}).toEqual({code: 0, signal: null, survived: true})
    expect(report.results.map((r) => r.signal)).toEqual(runs.map(() => null))
    // (a valid file needs helm for the full render: without one on PATH the run names it, exit 1)
    expect(report.results.map((r) => r.code)).toEqual([...Array.from({length: 50}, (_, i) => (fileOf(i).code === 0 ? 1 : fileOf(i).code)), 0])
  }, 600_000)

  it('init --dry-run --output-dir DIR, with helm absent from PATH and with it present', async () => {
    const out = join(work, 'dry-run')
    const report = await fromSameGroupCaller([
      {args: ['init', '--dry-run', '--output-dir', join(out, 'a'), ...NODES], binariesOnPath: false},
      {args: ['init', '--dry-run', '--output-dir', join(out, 'b'), ...NODES], binariesOnPath: true},
    ])
    expect(forbidden(report.kills)).toEqual([])
    expect({code: report.code, signal: report.signal, survived: report.survived}).toEqual({code: 0, signal: null, survived: true})
    // Without helm the dry run cannot render: it names helm and writes nothing; with it, it renders.
    expect(
      report.results.map((r) => [r.code, r.signal]),
      report.results.map((r) => r.stderr).join('\n'),
    ).toEqual([
      [1, null],
      [0, null],
    ])
    expect(report.results[0]!.stderr).toMatch(/helm not found/)
    expect([existsSync(join(out, 'a', 'plan.txt')), existsSync(join(out, 'b', 'plan.txt'))]).toEqual([false, true])
  }, 300_000)

  it('a failing init (unreachable node), with talosctl absent and with it present', async () => {
    const report = await fromSameGroupCaller([
      {args: ['init', '--yes', '--allow-unpinned', '--state-passphrase-file', passphraseFile(), ...NODES], binariesOnPath: false},
      {args: ['init', '--yes', '--allow-unpinned', '--state-passphrase-file', passphraseFile(), ...NODES], binariesOnPath: true},
    ])
    expect(forbidden(report.kills)).toEqual([])
    expect({code: report.code, signal: report.signal, survived: report.survived}).toEqual({code: 0, signal: null, survived: true})
    const [absent, present] = report.results
    expect(absent!.signal).toBeNull()
    expect(absent!.code).not.toBe(0)
    expect(absent!.stderr).toMatch(/(talosctl|helm) not found/)
    expect(present!.signal).toBeNull()
    expect(present!.code).not.toBe(0)
    expect(present!.stderr).toMatch(/192\.0\.2\.1[01].*(unreachable|connection refused)/s)
  }, 300_000)
})
