// `ichor talos status` on a restored converged cluster (1+1, Talos node simulator): each node's
// Talos and Kubernetes versions against the IchorInstallation's, in one talosctl call per kind
// of read; from this machine's state folder and from a laptop with only the key file; a node
// upgraded with talosctl alone is a warning, a node that does not answer is exit 1.
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import type {TalosStatusResult} from '../../src/lib/plans/talos-status.js'
import {runIchor, type HarnessCluster} from '../harness/cluster.js'
import {convergedCluster, CONVERGED_TIMEOUT_MS} from '../harness/converged.js'

describe('ichor talos status on the harness', () => {
  let c: HarnessCluster
  beforeAll(async () => void (c = await convergedCluster('1+1')), CONVERGED_TIMEOUT_MS)
  afterAll(() => c?.stop())

  const status = (args: string[], env = c.env) => runIchor(['talos', 'status', '--kubeconfig', join(c.stateDir, 'kubeconfig'), ...args], env)
  const report = (run: {stdout: string}) => JSON.parse(run.stdout) as TalosStatusResult
  const [cp, worker] = [() => c.controlPlanes[0]!, () => c.workers[0]!]

  it('every node at the recorded versions: exit 0, no problem; the versions in one talosctl call, the configs in one', async () => {
    const run = await status(['--state-dir', c.stateDir, '--json', '-v'])
    expect(run.code, run.stderr + run.stdout).toBe(0)
    const r = report(run)
    expect(r.healthy).toBe(true)
    expect(r.problems).toEqual([])
    expect(r.nodes).toEqual([
      {node: cp(), role: 'controlplane', talosVersion: r.recorded.talosVersion, kubernetesVersion: r.recorded.kubernetesVersion},
      {node: worker(), role: 'worker', talosVersion: r.recorded.talosVersion, kubernetesVersion: r.recorded.kubernetesVersion},
    ])
    const talosctl = run.stderr
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as {event?: string; argv?: string[]})
      .filter((e) => e.event === 'command' && /talosctl/.test(e.argv?.[0] ?? ''))
      .map((e) => e.argv!.slice(1).join(' '))
    const both = `--nodes ${cp()},${worker()} `
    expect(
      talosctl.filter((a) => a.startsWith('version ')),
      talosctl.join('\n'),
    ).toEqual([expect.stringContaining(both)])
    expect(
      talosctl.filter((a) => a.startsWith('get machineconfig ')),
      talosctl.join('\n'),
    ).toEqual([expect.stringContaining(both)])
    const table = await status(['--state-dir', c.stateDir])
    expect(table.code).toBe(0)
    expect(table.stdout).toMatch(new RegExp(`all answer;[^]*\\n${cp().replace(/\./g, '\\.')} +controlplane +${r.recorded.talosVersion}`))
  })

  it('from a laptop with no state folder: the sealed copy in the cluster, opened with the key file, gives the same report', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'ichor-other-laptop-'))
    try {
      const run = await status(['--json'], {...c.env, XDG_STATE_HOME: empty, ICHOR_STATE_PASSPHRASE_FILE: c.stateKeyFile})
      expect(run.code, run.stderr).toBe(0)
      expect(report(run).nodes.map((n) => n.talosVersion)).toEqual([report(run).recorded.talosVersion, report(run).recorded.talosVersion])
      const without = await status(['--json'], {...c.env, XDG_STATE_HOME: empty, ICHOR_STATE_PASSPHRASE_FILE: ''})
      expect(without.code).toBe(2)
      expect(without.stdout + without.stderr).toMatch(/--state-passphrase-file/)
    } finally {
      rmSync(empty, {recursive: true, force: true})
    }
  })

  it('a worker upgraded with talosctl alone is a warning naming it (exit 0); the worker down is exit 1 naming it, the control plane still shown', async () => {
    const declared = join(c.nodes.stateDir, 'nodes.json')
    const nodes = JSON.parse(readFileSync(declared, 'utf8')) as {ip: string; talosVersion: string}[]
    for (const n of nodes) if (n.ip === worker()) n.talosVersion = 'v1.14.2'
    writeFileSync(declared, JSON.stringify(nodes))
    const upgraded = await status(['--state-dir', c.stateDir, '--json'])
    expect(upgraded.code, upgraded.stderr).toBe(0)
    const r = report(upgraded)
    expect(r.problems).toEqual([
      expect.objectContaining({
        severity: 'warning',
        what: `${worker()} runs Talos v1.14.2; the IchorInstallation records ${r.recorded.talosVersion} (changed outside ichor)`,
      }),
    ])
    // A machine rebooting answers nothing until it is back (the simulator's rebootUntil).
    const saved = join(c.nodes.stateDir, `node-${worker()}.json`)
    writeFileSync(saved, JSON.stringify({...(JSON.parse(readFileSync(saved, 'utf8')) as object), rebootUntil: Date.now() + 3_600_000}))
    const down = await status(['--state-dir', c.stateDir, '--json'])
    expect(down.code).toBe(1)
    const d = report(down)
    expect(d.healthy).toBe(false)
    expect(d.problems.map((p) => p.what)).toEqual([
      expect.stringMatching(new RegExp(`^worker ${worker().replace(/\./g, '\\.')} does not answer: .*connection refused`)),
    ])
    expect(d.nodes[0]).toMatchObject({node: cp(), talosVersion: r.recorded.talosVersion})
  })
})
