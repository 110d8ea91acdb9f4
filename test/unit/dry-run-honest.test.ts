// The dry run is reviewable and honest (issue 37 point 7): plan.txt names the versions and the
// promotion mode and lists only the steps that apply; the output folder holds only this run's
// files; bad input is refused offline as it is live, with or without talosctl.
import {existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {describe, expect, it} from 'vitest'
import {runCli} from '../support/run-cli.js'
import {PROJECT_ROOT, UPSTREAM} from '../support/upstream.js'
import {renderLiveDryRun} from '../../src/lib/init/summary.js'

if (!existsSync(join(PROJECT_ROOT, 'dist', 'commands', 'init.js'))) throw new Error('dist/ is missing: run `npm run build` first (npm test does)')

const CLUSTER = ['--cluster-name', 'homelab', '--endpoint', 'https://192.0.2.10:6443']
const NODES = [...CLUSTER, '--control-plane', '192.0.2.10', '--worker', '192.0.2.11']
const work = () => mkdtempSync(join(tmpdir(), 'ichor-dry-honest-'))
/** A machine without talosctl: ICHOR_TALOSCTL names a file that is not there. */
const NO_TALOSCTL = {ICHOR_TALOSCTL: join(tmpdir(), 'ichor-no-talosctl-here')}
/** talosctl played by the simulator: its `gen config` stand-in gives every node a config file. */
const SIM_TALOSCTL = (dir: string) => ({ICHOR_TALOSCTL: join(PROJECT_ROOT, 'test', 'sim', 'talosctl-simulator.mjs'), TALOS_SIM_STATE: dir})

// Asynchronous runs (runCli): a spawnSync blocks the test worker as long as the CLI runs, and
// vitest's worker times out its own progress messages past 60 s ("Timeout calling onTaskUpdate").
async function ichor(args: string[], env: Record<string, string | undefined> = {}, cwd?: string) {
  const r = await runCli(args, {env: {...process.env, ICHOR_MIRROR: '', ...env}, cwd})
  return {status: r.code, stdout: r.stdout, stderr: r.stderr}
}
async function dryRun(out: string, args: string[], env: Record<string, string | undefined> = {}) {
  return await ichor(['init', '--dry-run', '--output-dir', out, '--mirror', UPSTREAM.dir, ...args], env)
}

describe('plan.txt names what the run installs and only the steps that apply', () => {
  it.each([
    ['Automatic', [], false],
    ['Manual', ['--promotion', 'Manual'], true],
  ] as const)('promotion %s: the versions and the mode are named, the first-install approval only when it applies', async (mode, flags, approves) => {
    const out = join(work(), 'out')
    const r = await dryRun(out, [...NODES, ...flags])
    expect(r.status, r.stderr).toBe(0)
    const plan = readFileSync(join(out, 'plan.txt'), 'utf8')
    expect(plan).toMatch(/^Talos v\d+\.\d+\.\d+, Kubernetes \d+\.\d+\.\d+, /m)
    expect(plan).toMatch(/^Cilium \d+\.\d+\.\d+, Kokumi \d+\.\d+\.\d+, Argo CD v\d+\.\d+\.\d+ \(chart argo-cd \d+\.\d+\.\d+\)$/m)
    expect(plan).toMatch(new RegExp(`^Kokumi promotion: ${mode} `, 'm'))
    const steps = plan.split('steps a real run would execute')[1]!
    expect(steps.includes('approve the first install')).toBe(approves)
    expect(r.stdout.includes('approve the first install')).toBe(approves)
    // Automatic: nothing about Manual in the steps; no stored machine config offline: nothing to change on running nodes.
    if (!approves) expect(steps).not.toMatch(/Manual/)
    expect(steps).not.toMatch(/changed machine-config inputs to the running nodes/)
  })
})

describe('bad input is refused offline as it is live: exit 2, the flag named, nothing written', () => {
  it('zero control planes: the offline dry run says what the live dry run and a real run say', async () => {
    const dir = work()
    const out = join(dir, 'out')
    const offline = await dryRun(out, [...CLUSTER, '--worker', '192.0.2.11'])
    const live = await ichor(['init', '--dry-run', ...CLUSTER, '--worker', '192.0.2.11', '--mirror', UPSTREAM.dir, '--state-dir', join(dir, 'state')])
    const real = await ichor(['init', '--yes', ...CLUSTER, '--worker', '192.0.2.11', '--mirror', UPSTREAM.dir, '--state-dir', join(dir, 'state')])
    for (const r of [offline, live, real]) {
      expect(r.status, r.stderr).toBe(2)
      expect(r.stderr).toMatch(/^ {2}- --control-plane: at least one control-plane node is required/m)
    }
    expect(offline.stderr).toBe(live.stderr)
    expect(live.stderr).toBe(real.stderr)
    expect(existsSync(out)).toBe(false)
  })
})

describe('without talosctl, --config-patch is still parsed and checked as talosctl would (exit 2, nothing written)', () => {
  const dir = work()
  writeFileSync(join(dir, 'patch.yaml'), 'machine:\n  install:\n    wipe: true\n')
  writeFileSync(join(dir, 'cni.yaml'), 'cluster:\n  network:\n    cni:\n      name: flannel\n')
  const run = async (patchArgs: string[]) => {
    const out = join(work(), 'out')
    const r = await ichor(['init', '--dry-run', '--output-dir', out, '--mirror', UPSTREAM.dir, ...NODES, ...patchArgs], NO_TALOSCTL, dir)
    return {...r, written: existsSync(out)}
  }

  it('a valid patch (file or inline) renders, and the run says talosctl is missing', async () => {
    for (const args of [
      ['--config-patch', '@patch.yaml'],
      ['--config-patch', '[{op: add, path: /machine/install/wipe, value: true}]'],
    ]) {
      const r = await run(args)
      expect(r.status, r.stderr).toBe(0)
      expect(r.stderr).toMatch(/talosctl was not found/)
    }
  })

  it.each([
    // a forgotten @: a path taken as the inline patch
    [
      ['--config-patch', 'patch.yaml'],
      '--config-patch: "patch.yaml" was given as an inline patch but names a file that exists: talosctl\'s convention reads a file only with @ (--config-patch @patch.yaml)',
    ],
    [['--config-patch-worker', './gone/w.yaml'], '--config-patch-worker: "./gone/w.yaml" was given as an inline patch but looks like a file path'],
    [
      ['--node-patch', '192.0.2.11=patch.yaml'],
      '--node-patch 192.0.2.11: "patch.yaml" was given as an inline patch but names a file that exists: talosctl\'s convention reads a file only with @ (--node-patch 192.0.2.11=@patch.yaml)',
    ],
    // documents talosctl does not take as a patch
    [['--config-patch', 'hello'], '--config-patch: inline: is "hello", not a patch'],
    [['--config-patch', 'machine: {}\n---\n42'], '--config-patch: inline: document 2 is 42, not a patch'],
    [['--config-patch', '[{op: put, path: /machine}]'], '--config-patch: inline: operation 1 is not a JSON 6902 operation'],
    // fields ichor owns, as with talosctl
    [['--config-patch', '@cni.yaml'], '--config-patch: cni.yaml: cluster.network.cni.name is set by ichor'],
    [['--config-patch-control-plane', '{cluster: {clusterName: other}}'], '--config-patch-control-plane: inline: cluster.clusterName is set by ichor'],
  ])('%j is refused naming the flag', async (args, message) => {
    const r = await run(args)
    expect(r.status, r.stderr).toBe(2)
    expect(r.stderr).toContain(`  - ${message}`)
    expect(r.written).toBe(false)
  })
})

describe('a live dry run: progress on stderr, the result on stdout, a failure ends with Error:', () => {
  const live = (dir: string, env: Record<string, string>) =>
    ichor(['init', '--dry-run', ...CLUSTER, '--control-plane', '192.0.2.10', '--mirror', UPSTREAM.dir, '--state-dir', join(dir, 'state')], env)

  it('a step that fails (no talosctl): stdout holds no progress, and stderr ends with the Error: line (and its hint)', async () => {
    const r = await live(work(), NO_TALOSCTL)
    expect(r.status).toBe(1)
    expect(r.stdout).toBe('')
    const lines = r.stderr.trimEnd().split('\n')
    const error = lines.map((l) => l.startsWith('Error: ')).lastIndexOf(true)
    expect(lines[error]).toMatch(/^Error: step "Validate inputs, artifacts and Cilium values; probe the nodes \(read-only\)" failed: talosctl not found/)
    expect(lines.map((l) => /^\[\d+\/\d+\] /.test(l)).lastIndexOf(true)).toBeLessThan(error)
    expect(lines.slice(error + 1).every((l) => l.startsWith('Hint: '))).toBe(true)
  })

  it('nodes in maintenance mode (talosctl simulator): stdout lists what a real run would run, stderr the probing', async () => {
    const dir = work()
    const sim = join(dir, 'sim')
    mkdirSync(sim)
    writeFileSync(join(sim, 'nodes.json'), JSON.stringify([{ip: '192.0.2.10', role: 'controlplane', talosVersion: 'v1.14.1'}]))
    writeFileSync(join(sim, 'node-192.0.2.10.json'), JSON.stringify({mode: 'maintenance'}))
    const r = await live(dir, {ICHOR_TALOSCTL: join(PROJECT_ROOT, 'test', 'sim', 'talosctl-simulator.mjs'), TALOS_SIM_STATE: sim})
    expect(r.status, r.stderr).toBe(0)
    expect(r.stdout).toMatch(/^Dry run: nothing was changed\. A real run would run \d+ of \d+ steps \(\d+ already holds?\):\n/)
    expect(r.stdout).toMatch(/^ {2}\s?\d+\. Apply machine configs to nodes in maintenance mode \(in maintenance mode: 192\.0\.2\.10\)$/m)
    expect(r.stdout).not.toMatch(/^\[\d+\/\d+\]/m)
    expect(r.stderr).toMatch(/^\[1\/\d+\] Validate inputs/m)
    // Automatic promotion (the default) approves nothing, cluster or not.
    expect(r.stdout).not.toMatch(/approve the first install/)
    expect(r.stderr).toMatch(/approve the first install of each component \(nothing is served yet\)\.\.\. skipped: promotion Automatic/)
  })
})

describe("the output folder holds only this run's files, and never loses one ichor did not write", () => {
  const listOf = (out: string) =>
    readFileSync(join(out, '.ichor-dry-run'), 'utf8')
      .split('\n')
      .filter((l) => l && !l.startsWith('#'))
      .sort()

  it("a node left out of the flags loses its talos/nodes file; an operator's files stay and are named; the list of ichor's files is 0600", async () => {
    const dir = work()
    const out = join(dir, 'out')
    const first = await dryRun(out, [...NODES, '--worker', '192.0.2.12'], SIM_TALOSCTL(dir))
    expect(first.status, first.stderr).toBe(0)
    expect(readdirSync(join(out, 'talos', 'nodes')).sort()).toEqual(['192.0.2.10.yaml', '192.0.2.11.yaml', '192.0.2.12.yaml'])
    writeFileSync(join(out, 'notes.md'), 'mine')
    mkdirSync(join(out, 'review', 'old'), {recursive: true})
    writeFileSync(join(out, 'review', 'old', 'plan.txt'), 'mine too')
    writeFileSync(join(out, 'talos', 'my-patch.yaml'), 'machine: {}\n')

    const second = await dryRun(out, NODES, SIM_TALOSCTL(dir))
    expect(second.status, second.stderr).toBe(0)
    expect(readdirSync(join(out, 'talos', 'nodes')).sort()).toEqual(['192.0.2.10.yaml', '192.0.2.11.yaml'])
    expect(second.stderr).toContain(`removed from ${out}, written by an earlier dry run and not by this one: talos/nodes/192.0.2.12.yaml`)
    expect(second.stderr).toContain(`warning: ${out} also holds what ichor did not write (left as it is): notes.md, review/, talos/my-patch.yaml`)
    expect(readFileSync(join(out, 'plan.txt'), 'utf8')).toMatch(
      /^also in this folder, not written by ichor \(left as it is\):\n {2}notes\.md\n {2}review\/\n {2}talos\/my-patch\.yaml\n/m,
    )
    expect(readFileSync(join(out, 'notes.md'), 'utf8')).toBe('mine')
    expect(readFileSync(join(out, 'review', 'old', 'plan.txt'), 'utf8')).toBe('mine too')
    expect(existsSync(join(out, 'talos', 'my-patch.yaml'))).toBe(true)
    expect(statSync(join(out, '.ichor-dry-run')).mode & 0o777).toBe(0o600)

    // Without talosctl no node config is written: the folder they were in goes too.
    const third = await dryRun(out, NODES, NO_TALOSCTL)
    expect(third.status, third.stderr).toBe(0)
    expect(existsSync(join(out, 'talos', 'nodes'))).toBe(false)
    const json = await dryRun(out, [...NODES, '--json'], NO_TALOSCTL)
    const result = JSON.parse(json.stdout) as {files: string[]; removed: string[]; foreign: string[]}
    expect(listOf(out)).toEqual([...result.files].sort())
    expect(result.removed).toEqual([])
    expect(result.foreign).toEqual(['notes.md', 'review/', 'talos/my-patch.yaml'])
  })

  it('a list edited to name a file outside the folder removes nothing outside it', async () => {
    const dir = work()
    const out = join(dir, 'out')
    expect((await dryRun(out, NODES, NO_TALOSCTL)).status).toBe(0)
    writeFileSync(join(dir, 'outside.txt'), 'keep')
    writeFileSync(join(out, '.ichor-dry-run'), `${readFileSync(join(out, '.ichor-dry-run'), 'utf8')}../outside.txt\n${join(dir, 'outside.txt')}\n`)
    expect((await dryRun(out, NODES, NO_TALOSCTL)).status).toBe(0)
    expect(readFileSync(join(dir, 'outside.txt'), 'utf8')).toBe('keep')
  })

  it('a folder holding other things and no list of an earlier dry run is refused before anything is written (exit 2)', async () => {
    const out = work()
    writeFileSync(join(out, 'README.md'), 'a project')
    const r = await dryRun(out, NODES, NO_TALOSCTL)
    expect(r.status).toBe(2)
    expect(r.stderr).toContain(
      `Error: --output-dir: ${out} holds README.md, which ichor did not write, and no .ichor-dry-run of an earlier dry run: nothing was written`,
    )
    expect(readdirSync(out)).toEqual(['README.md'])
  })

  it('a file ichor would overwrite that it did not write is refused, named (exit 2), and kept', async () => {
    const dir = work()
    const out = join(dir, 'out')
    expect((await dryRun(out, NODES, SIM_TALOSCTL(dir))).status).toBe(0)
    writeFileSync(join(out, 'talos', 'nodes', '192.0.2.13.yaml'), "an operator's draft")
    const r = await dryRun(out, [...NODES, '--worker', '192.0.2.13'], SIM_TALOSCTL(dir))
    expect(r.status).toBe(2)
    expect(r.stderr).toContain(`Error: --output-dir: talos/nodes/192.0.2.13.yaml in ${out} was not written by ichor: nothing was written`)
    expect(readFileSync(join(out, 'talos', 'nodes', '192.0.2.13.yaml'), 'utf8')).toBe("an operator's draft")
  })
})

describe('renderLiveDryRun: the result a live dry run prints on stdout', () => {
  const task = (title: string, status: 'skipped' | 'would-run', detail?: string) => ({id: title, title, status, detail, ms: 1})
  it('names each step a real run would run with why, and how many hold; or that nothing would change', async () => {
    const tasks = [task('A', 'skipped', 'holds'), task('B', 'would-run', 'missing'), task('C', 'would-run')]
    expect(renderLiveDryRun({tasks, changed: true, dryRun: true})).toBe(
      'Dry run: nothing was changed. A real run would run 2 of 3 steps (1 already holds):\n   1. B (missing)\n   2. C',
    )
    expect(renderLiveDryRun({tasks: [tasks[0]!], changed: false, dryRun: true})).toBe('Dry run: nothing would change (every step holds).')
  })
})
