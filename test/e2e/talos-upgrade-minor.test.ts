// `ichor talos upgrade` across a minor and on one node, on restored converged clusters: a 3+1
// installed at Talos v1.13.9 (Kubernetes 1.36.0) upgraded to v1.14.1, and a one-node cluster.
// SIMULATED: the Talos side (test/sim/talosctl-simulator.mjs `upgrade`, `etcd status`); real:
// the apiserver, the controllers, kwok's Nodes, the Cilium DaemonSet, the Applications' health.
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {convergedCluster, CONVERGED_TIMEOUT_MS} from '../harness/converged.js'
import {jsonEvents, runIchor, type CliRun, type HarnessCluster} from '../harness/cluster.js'
import {talosUpgradeState} from '../support/talos-upgrade-state.js'

type Event = {event?: string; id?: string; status?: string; changed?: boolean; message?: string}

const show = (run: CliRun) => `${run.stderr.slice(-4000)}${run.stdout.slice(-2000)}`.replace(/ ?\n ›\s+/g, ' ')

async function clusterState(h: HarnessCluster, kube: Kube) {
  const {status, ...rest} = await talosUpgradeState(h, kube)
  return {...rest, recorded: status?.nodes}
}

describe('ichor talos upgrade from Talos v1.13.9 to v1.14.1 on a 3+1 cluster', () => {
  let h: HarnessCluster
  let kube: Kube
  let common: string[]
  const cli = (args: string[]) => runIchor(['talos', 'upgrade', ...args, ...common], h.env)

  beforeAll(async () => {
    h = await convergedCluster('3+1@v1.13.9')
    kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
    common = ['--kubeconfig', join(h.stateDir, 'kubeconfig'), '--state-dir', h.stateDir, '--timeout', '120']
  }, CONVERGED_TIMEOUT_MS)
  afterAll(async () => h?.stop())

  it('a target past the newest minor ichor supports is refused (exit 2)', async () => {
    const run = await cli(['--to', 'v1.15.0', '--yes', '--json'])
    expect(run.code, show(run)).toBe(2)
    expect(show(run)).toMatch(/--to: v1\.15\.0 is not supported/)
  }, 60_000)

  it('control planes one at a time, then the worker; every node at v1.14.1 and recorded; a rerun and an init rerun change nothing', async () => {
    const run = await cli(['--to', 'v1.14.1', '--yes', '--json'])
    expect(run.code, show(run)).toBe(0)
    // The order the nodes rebooted in: each control plane, then the worker, never two at once.
    const reboots = (jsonEvents(run) as Event[]).filter((e) => e.event === 'progress' && /: rebooting$/.test(e.message ?? '')).map((e) => e.id)
    expect(reboots).toEqual([...h.controlPlanes, ...h.workers].map((ip) => `upgrade-${ip}`))
    const after = await clusterState(h, kube)
    expect(after.tags).toEqual([...h.controlPlanes, ...h.workers].map((ip) => `${ip}=v1.14.1`).sort())
    expect(
      after.nodes.every((n) => /:True$/.test(n)),
      after.nodes.join(', '),
    ).toBe(true)
    expect(after.spec).toBe('v1.14.1')
    expect(after.recorded).toEqual(Object.fromEntries([...h.controlPlanes, ...h.workers].map((ip) => [ip, 'v1.14.1'])))
    const again = await cli(['--to', 'v1.14.1', '--yes', '--json'])
    expect(again.code, show(again)).toBe(0)
    expect((jsonEvents(again) as Event[]).find((e) => e.event === 'end')?.changed).toBe(false)
    const initArgs = h.initArgs.filter((a, i, all) => a !== '--talos-version' && all[i - 1] !== '--talos-version')
    const init = await runIchor([...initArgs, '--json'], h.env)
    expect(init.code, show(init)).toBe(0)
    expect(await clusterState(h, kube)).toEqual(after)
  }, 600_000)
})

describe('ichor talos upgrade on a one-node cluster', () => {
  let h: HarnessCluster
  let kube: Kube

  beforeAll(async () => {
    h = await convergedCluster('1')
    kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
  }, CONVERGED_TIMEOUT_MS)
  afterAll(async () => h?.stop())

  it('warns that the one node takes the cluster down while it reboots, upgrades it and waits for it', async () => {
    const run = await runIchor(
      // A timeout under the test's own: a wait that never ends fails naming what it waited for.
      ['talos', 'upgrade', '--to', 'v1.14.2', '--kubeconfig', join(h.stateDir, 'kubeconfig'), '--state-dir', h.stateDir, '--yes', '--timeout', '200', '-v'],
      h.env,
    )
    expect(run.code, show(run)).toBe(0)
    expect(show(run)).toMatch(/the cluster has one control plane: while \S+ reboots the Kubernetes API and every workload on it are down/)
    const after = await clusterState(h, kube)
    expect(after.tags).toEqual([`${h.controlPlanes[0]}=v1.14.2`])
    expect(
      after.nodes.every((n) => /:True$/.test(n)),
      after.nodes.join(', '),
    ).toBe(true)
    expect(after.spec).toBe('v1.14.2')
  }, 300_000)
})
