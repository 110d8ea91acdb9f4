// `ichor node remove`, and `node replace` of a control plane, on a restored converged 3+1
// cluster. SIMULATED: the Talos side (test/sim/talosctl-simulator.mjs `etcd members`, `etcd
// leave` and `reset`, and a new member's learner phase, following Talos
// v1.14's etcd and reset handlers: a reset node boots into maintenance mode and kwok stops
// playing its Node). Real: the apiserver, the Eviction API and PodDisruptionBudgets, the
// controllers that recreate what the drain evicted, the scheduler, kwok's heartbeats, the
// Cilium DaemonSet's count and the Applications' health.
import {existsSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {readInstallation, writeInstallationSpec} from '../../src/lib/state/installation.js'
import {jsonEvents, jsonResult, runIchor, type CliRun, type HarnessCluster} from '../harness/cluster.js'
import {convergedCluster, CONVERGED_TIMEOUT_MS} from '../harness/converged.js'
import {killTreeWhen, progressOf, stepStarts} from '../harness/kill.js'
import {untaintControlPlanes} from '../support/control-plane-taint.js'
import {declareMachine} from '../sim/simulated-nodes.js'

type Event = {event?: string; id?: string; status?: string; changed?: boolean; message?: string}
type NodeList = {
  items: {metadata: {name: string}; spec?: {unschedulable?: boolean}; status?: {addresses?: {type: string; address: string}[]}}[]
}

describe('ichor node remove on the harness (Talos nodes simulated)', () => {
  let h: HarnessCluster
  let kube: Kube
  let common: string[]
  const cli = (args: string[], opts?: Parameters<typeof runIchor>[2]) => runIchor(['node', 'remove', ...args, ...common], h.env, opts)
  const events = (run: CliRun) => jsonEvents(run) as Event[]
  const failure = (run: CliRun) => {
    const e = jsonResult<{error: {message: string; hint?: string}}>(run).error
    return `${e.message}\n${e.hint ?? ''}`
  }
  const show = (run: CliRun) => `${run.stderr.slice(-4000)}${run.stdout.slice(-2000)}`.replace(/ ?\n ›\s+/g, ' ')
  const nodeFile = (ip: string) => {
    const path = join(h.nodes.stateDir, `node-${ip}.json`)
    return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as {mode: string; etcdLeft?: boolean}) : {mode: 'maintenance'}
  }
  const talosconfig = () => join(h.stateDir, 'talosconfig')
  const members = async (ip: string) => {
    const r = await h.nodes.run(['etcd', 'members', '--nodes', ip, '--endpoints', ip, '--talosconfig', talosconfig()])
    return {...r, ips: [...r.stdout.matchAll(/https:\/\/([\d.]+):2380/g)].map((m) => m[1]).sort()}
  }
  /** What a removal changes: the spec's nodes, the Nodes and their addresses, the machines' modes, etcd's members. */
  const state = async () => {
    const cr = await readInstallation(kube)
    const nodes = (await kube.request<NodeList>('GET', '/api/v1/nodes')).items
      .map((n) => `${n.status?.addresses?.find((a) => a.type === 'InternalIP')?.address}${n.spec?.unschedulable ? ':cordoned' : ''}`)
      .sort()
    const all = [...h.controlPlanes, ...h.workers]
    return {
      spec: {controlPlanes: cr?.spec.talos.controlPlanes, workers: cr?.spec.talos.workers},
      nodes,
      modes: all.map((ip) => `${ip}=${nodeFile(ip).mode}`),
      members: (await members(h.controlPlanes[0]!)).ips,
    }
  }

  beforeAll(async () => {
    h = await convergedCluster('3+1@v1.13.9')
    kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
    common = ['--kubeconfig', join(h.stateDir, 'kubeconfig'), '--state-dir', h.stateDir, '--timeout', '60']
  }, CONVERGED_TIMEOUT_MS)
  afterAll(async () => h?.stop())

  it('refuses an unknown address, the endpoint node, the last worker while the control planes take no workloads, and a removal that breaks etcd quorum (exit 2, nothing touched)', async () => {
    const before = await state()
    const [cp1, cp2, cp3] = h.controlPlanes as [string, string, string]
    writeFileSync(join(h.nodes.stateDir, `etcd-errors-${cp2}`), 'NOSPACE alarm')
    try {
      for (const [args, message] of [
        [['10.99.0.1'], /10\.99\.0\.1 is not a node of this cluster \(its nodes: /],
        [['not an address'], /ADDR: /],
        [[cp1], new RegExp(`${cp1.replaceAll('.', '\\.')} is the cluster endpoint \\(https://`)],
        [[h.workers[0]!], /is the last worker and the control planes keep workloads off/],
        [[cp3], /would leave etcd without quorum: 2 member\(s\) stay, 2 must be healthy, 1 is \(.*NOSPACE alarm\)/],
      ] as const) {
        const run = await cli([...args, '--yes', '--json'])
        expect(run.code, show(run)).toBe(2)
        expect(failure(run)).toMatch(message)
        expect(events(run).find((e) => e.event === 'start')).toBeUndefined()
      }
    } finally {
      rmSync(join(h.nodes.stateDir, `etcd-errors-${cp2}`), {force: true})
    }
    expect(await state()).toEqual(before)
    const dry = await cli([cp3, '--dry-run'])
    expect(dry.code, show(dry)).toBe(0)
    expect(show(dry)).toMatch(/etcd-leave-|out of etcd/)
    expect(await state()).toEqual(before)
  }, 180_000)

  it('a control plane: SIGKILL at every boundary (mid-drain and mid-reset too), each run resuming the last; the rerun converges, the member is gone, the machine in maintenance mode, an init rerun without it changes nothing', async () => {
    const cp3 = h.controlPlanes[2]!
    // A per-node patch of the node to remove (as `init --node-patch` stores one): it goes with the node.
    const withPatch = (await readInstallation(kube))!
    const nodePatch = {node: cp3, source: 'inline', yaml: 'machine:\n  nodeLabels:\n    rack: r3\n'}
    const machineConfig = {patches: [], controlPlanePatches: [], workerPatches: [], ...withPatch.spec.talos.machineConfig, nodePatches: [nodePatch]}
    await writeInstallationSpec(kube, {...withPatch.spec, talos: {...withPatch.spec.talos, machineConfig}}, {readAt: withPatch})
    expect((await readInstallation(kube))?.spec.talos.machineConfig?.nodePatches).toEqual([nodePatch])
    const boundaries: [string, (e: Event) => boolean][] = [
      ['before check-removal', stepStarts('check-removal')],
      ['before the drain', stepStarts(`drain-${cp3}`)],
      ['inside the drain, after the cordon', progressOf(`drain-${cp3}`, /cordoned/)],
      ['before etcd leave', stepStarts(`etcd-leave-${cp3}`)],
      ['before the reset', stepStarts(`reset-${cp3}`)],
      ['while the node resets', progressOf(`reset-${cp3}`, /resetting/)],
      ['before the Node is deleted', stepStarts(`delete-node-${cp3}`)],
      ['before wait-applications', stepStarts('wait-applications')],
      ['before forget', stepStarts(`forget-${cp3}`)],
    ]
    for (const [name, when] of boundaries) {
      const killed = await cli([cp3, '--yes', '--json'], killTreeWhen(when))
      expect(killed.signal, `${name}: ${show(killed)}`).toBe('SIGKILL')
    }
    const rerun = await cli([cp3, '--yes', '--json'])
    expect(rerun.code, show(rerun)).toBe(0)
    const after = await state()
    expect(after.spec.controlPlanes).toEqual(h.controlPlanes.slice(0, 2))
    expect(after.nodes.some((n) => n.startsWith(cp3))).toBe(false)
    expect(after.modes).toContain(`${cp3}=maintenance`)
    expect(after.members).toEqual(h.controlPlanes.slice(0, 2).sort())
    const cr = await readInstallation(kube)
    expect(cr?.status?.talos?.removing).toBeUndefined()
    expect(cr?.spec.talos.machineConfig?.nodePatches).toBeUndefined()
    // Done: the address is no longer the cluster's.
    const again = await cli([cp3, '--yes', '--json'])
    expect(again.code, show(again)).toBe(2)
    expect(failure(again)).toMatch(/is not a node of this cluster/)
    // init without the removed address changes nothing.
    const withoutFlag: string[] = []
    for (let i = 0; i < h.initArgs.length; i++) {
      if (h.initArgs[i] === '--control-plane' && h.initArgs[i + 1] === cp3) i++
      else withoutFlag.push(h.initArgs[i]!)
    }
    expect(withoutFlag).toHaveLength(h.initArgs.length - 2)
    const init = await runIchor([...withoutFlag, '--json'], h.env)
    expect(init.code, show(init)).toBe(0)
    expect(
      events(init)
        .filter((e) => e.event === 'task' && e.status === 'done')
        .map((e) => e.id),
      show(init),
    ).toEqual([])
    expect(events(init).find((e) => e.event === 'end')?.changed).toBe(false)
    expect(await state()).toEqual(after)
  }, 600_000)

  it('a worker: a PodDisruptionBudget that forbids the eviction stops the drain at --timeout (exit 1, named; the node is not reset); once it allows it, the removal finishes', async () => {
    const worker = h.workers[0]!
    // The control planes take workloads, as a cluster without workers has them: the worker may go.
    await untaintControlPlanes(kube)
    const nodeName = (await kube.request<NodeList>('GET', '/api/v1/nodes')).items.find((n) => n.status?.addresses?.some((a) => a.address === worker))!.metadata
      .name
    const labels = {app: 'pinned'}
    await kube.request('POST', '/apis/apps/v1/namespaces/default/deployments', {
      body: {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: {name: 'pinned', namespace: 'default'},
        spec: {
          replicas: 1,
          selector: {matchLabels: labels},
          template: {metadata: {labels}, spec: {nodeSelector: {'kubernetes.io/hostname': nodeName}, containers: [{name: 'c', image: 'example.invalid/c:1'}]}},
        },
      },
    })
    await kube.request('POST', '/apis/policy/v1/namespaces/default/poddisruptionbudgets', {
      body: {
        apiVersion: 'policy/v1',
        kind: 'PodDisruptionBudget',
        metadata: {name: 'keep-pinned', namespace: 'default'},
        spec: {minAvailable: 1, selector: {matchLabels: labels}},
      },
    })
    // The disruption controller computes what the budget allows once the pod runs.
    type Pdb = {status?: {currentHealthy?: number; disruptionsAllowed?: number}}
    let pdb: Pdb = {}
    for (let i = 0; i < 200 && pdb.status?.currentHealthy !== 1; i++) {
      await new Promise((r) => setTimeout(r, 300))
      pdb = await kube.request<Pdb>('GET', '/apis/policy/v1/namespaces/default/poddisruptionbudgets/keep-pinned')
    }
    expect(pdb.status).toMatchObject({currentHealthy: 1, disruptionsAllowed: 0})
    const blocked = await runIchor(['node', 'remove', worker, '--yes', '--json', ...common.slice(0, 4), '--timeout', '12'], h.env)
    expect(blocked.code, show(blocked)).toBe(1)
    expect(failure(blocked)).toMatch(/the drain of \S+ did not finish within 12 ?s: 1 pod\(s\) cannot be evicted: default\/pinned-\S+ \(.*keep-pinned/)
    expect(failure(blocked)).toMatch(/a PodDisruptionBudget that allows it\), or give the drain longer with --timeout/)
    expect(nodeFile(worker).mode).toBe('configured')
    await kube.request('DELETE', '/apis/policy/v1/namespaces/default/poddisruptionbudgets/keep-pinned')
    const killed = await cli([worker, '--yes', '--json'], killTreeWhen(stepStarts(`reset-${worker}`)))
    expect(killed.signal, show(killed)).toBe('SIGKILL')
    const run = await cli([worker, '--yes', '--json'])
    expect(run.code, show(run)).toBe(0)
    const after = await state()
    expect(after.spec.workers).toEqual([])
    expect(after.nodes.some((n) => n.startsWith(worker))).toBe(false)
    expect(after.modes).toContain(`${worker}=maintenance`)
  }, 600_000)

  it('node replace of a control plane: the new member joins as a learner and OLD leaves etcd only once it votes; killed at the etcd boundaries, the rerun converges', async () => {
    const [cp1, cp2] = h.controlPlanes as [string, string]
    const fresh = '127.0.0.24'
    declareMachine(h.nodes, {ip: fresh, role: 'controlplane', talosVersion: 'v1.13.9'})
    // Talos promotes a learner once its log caught up: here 4 s after it joined.
    const env = {...h.env, TALOS_SIM_LEARNER_MS: '4000'}
    const replace = (opts?: Parameters<typeof runIchor>[2]) => runIchor(['node', 'replace', cp2, fresh, '--yes', '--json', ...common], env, opts)
    const learnerSeen = await replace(killTreeWhen(stepStarts(`drain-${cp2}`)))
    expect(learnerSeen.signal, show(learnerSeen)).toBe('SIGKILL')
    const seen = events(learnerSeen)
    expect(seen.filter((e) => e.event === 'progress' && e.id === `etcd-member-${fresh}`).map((e) => e.message)).toContain(`${fresh} is an etcd learner`)
    expect(seen.find((e) => e.event === 'task' && e.id === `etcd-member-${fresh}` && e.status === 'done')).toBeDefined()
    expect((await members(cp1)).ips).toEqual([cp1, cp2, fresh].sort())
    const killed = await replace(killTreeWhen(stepStarts(`reset-${cp2}`)))
    expect(killed.signal, show(killed)).toBe('SIGKILL')
    expect((await members(cp1)).ips).toEqual([cp1, fresh].sort())
    const run = await replace()
    expect(run.code, show(run)).toBe(0)
    const cr = await readInstallation(kube)
    expect(cr?.spec.talos.controlPlanes).toEqual([cp1, fresh])
    expect(nodeFile(cp2).mode).toBe('maintenance')
    expect(nodeFile(fresh).mode).toBe('configured')
    expect((await members(fresh)).ips).toEqual([cp1, fresh].sort())
  }, 600_000)

  it('a control plane whose machine died: refused without --unreachable (exit 2, named); with it, its member goes through the control plane that stays and its Node is deleted; killed before each step, the rerun converges', async () => {
    const cp1 = h.controlPlanes[0]!
    const dead = '127.0.0.24' // the control plane the test before brought in
    const off = await h.nodes.run(['shutdown', '--force', '--nodes', dead, '--endpoints', dead, '--talosconfig', talosconfig()])
    expect(off.exitCode, off.stderr).toBe(0)
    expect((await members(cp1)).ips).toEqual([cp1, dead].sort())
    const refused = await cli([dead, '--yes', '--json'])
    expect(refused.code, show(refused)).toBe(2)
    expect(failure(refused)).toMatch(/127\.0\.0\.24 does not answer .*\n.*add --unreachable/)
    for (const step of [`remove-member-${dead}`, `delete-node-${dead}`, `forget-${dead}`]) {
      const killed = await cli([dead, '--unreachable', '--yes', '--json'], killTreeWhen(stepStarts(step)))
      expect(killed.signal, `${step}: ${show(killed)}`).toBe('SIGKILL')
    }
    const run = await cli([dead, '--unreachable', '--yes', '--json'])
    expect(run.code, show(run)).toBe(0)
    expect(events(run).some((e) => e.id?.startsWith('drain-') || e.id?.startsWith('reset-'))).toBe(false)
    expect((await members(cp1)).ips).toEqual([cp1])
    expect((await readInstallation(kube))?.spec.talos.controlPlanes).toEqual([cp1])
    expect((await state()).nodes.some((n) => n.startsWith(dead))).toBe(false)
  }, 300_000)

  it('the simulator, as Talos v1.14: etcd leave takes exactly one control plane; the last member can neither leave nor be removed (etcd: not enough started members); an unknown member ID is NotFound', async () => {
    const cp1 = h.controlPlanes[0]!
    const etcd = (args: string[]) => h.nodes.run(['etcd', ...args, '--nodes', cp1, '--endpoints', cp1, '--talosconfig', talosconfig()])
    const two = await h.nodes.run(['etcd', 'leave', '--nodes', `${cp1},127.0.0.24`, '--endpoints', cp1, '--talosconfig', talosconfig()])
    expect(two.exitCode).toBe(1)
    expect(two.stderr).toMatch(/command "etcd leave" requires exactly one node \(got 2\)/)
    const last = await etcd(['leave'])
    expect(last.exitCode).toBe(1)
    expect(last.stderr).toMatch(/failed to leave cluster: failed to remove member \d+: etcdserver: re-configuration failed due to not enough started members/)
    const [own] = (await etcd(['members'])).stdout
      .split('\n')
      .slice(1)
      .map((line) => line.split(/\s+/)[1])
    const removeLast = await etcd(['remove-member', own!])
    expect(removeLast.exitCode).toBe(1)
    expect(removeLast.stderr).toMatch(/failed to remove member: etcdserver: re-configuration failed due to not enough started members/)
    const unknown = await etcd(['remove-member', 'abcdef0123456789'])
    expect(unknown.exitCode).toBe(1)
    expect(unknown.stderr).toMatch(/code = NotFound desc = etcdserver: member not found/)
    expect((await members(cp1)).ips).toEqual([cp1])
  }, 120_000)
})
