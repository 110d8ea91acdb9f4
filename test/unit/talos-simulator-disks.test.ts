// The Talos node SIMULATOR's disks (issue 22): `get disks` lists each machine's disks as Talos
// v1.14.1 does (readable with --insecure in maintenance mode), and a config whose install disk
// the machine does not have is accepted but never installs: the machine stays in maintenance
// mode (v1alpha1_sequencer_tasks.go Install: "no disks matched the expression"). Before any
// cluster exists, so no API server is needed.
import {execFileSync, spawnSync} from 'node:child_process'
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {listDisks} from '../../src/lib/talos/talosctl.js'
import {SIMULATOR} from '../sim/simulated-nodes.js'
import {realTalosctlPath} from '../harness/talosctl.js'

const IP = '127.0.0.12'
let root: string
let env: NodeJS.ProcessEnv
const sim = (args: string[]) => spawnSync(process.execPath, [SIMULATOR, ...args], {encoding: 'utf8', env})
const mode = () => JSON.parse(readFileSync(join(root, `node-${IP}.json`), 'utf8')) as {mode: string; installError?: string}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'ichor-sim-disks-'))
  writeFileSync(join(root, 'nodes.json'), JSON.stringify([{ip: IP, role: 'worker', talosVersion: 'v1.14.1', disks: ['/dev/sda']}]))
  env = {...process.env, TALOS_SIM_STATE: root, TALOS_SIM_REAL_TALOSCTL: realTalosctlPath()}
  const talosctl = realTalosctlPath()
  execFileSync(talosctl, ['gen', 'secrets', '--output-file', join(root, 'secrets.yaml')], {stdio: 'ignore'})
  for (const disk of ['/dev/nvme0n1', '/dev/sda']) {
    const out = join(root, disk.slice(5))
    execFileSync(
      talosctl,
      [
        'gen',
        'config',
        'c',
        'https://127.0.0.11:6443',
        '--with-secrets',
        join(root, 'secrets.yaml'),
        '--install-disk',
        disk,
        '--output',
        out,
        '--with-docs=false',
        '--with-examples=false',
      ],
      {stdio: 'ignore'},
    )
  }
})
afterAll(() => rmSync(root, {recursive: true, force: true}))

describe('talosctl simulator: disks', () => {
  it('Given a machine with /dev/sda only, Then `get disks --insecure` lists it, as ichor reads it', async () => {
    const r = sim(['get', 'disks', '--insecure', '--nodes', IP, '--endpoints', IP, '--output', 'yaml'])
    expect(r.status, r.stderr).toBe(0)
    expect(r.stdout).toMatch(/type: Disks\.block\.talos\.dev/)
    const saved = process.env.ICHOR_TALOSCTL
    process.env.ICHOR_TALOSCTL = join(root, 'talosctl')
    writeFileSync(process.env.ICHOR_TALOSCTL, `#!/bin/sh\nTALOS_SIM_STATE=${root} exec ${process.execPath} ${SIMULATOR} "$@"\n`, {mode: 0o755})
    try {
      expect(await listDisks({node: IP})).toEqual(['/dev/sda'])
    } finally {
      process.env.ICHOR_TALOSCTL = saved
    }
  })

  it('Given a config that installs onto /dev/nvme0n1, Then the apply is accepted but the machine stays in maintenance mode; onto /dev/sda it is configured', () => {
    const bad = sim(['apply-config', '--insecure', '--nodes', IP, '--endpoints', IP, '--file', join(root, 'nvme0n1', 'worker.yaml')])
    expect(bad.status, bad.stderr).toBe(0)
    expect(mode()).toMatchObject({mode: 'maintenance', installError: 'no disks matched the expression: disk.dev_path == "/dev/nvme0n1"'})
    expect(sim(['version', '--insecure', '--nodes', IP, '--endpoints', IP]).status).toBe(0)
    const good = sim(['apply-config', '--insecure', '--nodes', IP, '--endpoints', IP, '--file', join(root, 'sda', 'worker.yaml')])
    expect(good.status, good.stderr).toBe(0)
    expect(mode().mode).toBe('configured')
  })
})
