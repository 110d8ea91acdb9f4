// The kube-proxy switch on one harness cluster after a full `ichor init` (default mode:
// replaced): consent and --dry-run, `cni kube-proxy restore` and `replace` end to end, a
// DaemonSet kept unready in the middle (half done, named by `cni status`, finished by a
// rerun), and SIGKILL at each step boundary in the middle of the switch, both directions,
// each rerun compared with an uninterrupted run by state and canonical dump.
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {readReleaseRecord, valuesHash} from '../../src/lib/helm/release-record.js'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {getObject, type KubeObject} from '../../src/lib/kube/objects.js'
import {readWorkloadRollout} from '../../src/lib/kube/reads.js'
import {readInstallation} from '../../src/lib/state/installation.js'
import {kubeProxyEnabledIn} from '../../src/lib/talos/kube-proxy.js'
import {CONTROL_PLANE, WORKER, runIchor, type CliRun, type HarnessCluster, jsonEvents} from '../harness/cluster.js'
import {convergedCluster, CONVERGED_TIMEOUT_MS} from '../harness/converged.js'
import {ownedBy} from '../harness/pod-start-simulator.js'
import {cniDump, nodeConfig} from '../harness/dump.js'
import {UPSTREAM} from '../support/upstream.js'

type Event = {event?: string; id?: string; index?: number; status?: string; changed?: boolean; tasks?: {id: string}[]}

const RESTORE_STEPS = [
  'lease',
  'validate-values',
  'record-mode',
  'talos-enable-kube-proxy',
  'wait-kube-proxy',
  'helm-upgrade',
  'wait-operator',
  'wait-agents',
  'verify-cilium-config',
  'record-values',
]
const REPLACE_STEPS = [
  'lease',
  'validate-values',
  'record-mode',
  'helm-upgrade',
  'wait-operator',
  'wait-agents',
  'verify-cilium-config',
  'talos-disable-kube-proxy',
  'remove-kube-proxy',
  'record-values',
]

describe('ichor cni kube-proxy replace|restore on the harness', () => {
  let h: HarnessCluster
  let kube: Kube
  let common: string[]
  const chart = ['--cilium-chart', UPSTREAM.ciliumChart]
  const cli = (args: string[], opts?: Parameters<typeof runIchor>[2]) =>
    runIchor([...args, ...common, ...(args[0] === 'cni' && args[1] === 'status' ? [] : chart)], h.env, opts)
  const events = (run: CliRun) => jsonEvents(run) as Event[]
  const end = (run: CliRun) => events(run).find((e) => e.event === 'end')
  const order = (run: CliRun) =>
    events(run)
      .find((e) => e.event === 'start')!
      .tasks!.map((t) => t.id)

  /** Everything the switch touches, minus Helm revision numbers (a rerun after a kill may count differently). */
  const switchState = async () => {
    // Talos's manifest runs end on their own timer: what a switch leaves is what is there once they have.
    await h.nodes.manifestRunsDone()
    const [cr, release, cm, ds, sa, crb, inventory] = await Promise.all([
      readInstallation(kube),
      readReleaseRecord(kube, 'cilium', 'kube-system'),
      getObject<KubeObject & {data?: Record<string, string>}>(kube, {apiVersion: 'v1', kind: 'ConfigMap', namespace: 'kube-system', name: 'cilium-config'}),
      readWorkloadRollout(kube, 'DaemonSet', 'kube-system', 'kube-proxy'),
      getObject(kube, {apiVersion: 'v1', kind: 'ServiceAccount', namespace: 'kube-system', name: 'kube-proxy'}),
      getObject(kube, {apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', name: 'kube-proxy'}),
      getObject<KubeObject & {data?: Record<string, string>}>(kube, {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        namespace: 'kube-system',
        name: 'talos-bootstrap-manifests-inventory',
      }),
    ])
    const {releaseRevision: _revision, ...cniStatus} = cr!.status!.cni
    return {
      spec: cr!.spec,
      cniStatus,
      release: {status: release!.status, config: release!.config, hash: valuesHash(release!.config)},
      ciliumConfig: cm!.data!['kube-proxy-replacement'],
      talos: {controlPlane: nodeConfig(h, CONTROL_PLANE), worker: nodeConfig(h, WORKER)},
      kubeProxy: {daemonSet: ds && {ready: ds.ready, rolledOut: ds.rolledOut}, serviceAccount: Boolean(sa), clusterRoleBinding: Boolean(crb)},
      inventoryKeys: Object.keys(inventory?.data ?? {}).sort(),
    }
  }

  beforeAll(async () => {
    h = await convergedCluster('1+1')
    kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
    common = ['--kubeconfig', join(h.stateDir, 'kubeconfig'), '--state-dir', h.stateDir]
  }, CONVERGED_TIMEOUT_MS)
  afterAll(async () => h?.stop())

  let replacedState: Awaited<ReturnType<typeof switchState>>
  let restoredState: Awaited<ReturnType<typeof switchState>>
  /** The canonical Cilium dumps an uninterrupted restore and replace left, revisions counted from the one before. */
  let restoredDump: Awaited<ReturnType<typeof cniDump>>
  let replacedDump: Awaited<ReturnType<typeof cniDump>>
  const revision = async () => (await readReleaseRecord(kube, 'cilium', 'kube-system'))!.revision

  it('after init (replaced): no kube-proxy anywhere; without a terminal a real run needs --yes (exit 2); --dry-run changes nothing', async () => {
    replacedState = await switchState()
    expect(replacedState).toMatchObject({
      spec: {cni: {kubeProxy: 'replaced'}},
      ciliumConfig: 'true',
      release: {config: {kubeProxyReplacement: true, k8sServicePort: 7445}},
    })
    expect(replacedState.kubeProxy).toEqual({daemonSet: undefined, serviceAccount: false, clusterRoleBinding: false})
    expect(kubeProxyEnabledIn(replacedState.talos.controlPlane)).toBe(false)

    const refused = await cli(['cni', 'kube-proxy', 'restore'])
    expect(refused.code, refused.stderr).toBe(2)
    expect(`${refused.stdout}${refused.stderr}`).toMatch(/--yes/)
    const dry = await cli(['cni', 'kube-proxy', 'restore', '--dry-run', '--json'])
    expect(dry.code, dry.stderr).toBe(0)
    expect(order(dry)).toEqual(RESTORE_STEPS)
    expect(
      events(dry)
        .filter((e) => e.status === 'would-run')
        .map((e) => e.id),
    ).toEqual(expect.arrayContaining(['record-mode', 'talos-enable-kube-proxy', 'wait-kube-proxy', 'helm-upgrade']))
    expect(await switchState()).toEqual(replacedState)
    const revision = (await readReleaseRecord(kube, 'cilium', 'kube-system'))!.revision
    expect((await readReleaseRecord(kube, 'cilium', 'kube-system'))!.revision).toBe(revision)
  }, 120_000)

  it('restore: kube-proxy on in Talos and ready before Cilium stops replacing it; cilium-config, machine configs, DaemonSet and CR agree; a rerun changes nothing', async () => {
    const base = await revision()
    const run = await cli(['cni', 'kube-proxy', 'restore', '--yes', '--json'])
    expect(run.code, run.stderr + run.stdout.slice(-2000)).toBe(0)
    expect(order(run)).toEqual(RESTORE_STEPS)
    const done = events(run)
      .filter((e) => e.event === 'task' && e.status === 'done')
      .map((e) => e.id)
    expect(done.indexOf('wait-kube-proxy') === -1 || done.indexOf('wait-kube-proxy') < done.indexOf('helm-upgrade')).toBe(true)
    expect(done.indexOf('talos-enable-kube-proxy')).toBeLessThan(done.indexOf('helm-upgrade'))

    restoredState = await switchState()
    restoredDump = await cniDump(kube, base)
    expect(restoredDump).toMatchObject({
      release: {revision: '+1', status: 'deployed'},
      history: ['+0 superseded', '+1 deployed'],
      cr: {status: {releaseRevision: '+1'}},
      ciliumConfig: {'kube-proxy-replacement': 'false'},
    })
    expect(restoredState).toMatchObject({
      spec: {cni: {kubeProxy: 'kube-proxy'}},
      ciliumConfig: 'false',
      release: {status: 'deployed', config: {kubeProxyReplacement: false}},
    })
    expect(restoredState.release.config).not.toHaveProperty('k8sServiceHost')
    expect(restoredState.cniStatus.appliedValuesHash).toBe(restoredState.release.hash)
    expect(kubeProxyEnabledIn(restoredState.talos.controlPlane)).toBe(true)
    expect(restoredState.kubeProxy).toEqual({daemonSet: {ready: 2, rolledOut: true}, serviceAccount: true, clusterRoleBinding: true})
    expect(restoredState.inventoryKeys).toEqual(
      expect.arrayContaining(['kube-system_kube-proxy_apps_DaemonSet', '_kube-proxy_rbac.authorization.k8s.io_ClusterRoleBinding']),
    )

    const status = await cli(['cni', 'status', '-o', 'json'])
    expect(status.code, status.stdout).toBe(0)
    expect(JSON.parse(status.stdout).kubeProxy).toMatchObject({
      desired: 'kube-proxy',
      release: false,
      ciliumConfig: 'false',
      consistent: true,
      talosNodes: [{node: CONTROL_PLANE, enabled: true}],
    })

    const again = await cli(['cni', 'kube-proxy', 'restore', '--yes', '--json'])
    expect(again.code, again.stderr).toBe(0)
    expect(end(again)?.changed).toBe(false)
    expect(await switchState()).toEqual(restoredState)
  }, 300_000)

  it('replace: Cilium replaces kube-proxy and is verified before Talos turns kube-proxy off; the DaemonSet and its inventory entries are gone', async () => {
    const base = await revision()
    const run = await cli(['cni', 'kube-proxy', 'replace', '--yes', '--json', '-v'])
    expect(run.code, run.stderr + run.stdout.slice(-2000)).toBe(0)
    expect(order(run)).toEqual(REPLACE_STEPS)
    // Each node's config is read once before its patch and once after it (the check), never per
    // step; Talos v1.14 keeps the setting on control planes only (KubeProxyConfig), so the worker
    // is only read for the guards' facts.
    const talosctl = (events(run) as Array<Event & {argv?: string[]}>)
      .filter((e) => e.event === 'command' && /talosctl/.test(String(e.argv?.[0] ?? '')))
      .map((e) => e.argv!.slice(1).join(' '))
    const onNode = (node: string, verb: string) => talosctl.filter((c) => c.includes(`--nodes ${node} `) && c.startsWith(`${verb} machineconfig `))
    expect(onNode(CONTROL_PLANE, 'patch').length, talosctl.join('\n')).toBe(1)
    expect(onNode(CONTROL_PLANE, 'get').length, talosctl.join('\n')).toBeLessThanOrEqual(2)
    expect(onNode(WORKER, 'patch').length, talosctl.join('\n')).toBe(0)
    expect(onNode(WORKER, 'get').length, talosctl.join('\n')).toBeLessThanOrEqual(1)
    const done = events(run)
      .filter((e) => e.event === 'task' && e.status === 'done')
      .map((e) => e.id)
    expect(done.indexOf('verify-cilium-config') === -1 || done.indexOf('verify-cilium-config') < done.indexOf('talos-disable-kube-proxy')).toBe(true)
    expect(done.indexOf('helm-upgrade')).toBeLessThan(done.indexOf('talos-disable-kube-proxy'))
    expect(done.indexOf('talos-disable-kube-proxy')).toBeLessThan(done.indexOf('remove-kube-proxy'))
    const state = await switchState()
    // Back where init left it: same values, same machine configs, no kube-proxy object or inventory entry.
    expect(state).toEqual(replacedState)
    replacedDump = await cniDump(kube, base)
    expect(replacedDump).toMatchObject({
      release: {revision: '+1', status: 'deployed'},
      history: ['+0 superseded', '+1 deployed'],
      ciliumConfig: {'kube-proxy-replacement': 'true'},
    })
    const status = await cli(['cni', 'status', '-o', 'json'])
    expect(status.code, status.stdout).toBe(0)
    expect(JSON.parse(status.stdout).kubeProxy).toMatchObject({desired: 'replaced', consistent: true, talosNodes: [{node: CONTROL_PLANE, enabled: false}]})
  }, 300_000)

  it('a kube-proxy DaemonSet kept unready stops restore in the middle: Cilium still replaces it, cni status names the half-done switch and the command; a rerun completes it', async () => {
    const lift = h.pods.hold((pod) => ownedBy(pod, 'DaemonSet', 'kube-proxy'))
    try {
      const run = await cli(['cni', 'kube-proxy', 'restore', '--yes', '--timeout', '10s', '--json'])
      expect(run.code, run.stderr).toBe(1)
      expect(events(run).find((e) => e.status === 'failed')?.id).toBe('wait-kube-proxy')
      const half = await switchState()
      // The new side is on but unverified, so the old one is untouched.
      expect(half).toMatchObject({spec: {cni: {kubeProxy: 'kube-proxy'}}, ciliumConfig: 'true', release: {config: {kubeProxyReplacement: true}}})
      expect(kubeProxyEnabledIn(half.talos.controlPlane)).toBe(true)
      expect(half.kubeProxy.daemonSet?.rolledOut).toBe(false)

      const status = await cli(['cni', 'status', '-o', 'json'])
      expect(status.code).toBe(1)
      const report = JSON.parse(status.stdout)
      expect(report.kubeProxy.consistent).toBe(false)
      expect(report.problems).toEqual(
        expect.arrayContaining([expect.objectContaining({severity: 'error', what: expect.stringMatching(/half/), fix: 'ichor cni kube-proxy restore'})]),
      )
      const text = await cli(['cni', 'status'])
      expect(text.stdout).toMatch(/fix: ichor cni kube-proxy restore/)
      // A values change would turn the replacement off out of order: refused, naming the command.
      const set = await cli(['cni', 'values', 'set', '--yes', 'podAnnotations.x=y'])
      expect(set.code).toBe(2)
      expect(`${set.stdout}${set.stderr}`).toMatch(/ichor cni kube-proxy restore/)
      // So would an upgrade, which validates the stored values under the recorded mode.
      const before = await revision()
      const upgrade = await runIchor(['cni', 'upgrade', '--to', '1.19.6', '--mirror', UPSTREAM.dir, '--yes', ...common], h.env)
      expect(upgrade.code, upgrade.stderr + upgrade.stdout.slice(-1000)).toBe(2)
      expect(`${upgrade.stdout}${upgrade.stderr}`).toMatch(/half done[\s\S]*ichor cni kube-proxy restore/)
      expect(await revision()).toBe(before)
    } finally {
      await lift()
    }
    const rerun = await cli(['cni', 'kube-proxy', 'restore', '--yes', '--json'])
    expect(rerun.code, rerun.stderr + rerun.stdout.slice(-2000)).toBe(0)
    expect(await switchState()).toEqual(restoredState)
    const back = await cli(['cni', 'kube-proxy', 'replace', '--yes'])
    expect(back.code, back.stderr + back.stdout.slice(-2000)).toBe(0)
    expect(await switchState()).toEqual(replacedState)
  }, 300_000)

  it('SIGKILL as each step in the middle of the switch starts (both directions), then a rerun: state and canonical dump equal an uninterrupted run', async () => {
    // The boundaries after record-mode, the first step that writes: a kill before it leaves nothing to
    // resume (the Lease recovery after such a kill is what cni-values.test.ts covers). Restore and
    // replace alternate, so each case starts where an uninterrupted run of the other direction ends.
    const first = RESTORE_STEPS.indexOf('record-mode') + 1
    expect(REPLACE_STEPS.indexOf('record-mode') + 1).toBe(first)
    for (let k = first; k < RESTORE_STEPS.length; k++) {
      for (const [verb, steps, state, dump] of [
        ['restore', RESTORE_STEPS, restoredState, restoredDump],
        ['replace', REPLACE_STEPS, replacedState, replacedDump],
      ] as const) {
        const name = `${verb}, killed before ${steps[k]}`
        const base = await revision()
        const killed = await cli(['cni', 'kube-proxy', verb, '--yes', '--json'], {
          killOn: (e) => e.event === 'task' && e.index === k && e.status === 'checking',
        })
        expect(killed.signal, `${name}: ${killed.stderr}${killed.stdout.slice(-1500)}`).toBe('SIGKILL')
        const rerun = await cli(['cni', 'kube-proxy', verb, '--yes', '--json'])
        expect(rerun.code, `${name}, rerun: ${rerun.stderr}${rerun.stdout.slice(-1500)}`).toBe(0)
        expect({state: await switchState(), dump: await cniDump(kube, base)}, name).toEqual({state, dump})
      }
    }
  }, 1_800_000)
})
