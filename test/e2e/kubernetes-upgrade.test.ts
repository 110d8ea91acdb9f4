// `ichor kubernetes upgrade` on one harness cluster after a full `ichor init` at Kubernetes
// 1.32.0 (Talos v1.14.1, Cilium 1.18.0: tested on 1.30 to 1.33). SIMULATED: the Talos side of
// `talosctl upgrade-k8s` (test/sim/talosctl-simulator.mjs: the version lives in the node
// configs' image tags; the harness's real kube-apiserver stays v1.36.3). Real: the apiserver,
// controllers, helm records, the inventory ConfigMap, and the objects Talos's sync would prune.
import {spawnSync} from 'node:child_process'
import {existsSync, readFileSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {getObject, type KubeObject} from '../../src/lib/kube/objects.js'
import {kubernetesVersionOfConfig} from '../../src/lib/talos/versions.js'
import {readInstallation} from '../../src/lib/state/installation.js'
import {runIchor, startHarnessCluster, jsonEvents, jsonResult, type CliRun, type HarnessCluster} from '../harness/cluster.js'
import {nodeConfig} from '../harness/dump.js'
import {inlineManifestsPatch} from '../sim/talos-fixtures.js'

type Event = {event?: string; id?: string; index?: number; status?: string; changed?: boolean; message?: string; error?: string}
const INVENTORY = '/api/v1/namespaces/kube-system/configmaps/talos-bootstrap-manifests-inventory'
const CILIUM_CONFIG_KEY = 'kube-system_cilium-config__ConfigMap'
const STEPS = [
  'lease',
  'check-versions',
  'talos-dry-run',
  'talos-upgrade-k8s',
  'verify-cilium-objects',
  'verify-inventory',
  'wait-operator',
  'wait-agents',
  'wait-applications',
  'record-version',
]

describe('ichor kubernetes upgrade on the harness (Talos upgrade-k8s simulated)', () => {
  let h: HarnessCluster
  let kube: Kube
  let common: string[]
  const cli = (args: string[], opts?: Parameters<typeof runIchor>[2]) => runIchor(['k8s', 'upgrade', ...args, ...common], h.env, opts)
  const events = (run: CliRun) => jsonEvents(run) as Event[]
  const end = (run: CliRun) => events(run).find((e) => e.event === 'end')
  const failure = (run: CliRun) => {
    const e = jsonResult<{error: {message: string; hint?: string}}>(run).error
    return `${e.message}\n${e.hint ?? ''}`
  }
  const show = (run: CliRun) => `${run.stderr}${run.stdout.slice(-2000)}`

  /** Each node's image tags, the recorded version, Cilium's identity, the inventory's keys and the Lease. */
  const state = async () => {
    await h.nodes.manifestRunsDone()
    const images = Object.fromEntries(
      [...h.controlPlanes, ...h.workers].map((ip) => [
        ip,
        [...nodeConfig(h, ip).matchAll(/image: (?:registry\.k8s\.io|ghcr\.io\/siderolabs)\/(kube-[a-z-]+|kubelet):v(\S+)/g)]
          .map((m) => `${m[1]}:${m[2]}`)
          .sort(),
      ]),
    )
    const [cr, cm, ds, inventory] = await Promise.all([
      readInstallation(kube),
      getObject(kube, {apiVersion: 'v1', kind: 'ConfigMap', namespace: 'kube-system', name: 'cilium-config'}),
      getObject(kube, {apiVersion: 'apps/v1', kind: 'DaemonSet', namespace: 'kube-system', name: 'cilium'}),
      kube.request<KubeObject & {data?: Record<string, string>}>('GET', INVENTORY),
    ])
    return {images, recorded: cr?.status?.kubernetes, cilium: [cm?.metadata.uid, ds?.metadata.uid], inventory: Object.keys(inventory.data ?? {}).sort()}
  }
  /** The simulator's log of `get machineconfig` calls, one line of nodes per call. */
  const configReads = () => {
    const log = join(h.nodes.stateDir, 'machineconfig-reads.log')
    return existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean) : []
  }
  const readsPerNode = (lines: string[]) => {
    const counts: Record<string, number> = {}
    for (const node of lines.flatMap((l) => l.split(','))) counts[node] = (counts[node] ?? 0) + 1
    return counts
  }
  const versionOf = (ip: string) => kubernetesVersionOfConfig(nodeConfig(h, ip))
  const setInventoryKey = (key: string, present: boolean) =>
    kube.request('PATCH', INVENTORY, {body: {data: {[key]: present ? '' : null}}, contentType: 'application/merge-patch+json'})

  beforeAll(async () => {
    h = await startHarnessCluster()
    const init = await runIchor([...h.initArgs, '--kubernetes-version', '1.32.0'], h.env)
    if (init.code !== 0) throw new Error(`init failed: ${init.stderr}`)
    kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
    common = ['--kubeconfig', join(h.stateDir, 'kubeconfig'), '--state-dir', h.stateDir, '--timeout', '120']
  }, 600_000)
  afterAll(async () => h?.stop())

  it("a two-minor jump, a target outside Talos v1.14's range and a bad version are refused before anything runs (exit 2, nothing changed)", async () => {
    const before = await state()
    expect(h.controlPlanes.map(versionOf)).toEqual(['1.32.0'])
    for (const [to, message] of [
      ['1.34.0', /--to: 1\.32\.0 to 1\.34\.0 skips Kubernetes 1\.33: Kubernetes upgrades one minor at a time/],
      ['1.38.0', /--to: Kubernetes 1\.38\.0 does not run on Talos v1\.14\.1 \(accepted: 1\.32\.0 to 1\.37\.x\)/],
      ['1.33', /--to: "1\.33" is not a Kubernetes release version/],
    ] as const) {
      const run = await cli(['--to', to, '--yes', '--json'])
      expect(run.code, show(run)).toBe(2)
      expect(failure(run)).toMatch(message)
      expect(
        events(run).find((e) => e.event === 'start'),
        'no plan started',
      ).toBeUndefined()
    }
    expect(await state()).toEqual(before)
  }, 120_000)

  it('an inventory that still lists a Cilium object (made by hand) is refused naming it, before talosctl changes anything', async () => {
    await setInventoryKey(CILIUM_CONFIG_KEY, true)
    const before = await state()
    const run = await cli(['--to', '1.33.0', '--yes', '--json'])
    expect(run.code, show(run)).toBe(1)
    expect(failure(run)).toMatch(
      /talosctl upgrade-k8s would prune or change 1 object\(s\) Talos must leave alone: Pruned ConfigMap\/kube-system\/cilium-config \(the Cilium release kube-system\/cilium\)/,
    )
    expect(
      events(run)
        .filter((e) => e.event === 'task' && e.status === 'failed')
        .map((e) => e.id),
    ).toEqual(['talos-dry-run'])
    expect(await state()).toEqual(before)
    await setInventoryKey(CILIUM_CONFIG_KEY, false)
  }, 180_000)

  it("a worker still on Talos v1.12 (the legacy sync) and a Cilium object in the control plane's manifests: the replacement is refused naming it, before talosctl changes anything", async () => {
    // Below Talos 1.13 talosctl v1.14.1 syncs with go-kubernetes manifests.SyncWithLog: its dry run
    // once read as "no changes" while the real run puts the manifest's object in place of the live one.
    const [cp, worker] = [h.controlPlanes[0]!, h.workers[0]!]
    const talos = (args: string[]) => h.nodes.run([...args, '--nodes', cp, '--talosconfig', join(h.stateDir, 'talosconfig')])
    const declared = join(h.nodes.stateDir, 'nodes.json')
    const original = readFileSync(declared, 'utf8')
    const nodes = JSON.parse(original) as {ip: string; talosVersion: string}[]
    writeFileSync(declared, JSON.stringify(nodes.map((n) => (n.ip === worker ? {...n, talosVersion: 'v1.12.11'} : n))))
    const manifest = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cilium-config\n  namespace: kube-system\ndata:\n  operator: mine\n'
    const patch = join(h.nodes.workDir, 'legacy-sync.yaml')
    writeFileSync(patch, inlineManifestsPatch('v1.14.1', [{name: 'operator-config', contents: manifest}]))
    try {
      const patched = await talos(['patch', 'machineconfig', '--mode', 'no-reboot', '--patch', `@${patch}`])
      expect(patched.exitCode, patched.stderr).toBe(0)
      const before = await state()
      const run = await cli(['--to', '1.33.0', '--yes', '--json'])
      expect(run.code, show(run)).toBe(1)
      expect(failure(run)).toMatch(
        /talosctl upgrade-k8s would prune or change 1 object\(s\) Talos must leave alone: replaced ConfigMap\/kube-system\/cilium-config \(the Cilium release kube-system\/cilium\)/,
      )
      expect(failure(run)).toMatch(/a node runs Talos below 1\.13.*upgrade Talos first \(ichor talos upgrade\)/)
      expect(
        events(run)
          .filter((e) => e.event === 'task' && e.status === 'failed')
          .map((e) => e.id),
      ).toEqual(['talos-dry-run'])
      expect(await state()).toEqual(before)
      const cm = await getObject<KubeObject & {data?: Record<string, string>}>(kube, {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        namespace: 'kube-system',
        name: 'cilium-config',
      })
      expect(cm?.data?.operator).toBeUndefined()
    } finally {
      writeFileSync(declared, original)
      await talos([
        'patch',
        'machineconfig',
        '--mode',
        'no-reboot',
        '--patch',
        'apiVersion: v1alpha1\nkind: KubeInlineManifestConfig\nname: operator-config\n$patch: delete\n',
      ])
      await h.nodes.manifestRunsDone()
      await setInventoryKey(CILIUM_CONFIG_KEY, false) // the v1.14 control plane's run backfilled it
    }
  }, 180_000)

  let upgraded: Awaited<ReturnType<typeof state>>
  it('1.32.0 to 1.33.0 (inside both ranges) converges: every node at 1.33.0, Cilium intact, the version recorded; a rerun changes nothing', async () => {
    const before = await state()
    const readsBefore = configReads()
    const run = await cli(['--to', '1.33.0', '--yes', '--json'])
    expect(run.code, show(run)).toBe(0)
    // Issue 38 point 12: through the run's shared reads, each control plane's config is read once
    // before talosctl upgrade-k8s writes to it and once after (what the nodes run now, to confirm
    // the step); plain reads asked 5 times.
    expect(readsPerNode(configReads().slice(readsBefore.length))).toEqual({[h.controlPlanes[0]!]: 2})
    expect(events(run).find((e) => e.event === 'start')).toMatchObject({tasks: STEPS.map((id) => expect.objectContaining({id}))})
    expect(
      events(run).some((e) => e.event === 'progress' && e.id === 'talos-upgrade-k8s' && /update kube-apiserver: 1\.32\.0 -> 1\.33\.0/.test(e.message ?? '')),
    ).toBe(true)
    upgraded = await state()
    expect(upgraded.images).toEqual({
      [h.controlPlanes[0]!]: ['kube-apiserver:1.33.0', 'kube-controller-manager:1.33.0', 'kube-proxy:1.33.0', 'kube-scheduler:1.33.0', 'kubelet:1.33.0'],
      [h.workers[0]!]: ['kubelet:1.33.0'],
    })
    expect(upgraded.recorded).toEqual({version: '1.33.0', upgradedTo: '1.33.0'})
    expect(upgraded.cilium).toEqual(before.cilium)
    expect(upgraded.inventory).toEqual(before.inventory)
    const again = await cli(['--to', '1.33.0', '--yes', '--json'])
    expect(again.code, show(again)).toBe(0)
    expect(end(again)?.changed).toBe(false)
    expect(await state()).toEqual(upgraded)
    // The cluster now runs 1.33.0: an init rerun keeps it (the guide's crash advice must not
    // downgrade it), and one that names the old version is refused naming the upgrade command.
    const rerun = await runIchor([...h.initArgs, '--json'], h.env)
    expect(rerun.code, show(rerun)).toBe(0)
    expect(await state()).toEqual(upgraded)
    const older = await runIchor([...h.initArgs, '--kubernetes-version', '1.32.0', '--json'], h.env)
    expect(older.code, show(older)).toBe(2)
    expect(show(older)).toMatch(/--kubernetes-version.*1\.33\.0.*never downgraded; leave --kubernetes-version out to keep 1\.33\.0/s)
    expect(await state()).toEqual(upgraded)
  }, 360_000)

  it("from 1.33 the next minor is outside Cilium 1.18's tested range: refused naming the cni upgrades; --allow-untested says what nobody tested", async () => {
    const run = await cli(['--to', '1.34.0', '--yes', '--json'])
    expect(run.code, show(run)).toBe(2)
    expect(failure(run)).toMatch(/Cilium 1\.18 is tested on Kubernetes 1\.30 to 1\.33, not 1\.34/)
    expect(failure(run)).toMatch(/ichor cni upgrade --to 1\.18\.12, then ichor cni upgrade --to 1\.19\.6.*--allow-untested/)
    const dry = await cli(['--to', '1.34.0', '--allow-untested', '--dry-run'])
    expect(dry.code, show(dry)).toBe(0)
    expect(dry.stderr).toMatch(/nobody tested Cilium 1\.18 on Kubernetes 1\.34/)
    expect(await state()).toEqual(upgraded)
    const status = await runIchor(['cni', 'status', '-o', 'json', ...common.slice(0, 4)], h.env)
    expect(JSON.parse(status.stdout).kubernetes).toMatchObject({version: '1.33.0', next: '1.34', needsCiliumUpgrade: true})
  }, 120_000)

  it('SIGKILL at every boundary of 1.33.0 to 1.33.1 (inside talosctl too), each run resuming the last: the reruns converge, and one more changes nothing', async () => {
    const boundaries: [string, (e: Event) => boolean][] = [
      ...STEPS.slice(1, 4).map((id): [string, (e: Event) => boolean] => [`before ${id}`, (e) => e.event === 'task' && e.id === id && e.status === 'checking']),
      [
        'inside talosctl upgrade-k8s, after its first config patch',
        (e) => e.event === 'progress' && e.id === 'talos-upgrade-k8s' && /machine configuration patched/.test(e.message ?? ''),
      ],
      ...STEPS.slice(4).map((id): [string, (e: Event) => boolean] => [`before ${id}`, (e) => e.event === 'task' && e.id === id && e.status === 'checking']),
    ]
    for (const [name, killOn] of boundaries) {
      const killed = await cli(['--to', '1.33.1', '--yes', '--json'], {killOn})
      expect(killed.signal, `${name}: ${show(killed)}`).toBe('SIGKILL')
    }
    const rerun = await cli(['--to', '1.33.1', '--yes', '--json'])
    expect(rerun.code, show(rerun)).toBe(0)
    const after = await state()
    expect(after.images[h.controlPlanes[0]!]).toEqual([
      'kube-apiserver:1.33.1',
      'kube-controller-manager:1.33.1',
      'kube-proxy:1.33.1',
      'kube-scheduler:1.33.1',
      'kubelet:1.33.1',
    ])
    expect(after.images[h.workers[0]!]).toEqual(['kubelet:1.33.1'])
    expect(after.recorded).toEqual({version: '1.33.1', upgradedTo: '1.33.1'})
    expect({cilium: after.cilium, inventory: after.inventory}).toEqual({cilium: upgraded.cilium, inventory: upgraded.inventory})
    const again = await cli(['--to', '1.33.1', '--yes', '--json'])
    expect(again.code, show(again)).toBe(0)
    expect(end(again)?.changed).toBe(false)
    expect(events(again).filter((e) => e.event === 'task' && e.status === 'done' && e.id !== 'lease')).toEqual([])
  }, 300_000)

  it('the control: the same hand-made inventory key, then plain talosctl upgrade-k8s prunes the Cilium object', async () => {
    await setInventoryKey(CILIUM_CONFIG_KEY, true)
    const r = spawnSync(
      h.env.ICHOR_TALOSCTL!,
      ['upgrade-k8s', '--to', '1.33.1', '--nodes', h.controlPlanes[0]!, '--endpoints', h.controlPlanes[0]!, '--talosconfig', join(h.stateDir, 'talosconfig')],
      {env: h.env, encoding: 'utf8'},
    )
    expect(r.status, r.stderr).toBe(0)
    expect(await getObject(kube, {apiVersion: 'v1', kind: 'ConfigMap', namespace: 'kube-system', name: 'cilium-config'})).toBeUndefined()
  }, 60_000)
})
