// `ichor talos upgrade` on a restored converged 1+1 cluster (Talos v1.14.1). SIMULATED: the
// Talos side (test/sim/talosctl-simulator.mjs `upgrade`, following talosctl v1.14's client:
// cordon and drain through the real eviction API, the reboot with the Node NotReady and kwok no
// longer playing it, the new version after the boot, the old one when the image cannot boot;
// `etcd status`). Real: the apiserver, the controllers that recreate what the drain evicted,
// the scheduler, kwok's Node heartbeats, the Cilium DaemonSet and the Applications' health.
import {readFileSync, rmSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {convergedCluster, CONVERGED_TIMEOUT_MS} from '../harness/converged.js'
import {jsonEvents, jsonResult, runIchor, type CliRun, type HarnessCluster} from '../harness/cluster.js'
import {killTreeWhen, progressOf, stepStarts} from '../harness/kill.js'
import {talosUpgradeState} from '../support/talos-upgrade-state.js'

type Event = {event?: string; id?: string; index?: number; status?: string; changed?: boolean; message?: string}

describe('ichor talos upgrade on the harness (Talos nodes simulated)', () => {
  let h: HarnessCluster
  let kube: Kube
  let common: string[]
  const cli = (args: string[], opts?: Parameters<typeof runIchor>[2]) => runIchor(['talos', 'upgrade', ...args, ...common], h.env, opts)
  const events = (run: CliRun) => jsonEvents(run) as Event[]
  const end = (run: CliRun) => events(run).find((e) => e.event === 'end')
  const failure = (run: CliRun) => {
    const e = jsonResult<{error: {message: string; hint?: string}}>(run).error
    return `${e.message}\n${e.hint ?? ''}`
  }
  // oclif folds a warning over lines (" ›   " on each): unfolded, so a message matches whole.
  const show = (run: CliRun) => `${run.stderr.slice(-4000)}${run.stdout.slice(-2000)}`.replace(/ ?\n ›\s+/g, ' ')
  const nodeFile = (ip: string) =>
    JSON.parse(readFileSync(join(h.nodes.stateDir, `node-${ip}.json`), 'utf8')) as {bootedVersion?: string; lastBoot?: {image: string}}

  const state = () => talosUpgradeState(h, kube)

  beforeAll(async () => {
    h = await convergedCluster('1+1')
    kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
    common = ['--kubeconfig', join(h.stateDir, 'kubeconfig'), '--state-dir', h.stateDir, '--timeout', '120']
  }, CONVERGED_TIMEOUT_MS)
  afterAll(async () => h?.stop())

  it('a downgrade, an unsupported minor, an unknown --node and an unhealthy etcd member are refused before anything runs (exit 2, nothing touched)', async () => {
    const before = await state()
    const cp = h.controlPlanes[0]!
    writeFileSync(join(h.nodes.stateDir, `etcd-errors-${cp}`), 'NOSPACE alarm')
    try {
      for (const [args, message] of [
        [['--to', 'v1.14.0'], /--to: v1\.14\.0 is older than the v1\.14\.1 node .* runs: ichor never downgrades Talos\ntalosctl rollback/],
        [['--to', 'v1.15.0'], /--to: v1\.15\.0 is not supported/],
        [['--to', 'v1.14.2', '--node', '10.99.0.1'], /--node: 10\.99\.0\.1 is not a node of this cluster \(its nodes: /],
        [['--to', 'v1.14.2'], new RegExp(`etcd is not healthy on every control plane.*${cp.replaceAll('.', '\\.')}: member \\S+ reports NOSPACE alarm`)],
      ] as const) {
        const run = await cli([...args, '--yes', '--json'])
        expect(run.code, show(run)).toBe(2)
        expect(failure(run)).toMatch(message)
        expect(
          events(run).find((e) => e.event === 'start'),
          'no plan started',
        ).toBeUndefined()
      }
    } finally {
      rmSync(join(h.nodes.stateDir, `etcd-errors-${cp}`), {force: true})
    }
    expect(await state()).toEqual(before)
  }, 120_000)

  it('--dry-run shows each node with the installer image it was installed with, at the new tag; nothing changes', async () => {
    const before = await state()
    const run = await cli(['--to', 'v1.14.2', '--dry-run'])
    expect(run.code, show(run)).toBe(0)
    expect(show(run)).toMatch(/upgrade-10\.|Upgrade control plane/)
    expect(show(run)).toMatch(/factory\.talos\.dev\/metal-installer\/[0-9a-f]+:v1\.14\.2/)
    expect(await state()).toEqual(before)
  }, 120_000)

  it('SIGKILL at every boundary of v1.14.1 to v1.14.2 (mid-drain and mid-reboot too), each run resuming the last: the reruns converge, one more changes nothing', async () => {
    const [cp, worker] = [h.controlPlanes[0]!, h.workers[0]!]
    const boundaries: [string, (e: Event) => boolean][] = [
      ['before check-nodes', stepStarts('check-nodes')],
      [`before upgrade-${cp}`, stepStarts(`upgrade-${cp}`)],
      [`while ${cp} reboots`, progressOf(`upgrade-${cp}`, /rebooting/)],
      [`inside the drain of ${worker}, after its cordon`, progressOf(`upgrade-${worker}`, /node cordoned/)],
      [`while ${worker} reboots`, progressOf(`upgrade-${worker}`, /rebooting/)],
      ['before wait-operator', stepStarts('wait-operator')],
      ['before wait-applications', stepStarts('wait-applications')],
      ['before record-version', stepStarts('record-version')],
    ]
    for (const [name, when] of boundaries) {
      const killed = await cli(['--to', 'v1.14.2', '--yes', '--json'], killTreeWhen(when))
      expect(killed.signal, `${name}: ${show(killed)}`).toBe('SIGKILL')
    }
    const rerun = await cli(['--to', 'v1.14.2', '--yes', '--json'])
    expect(rerun.code, show(rerun)).toBe(0)
    const after = await state()
    expect(after.tags).toEqual([`${cp}=v1.14.2`, `${worker}=v1.14.2`].sort())
    expect(
      after.nodes.every((n) => /:True$/.test(n)),
      after.nodes.join(', '),
    ).toBe(true)
    expect(after.spec).toBe('v1.14.2')
    expect(after.status).toEqual({nodes: {[cp]: 'v1.14.2', [worker]: 'v1.14.2'}, uncordon: []})
    // Each node was rebooted once, with the image it was installed with at the new tag.
    for (const ip of [cp, worker]) expect(nodeFile(ip).lastBoot?.image).toMatch(/^factory\.talos\.dev\/metal-installer\/[0-9a-f]+:v1\.14\.2$/)
    const again = await cli(['--to', 'v1.14.2', '--yes', '--json'])
    expect(again.code, show(again)).toBe(0)
    expect(end(again)?.changed).toBe(false)
    expect(await state()).toEqual(after)
    // An init rerun keeps the upgraded version; one naming the old version is refused.
    const initArgs = h.initArgs.filter((a, i, all) => a !== '--talos-version' && all[i - 1] !== '--talos-version')
    const init = await runIchor([...initArgs, '--json'], h.env)
    expect(init.code, show(init)).toBe(0)
    expect(await state()).toEqual(after)
    const older = await runIchor([...initArgs, '--talos-version', 'v1.14.1', '--json'], h.env)
    expect(older.code, show(older)).toBe(2)
    expect(show(older)).toMatch(/--talos-version.*Talos is never downgraded; leave --talos-version out to keep v1\.14\.2/s)
  }, 600_000)

  it('a node that boots its old slot stops the run (exit 1, named); nothing further is upgraded; the spec keeps its version', async () => {
    const [cp, worker] = [h.controlPlanes[0]!, h.workers[0]!]
    const image = nodeFile(cp).lastBoot!.image.replace(/:v1\.14\.2$/, ':v1.14.3')
    writeFileSync(join(h.nodes.stateDir, 'unbootable-images'), `${image}\n`)
    try {
      const run = await cli(['--to', 'v1.14.3', '--yes', '--json'])
      expect(run.code, show(run)).toBe(1)
      expect(failure(run)).toMatch(new RegExp(`node ${cp.replaceAll('.', '\\.')} came back on v1\\.14\\.2, not v1\\.14\\.3: Talos booted its previous slot`))
      const after = await state()
      expect(after.tags).toEqual([`${cp}=v1.14.2`, `${worker}=v1.14.2`].sort())
      expect(after.spec).toBe('v1.14.2')
      expect(events(run).some((e) => e.event === 'task' && e.id === `upgrade-${worker}` && e.status === 'done')).toBe(false)
    } finally {
      rmSync(join(h.nodes.stateDir, 'unbootable-images'), {force: true})
    }
  }, 300_000)

  it('a node upgraded with talosctl alone is recorded, not upgraded again; the others are brought to it', async () => {
    const [cp, worker] = [h.controlPlanes[0]!, h.workers[0]!]
    const image = nodeFile(worker).lastBoot!.image.replace(/:v1\.14\.2$/, ':v1.14.4')
    const byHand = await h.nodes.run(['upgrade', '--image', image, '--nodes', worker, '--endpoints', worker, '--talosconfig', join(h.stateDir, 'talosconfig')])
    expect(byHand.exitCode, byHand.stderr).toBe(0)
    const bootedByHand = readFileSync(join(h.nodes.stateDir, `node-${worker}.json`), 'utf8')
    // cni status names the node and the command that records it.
    const status = await runIchor(['cni', 'status', '-o', 'json', ...common.slice(0, 4)], h.env)
    const problems = (JSON.parse(status.stdout) as {problems: {severity: string; what: string; fix: string}[]}).problems
    expect(problems, status.stderr).toContainEqual({
      severity: 'warning',
      what: `${worker} runs Talos v1.14.4; the IchorInstallation records v1.14.2 (changed outside ichor)`,
      fix: expect.stringMatching(/ichor talos upgrade --to v1\.14\.4 records the version these nodes run/),
    })
    const dry = await cli(['--to', 'v1.14.4', '--dry-run'])
    expect(dry.code, show(dry)).toBe(0)
    expect(show(dry)).toMatch(
      new RegExp(`${worker.replaceAll('.', '\\.')} already runs v1\\.14\\.4 \\(upgraded outside ichor\\): recorded, not upgraded again`),
    )
    const run = await cli(['--to', 'v1.14.4', '--yes', '--json'])
    expect(run.code, show(run)).toBe(0)
    expect(events(run).some((e) => e.event === 'progress' && e.id === `upgrade-${worker}` && /rebooting/.test(e.message ?? ''))).toBe(false)
    expect(readFileSync(join(h.nodes.stateDir, `node-${worker}.json`), 'utf8')).toBe(bootedByHand)
    const after = await state()
    expect(after.tags).toEqual([`${cp}=v1.14.4`, `${worker}=v1.14.4`].sort())
    expect(after.spec).toBe('v1.14.4')
  }, 300_000)
  it('the simulator, as talosctl v1.14 upgrades a node: the Node cordoned and NotReady while it reboots, then Ready, uncordoned, at the new version', async () => {
    const worker = h.workers[0]!
    const image = nodeFile(worker).lastBoot!.image.replace(/:v1\.14\.4$/, ':v1.14.5')
    const seen = new Set<string>()
    let done = false
    const upgrade = h.nodes
      .run(['upgrade', '--image', image, '--nodes', worker, '--endpoints', worker, '--talosconfig', join(h.stateDir, 'talosconfig')])
      .finally(() => (done = true))
    while (!done) {
      for (const n of (await state()).nodes) seen.add(n)
      await new Promise((r) => setTimeout(r, 200))
    }
    const r = await upgrade
    expect(r.exitCode, r.stderr).toBe(0)
    expect(
      [...seen].some((n) => /:False:cordoned$/.test(n)),
      [...seen].join(', '),
    ).toBe(true)
    const after = await state()
    expect(after.tags).toContain(`${worker}=v1.14.5`)
    expect(
      after.nodes.every((n) => /:True$/.test(n)),
      after.nodes.join(', '),
    ).toBe(true)
  }, 120_000)

  it("the simulator's drain goes through the eviction API: a PodDisruptionBudget that allows no eviction fails it after --drain-timeout, the node not rebooted", async () => {
    const worker = h.workers[0]!
    const ns = 'default'
    const labels = {app: 'pdb-held'}
    await kube.request('POST', `/apis/apps/v1/namespaces/${ns}/deployments`, {
      body: {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: {name: 'pdb-held'},
        spec: {
          replicas: 1,
          selector: {matchLabels: labels},
          template: {
            metadata: {labels},
            spec: {nodeSelector: {'kubernetes.io/hostname': `talos-${worker.replaceAll('.', '-')}`}, containers: [{name: 'c', image: 'example.invalid/c:1'}]},
          },
        },
      },
    })
    await kube.request('POST', `/apis/policy/v1/namespaces/${ns}/poddisruptionbudgets`, {
      body: {apiVersion: 'policy/v1', kind: 'PodDisruptionBudget', metadata: {name: 'pdb-held'}, spec: {minAvailable: 1, selector: {matchLabels: labels}}},
    })
    const readyPdb = async () => {
      const pdb = await kube.request<{status?: {currentHealthy?: number}}>('GET', `/apis/policy/v1/namespaces/${ns}/poddisruptionbudgets/pdb-held`)
      return (pdb.status?.currentHealthy ?? 0) >= 1
    }
    for (let i = 0; i < 300 && !(await readyPdb()); i++) await new Promise((r) => setTimeout(r, 200))
    expect(await readyPdb(), 'the PDB sees its pod healthy').toBe(true)
    const before = (await state()).tags
    const image = nodeFile(worker).lastBoot!.image.replace(/:v1\.14\.5$/, ':v1.14.6')
    const r = await h.nodes.run([
      'upgrade',
      '--image',
      image,
      '--drain-timeout',
      '3s',
      '--nodes',
      worker,
      '--endpoints',
      worker,
      '--talosconfig',
      join(h.stateDir, 'talosconfig'),
    ])
    expect(r.exitCode).toBe(1)
    expect(r.stderr).toMatch(/error draining node .*global timeout reached: 3s/)
    expect((await state()).tags).toEqual(before)
  }, 120_000)
})
