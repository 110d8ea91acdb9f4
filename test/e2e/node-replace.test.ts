// `ichor node replace` on a restored converged 1+1 cluster, with new machines declared beside
// it in maintenance mode. SIMULATED: the Talos side (test/sim/talosctl-simulator.mjs: a machine
// in maintenance mode takes any config, `etcd`, `reset`). Real: `talosctl gen config` and
// `validate` (the real talosctl), the apiserver, the Eviction API, the controllers that
// recreate what the drain evicted and the Cilium agent on the new Node, the scheduler, kwok's
// heartbeats, the Applications' health.
import {existsSync, readFileSync} from 'node:fs'
import {join} from 'node:path'
import {parseAllDocuments} from 'yaml'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {readInstallation, writeInstallationSpec} from '../../src/lib/state/installation.js'
import {jsonEvents, jsonResult, runIchor, type CliRun, type HarnessCluster} from '../harness/cluster.js'
import {convergedCluster, CONVERGED_TIMEOUT_MS} from '../harness/converged.js'
import {killTreeWhen, progressOf, stepStarts} from '../harness/kill.js'
import {declareMachine} from '../sim/simulated-nodes.js'

type Event = {event?: string; id?: string; status?: string; changed?: boolean; message?: string}
type NodeList = {items: {metadata: {name: string}; spec?: {unschedulable?: boolean}; status?: {addresses?: {type: string; address: string}[]}}[]}
type SimNodeFile = {mode: string; config?: string | null}

describe('ichor node replace on the harness (Talos nodes simulated)', () => {
  let h: HarnessCluster
  let kube: Kube
  let common: string[]
  const cli = (args: string[], opts?: Parameters<typeof runIchor>[2]) => runIchor(['node', 'replace', ...args, ...common], h.env, opts)
  const events = (run: CliRun) => jsonEvents(run) as Event[]
  const failure = (run: CliRun) => {
    const e = jsonResult<{error: {message: string; hint?: string}}>(run).error
    return `${e.message}\n${e.hint ?? ''}`
  }
  const show = (run: CliRun) => `${run.stderr.slice(-4000)}${run.stdout.slice(-2000)}`.replace(/ ?\n ›\s+/g, ' ')
  const nodeFile = (ip: string): SimNodeFile => {
    const path = join(h.nodes.stateDir, `node-${ip}.json`)
    return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as SimNodeFile) : {mode: 'maintenance'}
  }
  const spare = (ip: string, disks?: string[]) => declareMachine(h.nodes, {ip, role: 'worker', talosVersion: 'v1.14.1', ...(disks ? {disks} : {})})
  /** What a replacement changes: the spec's nodes and patches, the Nodes, the machines' modes. */
  const state = async (machines: string[]) => {
    const cr = await readInstallation(kube)
    const nodes = (await kube.request<NodeList>('GET', '/api/v1/nodes')).items
      .map((n) => `${n.status?.addresses?.find((a) => a.type === 'InternalIP')?.address}${n.spec?.unschedulable ? ':cordoned' : ''}`)
      .sort()
    return {
      spec: {controlPlanes: cr?.spec.talos.controlPlanes, workers: cr?.spec.talos.workers, nodePatches: cr?.spec.talos.machineConfig?.nodePatches},
      nodes,
      modes: machines.map((ip) => `${ip}=${nodeFile(ip).mode}`),
    }
  }

  beforeAll(async () => {
    h = await convergedCluster('1+1')
    kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
    common = ['--kubeconfig', join(h.stateDir, 'kubeconfig'), '--state-dir', h.stateDir, '--timeout', '60']
  }, CONVERGED_TIMEOUT_MS)
  afterAll(async () => h?.stop())

  it('refuses OLD unknown, OLD = NEW, the endpoint node, a NEW that lacks the install disk or is already the other role (exit 2), a NEW that does not answer (exit 1), nothing touched', async () => {
    const [cp] = h.controlPlanes as [string]
    const worker = h.workers[0]!
    spare('127.0.0.45', ['/dev/nvme0n1'])
    spare('127.0.0.46')
    const machines = [cp, worker, '127.0.0.45', '127.0.0.46']
    const before = await state(machines)
    for (const [args, message] of [
      [['10.99.0.1', '127.0.0.46'], /10\.99\.0\.1 is not a node of this cluster \(its nodes: /],
      [[worker, worker], /OLD and NEW are both/],
      [['not an address', '127.0.0.46'], /OLD: /],
      [[cp, '127.0.0.46'], /is the cluster endpoint \(https:\/\//],
      [[worker, '127.0.0.99'], /127\.0\.0\.99 does not answer as a Talos node/],
      [[worker, '127.0.0.45'], /\/dev\/sda \(from Talos's default \(--install-disk\)\) is not a disk of 127\.0\.0\.45; its disks: \/dev\/nvme0n1/],
      [[worker, cp], /is already a control plane of this cluster: it cannot take the place of worker/],
    ] as const) {
      const run = await cli([...args, '--yes', '--json'])
      // An address that does not answer is a failure (exit 1), as an API server that does not.
      expect(run.code, show(run)).toBe(args[1] === '127.0.0.99' ? 1 : 2)
      expect(failure(run)).toMatch(message)
      expect(events(run).find((e) => e.event === 'start')).toBeUndefined()
    }
    expect(await state(machines)).toEqual(before)
    const dry = await cli([worker, '127.0.0.46', '--dry-run'])
    expect(dry.code, show(dry)).toBe(0)
    expect(show(dry)).toMatch(/configure-127\.0\.0\.46|Configure 127\.0\.0\.46/)
    expect(await state(machines)).toEqual(before)
  }, 180_000)

  it('a worker: SIGKILL at every boundary, each run resuming the last; the rerun converges (NEW Ready with its Cilium agent and its moved patch, OLD in maintenance mode), a rerun is a no-op, an init rerun naming NEW changes nothing', async () => {
    const old = h.workers[0]!
    const fresh = '127.0.0.46'
    spare(fresh)
    const machines = [old, fresh]
    // A per-node patch of the node that goes (as `init --node-patch` stores one): --move-patches gives it to NEW.
    const cr = (await readInstallation(kube))!
    const nodePatch = {node: old, source: 'inline', yaml: 'apiVersion: v1alpha1\nkind: HostnameConfig\nhostname: w2\nauto: "off"\n'}
    const machineConfig = {patches: [], controlPlanePatches: [], workerPatches: [], ...cr.spec.talos.machineConfig, nodePatches: [nodePatch]}
    await writeInstallationSpec(kube, {...cr.spec, talos: {...cr.spec.talos, machineConfig}}, {readAt: cr})
    const boundaries: [string, (e: Event) => boolean][] = [
      ['before check-replace', stepStarts('check-replace')],
      ['before NEW is recorded', stepStarts(`add-${fresh}`)],
      ['before NEW is configured', stepStarts(`configure-${fresh}`)],
      ['while NEW comes up', progressOf(`configure-${fresh}`, /configured; waiting/)],
      ['before NEW is Ready', stepStarts(`ready-${fresh}`)],
      ['before the drain', stepStarts(`drain-${old}`)],
      ['before the reset', stepStarts(`reset-${old}`)],
      ['while OLD resets', progressOf(`reset-${old}`, /resetting/)],
      ['before the Node is deleted', stepStarts(`delete-node-${old}`)],
      ['before wait-applications', stepStarts('wait-applications')],
      ['before forget', stepStarts(`forget-${old}`)],
    ]
    for (const [name, when] of boundaries) {
      const killed = await cli([old, fresh, '--move-patches', '--yes', '--json'], killTreeWhen(when))
      expect(killed.signal, `${name}: ${show(killed)}`).toBe('SIGKILL')
    }
    const rerun = await cli([old, fresh, '--move-patches', '--yes', '--json'])
    expect(rerun.code, show(rerun)).toBe(0)
    const after = await state(machines)
    expect(after.spec).toEqual({controlPlanes: h.controlPlanes, workers: [fresh], nodePatches: [{...nodePatch, node: fresh}]})
    expect(after.nodes.some((n) => n.startsWith(`${old}`))).toBe(false)
    expect(after.nodes).toContain(fresh)
    expect(after.modes).toEqual([`${old}=maintenance`, `${fresh}=configured`])
    // NEW runs this cluster's config: its secrets (the same cluster CA), its moved patch, no bootstrap Cilium.
    const config = parseAllDocuments(nodeFile(fresh).config!).map((d) => d.toJS() as Record<string, any>)
    const v1 = config.find((d) => !d.kind)!
    const cpConfig = parseAllDocuments(nodeFile(h.controlPlanes[0]!).config!).map((d) => d.toJS() as Record<string, any>)
    const cpV1 = cpConfig.find((d) => !d.kind)!
    // The same machine CA and join token as the nodes init configured: one secrets bundle.
    expect({ca: v1.machine.ca.crt, token: v1.machine.token}).toEqual({ca: cpV1.machine.ca.crt, token: cpV1.machine.token})
    expect(v1.machine.ca.crt).toBeTruthy()
    expect(v1.machine.type).toBe('worker')
    expect(config.find((d) => d.kind === 'HostnameConfig')).toMatchObject({hostname: 'w2'})
    expect(config.some((d) => d.kind === 'KubeInlineManifestConfig')).toBe(false)
    // Done: a rerun says so and changes nothing.
    const again = await cli([old, fresh, '--move-patches', '--yes', '--json'])
    expect(again.code, show(again)).toBe(0)
    expect(events(again).find((e) => e.event === 'end')?.changed).toBe(false)
    // init naming NEW instead of OLD changes nothing.
    const initArgs = h.initArgs.map((a, i) => (a === old && h.initArgs[i - 1] === '--worker' ? fresh : a))
    expect(initArgs).toContain(fresh)
    const configs = () => [...h.controlPlanes, fresh].map((ip) => nodeFile(ip).config)
    const nodeConfigs = configs()
    const init = await runIchor([...initArgs, '--json'], h.env)
    expect(init.code, show(init)).toBe(0)
    // Only this machine's copy of the configs is rendered again (their inputs name NEW's patch now)
    // and its local controlplane.yaml loses the bootstrap Cilium again; nothing reaches a node.
    expect(
      events(init)
        .filter((e) => e.event === 'task' && e.status === 'done')
        .map((e) => e.id)
        .filter((id) => id !== 'talos-configs' && id !== 'talos-handover'),
      show(init),
    ).toEqual([])
    expect(
      events(init)
        .filter((e) => e.event === 'progress' && e.id === 'talos-handover' && /control plane/.test(e.message ?? ''))
        .map((e) => e.message),
    ).toEqual(['inline entry removed from 0 control plane(s)'])
    expect(configs()).toEqual(nodeConfigs)
    expect(await state(machines)).toEqual(after)
  }, 900_000)

  it('a worker whose machine died: refused without --unreachable; with it, NEW joins and the dead Node is deleted without a drain or a reset; --unreachable on a machine that answers is refused', async () => {
    const dead = '127.0.0.46' // the worker the test before brought in
    const fresh = '127.0.0.47'
    spare(fresh)
    const talosconfig = join(h.stateDir, 'talosconfig')
    const off = await h.nodes.run(['shutdown', '--force', '--nodes', dead, '--endpoints', dead, '--talosconfig', talosconfig])
    expect(off.exitCode, off.stderr).toBe(0)
    const refused = await cli([dead, fresh, '--yes', '--json'])
    expect(refused.code, show(refused)).toBe(2)
    expect(failure(refused)).toMatch(/127\.0\.0\.46 does not answer .*\n.*add --unreachable/)
    const killed = await cli([dead, fresh, '--unreachable', '--yes', '--json'], killTreeWhen(stepStarts(`delete-node-${dead}`)))
    expect(killed.signal, show(killed)).toBe('SIGKILL')
    const run = await cli([dead, fresh, '--unreachable', '--yes', '--json'])
    expect(run.code, show(run)).toBe(0)
    expect(events(run).some((e) => e.id?.startsWith('drain-') || e.id?.startsWith('reset-'))).toBe(false)
    const after = await state([dead, fresh])
    expect(after.spec.workers).toEqual([fresh])
    expect(after.nodes.some((n) => n.startsWith(dead))).toBe(false)
    expect(after.nodes).toContain(fresh)
    expect(after.modes).toEqual([`${dead}=off`, `${fresh}=configured`])
    spare('127.0.0.48')
    const answers = await cli([fresh, '127.0.0.48', '--unreachable', '--yes', '--json'])
    expect(answers.code, show(answers)).toBe(2)
    expect(failure(answers)).toMatch(/127\.0\.0\.47 answers \(configured\): --unreachable is for a machine that is gone/)
  }, 600_000)
})
