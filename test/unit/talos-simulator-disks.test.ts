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
      const disks = await listDisks({node: IP})
      expect(disks.map((d) => d.dev_path)).toEqual(['/dev/sda'])
      // As a real node's Disk resource: the udev links, model and serial (block/disk.go, v1.14.1).
      expect(disks[0]).toMatchObject({
        id: 'sda',
        model: 'QEMU HARDDISK',
        transport: 'sata',
        symlinks: expect.arrayContaining(['/dev/disk/by-id/ata-QEMU_HARDDISK_QM00001']),
      })
    } finally {
      process.env.ICHOR_TALOSCTL = saved
    }
  })

  it('Given a config that installs onto /dev/nvme0n1, Then the apply is accepted but the machine stays in maintenance mode; onto /dev/sda it is configured', () => {
    const bad = sim(['apply-config', '--insecure', '--nodes', IP, '--endpoints', IP, '--file', join(root, 'nvme0n1', 'worker.yaml')])
    expect(bad.status, bad.stderr).toBe(0)
    expect(mode()).toMatchObject({mode: 'maintenance', installError: 'no disk matched the selector'})
    expect(sim(['version', '--insecure', '--nodes', IP, '--endpoints', IP]).status).toBe(0)
    const good = sim(['apply-config', '--insecure', '--nodes', IP, '--endpoints', IP, '--file', join(root, 'sda', 'worker.yaml')])
    expect(good.status, good.stderr).toBe(0)
    expect(mode().mode).toBe('configured')
  })

  it('Given a config with machine.install beside its UnattendedInstallConfig, Then the node refuses it (V1Alpha1ConflictValidate, v1.14.1)', () => {
    rmSync(join(root, `node-${IP}.json`)) // a machine in maintenance mode again
    const both = join(root, 'both.yaml')
    writeFileSync(both, readFileSync(join(root, 'sda', 'worker.yaml'), 'utf8').replace(/^machine:\n/m, 'machine:\n    install:\n        disk: /dev/sda\n'))
    const r = sim(['apply-config', '--insecure', '--nodes', IP, '--endpoints', IP, '--file', both])
    expect(r.status).not.toBe(0)
    expect(r.stderr).toContain('UnattendedInstallConfig config is incompatible with v1alpha1 config (.machine.install)')
  })
})
