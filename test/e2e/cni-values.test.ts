// Cilium day-2 on one harness cluster after a full `ichor init`: `cni status`, `cni values
// get|diff|set`, the no-op rerun, refusals that change nothing, a forced rollout failure
// rolled back, SIGKILL at every step boundary of `cni values set` and inside its helm, each compared with an
// uninterrupted run by a canonical dump (on a second cluster, beside the rest), and two concurrent sets.
import {pinnedAssets} from '../../src/lib/assets/lock.js'
import {mkdirSync, mkdtempSync, readFileSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {stringify} from 'yaml'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {ciliumEffectiveValues} from '../../src/lib/cilium/effective.js'
import {readReleaseRecord, valuesHash, type ReleaseRecord} from '../../src/lib/helm/release-record.js'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {readInstallation, writeInstallationStatus, type Installation} from '../../src/lib/state/installation.js'
import {runIchor, type CliRun, type HarnessCluster, jsonEvents} from '../harness/cluster.js'
import {convergedCluster, CONVERGED_TIMEOUT_MS} from '../harness/converged.js'
import {CILIUM_CONFIG_ANNOTATION, ownedBy} from '../harness/pod-start-simulator.js'
import {listObjects, type KubeObject} from '../../src/lib/kube/objects.js'
import {cniDump} from '../harness/dump.js'
import {inBackground, killTree, pausedWhile, waitUntil} from '../harness/kill.js'
import {UPSTREAM} from '../support/upstream.js'

type Event = {event?: string; id?: string; index?: number; status?: string; changed?: boolean; tasks?: {id: string}[]}
/** A converged cluster as the SIGKILL test drives it. */
type OnCluster = {
  h: HarnessCluster
  kube: Kube
  cli: (args: string[], opts?: Parameters<typeof runIchor>[2]) => Promise<CliRun>
  release: () => Promise<ReleaseRecord>
}

describe('ichor cni status / values on the harness', () => {
  let h: HarnessCluster
  let kube: Kube
  let common: string[]
  const cli = (args: string[], opts?: Parameters<typeof runIchor>[2]) => runIchor([...args, ...common], h.env, opts)
  const release = async () => (await readReleaseRecord(kube, 'cilium', 'kube-system'))!
  const cr = async () => (await readInstallation(kube))!
  const end = (run: CliRun) => jsonEvents(run).find((e) => e.event === 'end') as Event | undefined
  const expectRecorded = (c: Installation, r: ReleaseRecord) =>
    expect(c.status?.cni).toEqual({
      chartVersion: r.chartVersion,
      appliedValuesHash: valuesHash(r.config),
      releaseRevision: r.revision,
      upgradeCompatibility: '1.18',
    })
  const effective = (c: Installation) =>
    ciliumEffectiveValues({
      chartPath: '',
      user: c.spec.cni.cilium.values,
      facts: {kubeProxy: c.spec.cni.kubeProxy, tunnel: c.spec.cni.tunnel, upgradeCompatibility: c.status?.cni?.upgradeCompatibility},
    })

  // The SIGKILL test needs nothing the other tests leave: it runs on a second cluster of its own,
  // in the background beside them (set up alongside the first one), and its test awaits it.
  let second: HarnessCluster | undefined
  let secondReady: Promise<OnCluster>
  let killCases: Promise<void>
  const startSecond = async (): Promise<OnCluster> => {
    const s = (second = await convergedCluster('1+1'))
    const k = await connectKube({kubeconfig: s.cp.kubeconfigPath})
    const args = ['--kubeconfig', join(s.stateDir, 'kubeconfig'), '--state-dir', s.stateDir]
    return {
      h: s,
      kube: k,
      cli: (a, opts) => runIchor([...a, ...args], s.env, opts),
      release: async () => (await readReleaseRecord(k, 'cilium', 'kube-system'))!,
    }
  }

  beforeAll(async () => {
    secondReady = inBackground(startSecond)
    h = await convergedCluster('1+1')
    kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
    common = ['--kubeconfig', join(h.stateDir, 'kubeconfig'), '--state-dir', h.stateDir]
    killCases = inBackground(async () => sigkillAtEveryBoundary(await secondReady))
  }, CONVERGED_TIMEOUT_MS)
  afterAll(async () => {
    await Promise.allSettled([secondReady, killCases])
    await Promise.all([h?.stop(), second?.stop()])
  })

  it('cni status after init: healthy, values in sync, hand-over done (exit 0)', async () => {
    const run = await cli(['cni', 'status', '-o', 'json'])
    expect(run.code, run.stderr).toBe(0)
    const report = JSON.parse(run.stdout)
    expect(report).toMatchObject({
      healthy: true,
      release: {revision: 1, status: 'deployed', chartVersion: '1.18.0'},
      values: {inSync: true},
      // The harness installs 1.18.0, two minors below the pin: the next hop is the upgrade planner's.
      chart: {
        pinned: pinnedAssets().cilium.version,
        installed: '1.18.0',
        upgrade: 'too-far',
        next: {version: '1.18.12', command: 'ichor cni upgrade --to 1.18.12'},
      },
    })
    expect(report.kubeProxy).toMatchObject({desired: 'replaced', release: true, consistent: true})
    expect(report.readiness.daemonSet.rolledOut && report.readiness.operator.rolledOut).toBe(true)
    expect(report.talos).toMatchObject({checked: true, inlineManifestOn: [], inInventory: false, managedByTalos: []})
    // init strips the bootstrap Cilium from its local controlplane.yaml too (issue 12 point 3): nothing to fix.
    expect(report.talos.localConfigsWithInline).toEqual([])
    expect(report.problems).toEqual([])
  })

  it("cni status reads every node's machine config in one talosctl call and asks their Talos versions in one more, with no helm", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ichor-cni-status-procs-'))
    const log = join(dir, 'calls')
    const wrap = (name: string, real: string) => {
      writeFileSync(join(dir, name), `#!/bin/sh\necho "${name} $*" >> '${log}'\nexec '${real}' "$@"\n`, {mode: 0o755})
      return join(dir, name)
    }
    const env = {...h.env, ICHOR_TALOSCTL: wrap('talosctl', h.env.ICHOR_TALOSCTL!), ICHOR_HELM: wrap('helm', process.env.ICHOR_HELM!)}
    const run = await runIchor(['cni', 'status', '-o', 'json', ...common], env)
    expect(run.code, run.stderr).toBe(0)
    expect(JSON.parse(run.stdout).talos).toMatchObject({checked: true, inlineManifestOn: []})
    // Talos v1.14: kube-proxy lives in the control plane's config, so one node serves both checks;
    // the versions (a node upgraded with talosctl alone) go out beside it, all nodes in one call.
    expect(
      readFileSync(log, 'utf8')
        .trim()
        .split('\n')
        .map((l) => l.split(' ').slice(0, 3).join(' '))
        .sort(),
    ).toEqual(['talosctl get machineconfig', 'talosctl version --nodes'])
  })

  it('cni values get: the stored user layer, and the effective values', async () => {
    const kubeconfig = ['--kubeconfig', join(h.stateDir, 'kubeconfig')]
    const user = await runIchor(['cni', 'values', 'get', '-o', 'json', ...kubeconfig], h.env)
    expect(user.code, user.stderr).toBe(0)
    expect(JSON.parse(user.stdout)).toEqual((await cr()).spec.cni.cilium.values)
    const eff = await runIchor(['cni', 'values', 'get', '--effective', '-o', 'json', ...kubeconfig], h.env)
    expect(JSON.parse(eff.stdout)).toMatchObject({ipam: {mode: 'kubernetes'}, kubeProxyReplacement: true, k8sServicePort: 7445})
  })

  it('cni values diff: nothing against the live release; a change shows in values and manifest', async () => {
    const none = await cli(['cni', 'values', 'diff', '--cilium-chart', UPSTREAM.ciliumChart, '--json'])
    expect(none.code, none.stderr).toBe(0)
    expect(JSON.parse(none.stdout)).toMatchObject({changed: false, values: '', manifest: ''})
    const some = await cli(['cni', 'values', 'diff', 'hubble.relay.enabled=true', '--cilium-chart', UPSTREAM.ciliumChart])
    expect(some.code, some.stderr).toBe(0)
    expect(some.stdout).toMatch(/^\+\s+enabled: true$/m)
    expect(some.stdout).toMatch(/^\+.*name: hubble-relay$/m)
  })

  it('cni values set --dry-run and cni values diff take --set as they take KEY=VALUE (issue 23 point 1): the same diff, nothing changed', async () => {
    const before = await release()
    const c0 = await cr()
    for (const verb of ['diff', 'set'] as const) {
      const extra = verb === 'set' ? ['--dry-run'] : []
      const positional = await cli(['cni', 'values', verb, 'hubble.relay.enabled=true', ...extra, '--cilium-chart', UPSTREAM.ciliumChart])
      const flag = await cli(['cni', 'values', verb, '--set', 'hubble.relay.enabled=true', ...extra, '--cilium-chart', UPSTREAM.ciliumChart])
      expect(flag.code, flag.stderr).toBe(0)
      expect(flag.stdout).toMatch(/^\+\s+enabled: true$/m)
      expect(flag.stdout.replace(/\d+(\.\d+)?\s?m?s\b/g, '')).toBe(positional.stdout.replace(/\d+(\.\d+)?\s?m?s\b/g, ''))
    }
    expect((await release()).revision).toBe(before.revision)
    expect(await cr()).toEqual(c0)
  })

  it("the Talos Cilium guide's values file: its owned keys at ichor's values are notes, not errors; nothing differs and nothing changes", async () => {
    const before = await release()
    const c0 = await cr()
    const file = join(h.stateDir, '..', 'talos-guide-values.yaml')
    const replaced = c0.spec.cni.kubeProxy === 'replaced'
    writeFileSync(
      file,
      `ipam:\n  mode: kubernetes\nkubeProxyReplacement: ${replaced}\ncgroup:\n  autoMount:\n    enabled: false\n  hostRoot: /sys/fs/cgroup\n` +
        (replaced ? 'k8sServiceHost: localhost\nk8sServicePort: 7445\n' : ''),
    )
    const diff = await cli(['cni', 'values', 'diff', '-f', file, '--cilium-chart', UPSTREAM.ciliumChart])
    expect(diff.code, diff.stderr).toBe(0)
    expect(diff.stderr).toMatch(/ipam\.mode: "kubernetes" is the value ichor sets itself/)
    expect(diff.stderr).toMatch(/kubeProxyReplacement: (true|false) is the value ichor sets itself/)
    expect(diff.stdout).not.toMatch(/^[+-]\s/m)
    const set = await cli(['cni', 'values', 'set', '--yes', '-f', file, '--cilium-chart', UPSTREAM.ciliumChart, '--json'])
    expect(set.code, set.stderr).toBe(0)
    expect(end(set)?.changed).toBe(false)
    expect((await release()).revision).toBe(before.revision)
    expect(await cr()).toEqual(c0)
  })

  it('cni values set: a new revision, the CR records the user layer and the hash; the same set again is a no-op', async () => {
    const before = await release()
    const c0 = await cr()
    const dry = await cli(['cni', 'values', 'set', 'hubble.relay.enabled=true', '--dry-run', '--cilium-chart', UPSTREAM.ciliumChart])
    expect(dry.code, dry.stderr).toBe(0)
    expect(dry.stdout).toMatch(/would run/)
    expect(dry.stdout).toMatch(/^\+\s+enabled: true$/m)
    expect((await release()).revision).toBe(before.revision)
    expect(await cr()).toEqual(c0)

    const run = await cli(['cni', 'values', 'set', '--yes', 'hubble.relay.enabled=true', '--cilium-chart', UPSTREAM.ciliumChart, '--json'])
    expect(run.code, run.stderr + run.stdout.slice(-2000)).toBe(0)
    const after = await release()
    expect(after).toMatchObject({revision: before.revision + 1, status: 'deployed'})
    expect(after.config).toMatchObject({hubble: {relay: {enabled: true}}})
    const c = await cr()
    expect(c.spec.cni.cilium.values).toEqual({hubble: {relay: {enabled: true}}})
    expectRecorded(c, after)
    expect(valuesHash(after.config)).toBe(valuesHash(effective(c)))

    const again = await cli(['cni', 'values', 'set', '--yes', 'hubble.relay.enabled=true', '--cilium-chart', UPSTREAM.ciliumChart, '--json'])
    expect(again.code, again.stderr).toBe(0)
    expect(end(again)?.changed).toBe(false)
    expect((await release()).revision).toBe(after.revision)
  })

  // Issue 25: nothing changes, so there is no reason to ask the nodes anything.
  it('a no-op cni values set makes no talosctl call (-v names each external command)', async () => {
    const before = await release()
    const run = await cli(['cni', 'values', 'set', '--yes', '--cilium-chart', UPSTREAM.ciliumChart, '--json', '-v'])
    expect(run.code, run.stderr).toBe(0)
    expect(end(run)?.changed).toBe(false)
    const talosctl = jsonEvents(run).filter((e) => e.event === 'command' && /talosctl/.test(String((e.argv as string[] | undefined)?.[0] ?? '')))
    expect(talosctl.map((e) => (e.argv as string[]).slice(1, 3).join(' '))).toEqual([])
    expect((await release()).revision).toBe(before.revision)
  })

  it('a change that reaches only cilium-config restarts every agent and the operator: each running pod started with the new config (real DaemonSet and Deployment controllers)', async () => {
    const before = await h.pods.ciliumConfigHash()
    const run = await cli(['cni', 'values', 'set', '--yes', 'debug.enabled=true', '--cilium-chart', UPSTREAM.ciliumChart])
    expect(run.code, run.stderr + run.stdout.slice(-2000)).toBe(0)
    const now = await h.pods.ciliumConfigHash()
    expect(now).not.toBe(before)
    const pods = (await listObjects<KubeObject>(kube, {apiVersion: 'v1', kind: 'Pod', namespace: 'kube-system'})).filter(
      (p) => !p.metadata.deletionTimestamp && (p.metadata.labels?.['k8s-app'] === 'cilium' || p.metadata.labels?.['io.cilium/app'] === 'operator'),
    )
    // Two agents (a control plane and a worker) and the chart's two operator replicas.
    expect(pods).toHaveLength(4)
    const started = (p: KubeObject) => `${p.metadata.name} ${p.metadata.annotations?.[CILIUM_CONFIG_ANNOTATION]}`
    expect(pods.map(started)).toEqual(pods.map((p) => `${p.metadata.name} ${now}`))
  })

  it('a cluster whose status predates the values hash: cni status says in sync and names the fix; a set without arguments records the hash, no new revision', async () => {
    const [r0, c0] = [await release(), await cr()]
    const {appliedValuesHash: _recorded, ...older} = c0.status!.cni
    await writeInstallationStatus(kube, {...c0.status!, cni: older})
    const status = await cli(['cni', 'status', '-o', 'json'])
    expect(status.code, status.stderr).toBe(0)
    const report = JSON.parse(status.stdout)
    expect(report.values).toMatchObject({inSync: true, releaseHash: valuesHash(r0.config)})
    expect(report.values.recordedHash).toBeUndefined()
    expect(report.problems).toEqual([
      expect.objectContaining({severity: 'warning', fix: expect.stringMatching(/^ichor cni values set\s+\(no arguments: records it\)/)}),
    ])
    const set = await cli(['cni', 'values', 'set', '--yes', '--cilium-chart', UPSTREAM.ciliumChart, '--json'])
    expect(set.code, set.stderr).toBe(0)
    expect((await release()).revision).toBe(r0.revision)
    const c = await cr()
    expect({spec: c.spec, status: c.status}).toEqual({spec: c0.spec, status: c0.status})
    expect(JSON.parse((await cli(['cni', 'status', '-o', 'json'])).stdout).problems).toEqual([])
  })

  it('an invalid set (a ServiceMonitor without monitoring.coreos.com) is refused before helm: exit 2, same revision, same CR', async () => {
    const [r0, c0] = [await release(), await cr()]
    const run = await cli([
      'cni',
      'values',
      'set',
      '--yes',
      'prometheus.enabled=true',
      'prometheus.serviceMonitor.enabled=true',
      '--cilium-chart',
      UPSTREAM.ciliumChart,
    ])
    expect(run.code, run.stderr).toBe(2)
    // A failed step's message is printed once, by the step list (stdout when piped).
    expect(`${run.stdout}${run.stderr}`).toMatch(/prometheus\.serviceMonitor\.enabled: .*monitoring\.coreos\.com/)
    expect((await release()).revision).toBe(r0.revision)
    expect(await cr()).toEqual(c0)
  })

  it('a rollout that never becomes ready is rolled back: previous values deployed, CR unchanged, exit 1 naming the DaemonSet', async () => {
    const [r0, c0] = [await release(), await cr()]
    const lift = h.pods.hold((pod) => pod.metadata?.annotations?.['e2e-unready'] === 'yes')
    try {
      const run = await cli(['cni', 'values', 'set', '--yes', 'podAnnotations.e2e-unready=yes', '--cilium-chart', UPSTREAM.ciliumChart, '--timeout', '10s'])
      expect(run.code, run.stderr).toBe(1)
      expect(`${run.stdout}${run.stderr}`).toMatch(/rolled back|rollback/i)
      expect(`${run.stdout}${run.stderr}`).toMatch(/cilium DaemonSet/)
    } finally {
      await lift()
    }
    const r1 = await release()
    expect(r1.status).toBe('deployed')
    expect(r1.revision).toBeGreaterThan(r0.revision)
    expect(r1.config).toEqual(r0.config)
    expect(await cr()).toEqual(c0)
    const status = await cli(['cni', 'status', '--json'])
    expect(status.code, status.stdout).toBe(0)
  }, 180_000)

  const sigkillAtEveryBoundary = async ({cli, release, kube, h}: OnCluster) => {
    // Two targets the cases alternate between, each first reached uninterrupted: its dump is the reference.
    // `debug.enabled` shows in cilium-config, the pod annotation in the DaemonSet (a rollout).
    const target = (t: 'x' | 'y') => [`podAnnotations.kill=${t}`, `debug.enabled=${t === 'x'}`]
    const set = (t: 'x' | 'y', opts?: Parameters<typeof runIchor>[2]) =>
      cli(['cni', 'values', 'set', '--yes', ...target(t), '--cilium-chart', UPSTREAM.ciliumChart, '--timeout', '20s', '--json'], opts)
    const reference: Record<string, Awaited<ReturnType<typeof cniDump>>> = {}
    let ids: string[] = []
    for (const t of ['x', 'y'] as const) {
      const base = (await release()).revision
      const run = await set(t)
      expect(run.code, run.stderr).toBe(0)
      ids = (jsonEvents(run).find((e) => e.event === 'start') as Event).tasks!.map((e) => e.id)
      reference[t] = await cniDump(kube, base)
    }
    expect(ids).toEqual(['lease', 'validate-values', 'helm-upgrade', 'wait-operator', 'wait-agents', 'record-values'])
    expect(reference.x).toMatchObject({
      release: {revision: '+1', status: 'deployed', config: {podAnnotations: {kill: 'x'}, debug: {enabled: true}}},
      history: ['+0 superseded', '+1 deployed'],
      ciliumConfig: {debug: 'true'},
    })
    expect(reference.x!.cr.status).toEqual({
      chartVersion: '1.18.0',
      appliedValuesHash: valuesHash(reference.x!.release!.config),
      releaseRevision: '+1',
      upgradeCompatibility: '1.18',
    })

    const cases = [
      ...ids.map((id, k) => ({name: `before ${id}`, k, inside: false})),
      {name: 'inside helm-upgrade', k: ids.indexOf('helm-upgrade'), inside: true},
    ]
    for (const [n, kase] of cases.entries()) {
      const t = n % 2 === 0 ? 'x' : 'y' // the state before is the other target
      const base = (await release()).revision
      let killed: CliRun
      if (!kase.inside) {
        killed = await set(t, {killOn: (e) => e.event === 'task' && e.index === kase.k && e.status === 'checking'})
      } else {
        // The new DaemonSet is kept unready so helm is still waiting when ichor and helm are killed.
        const lift = h.pods.hold((pod) => ownedBy(pod, 'DaemonSet', 'cilium'))
        try {
          let pid = 0
          const running = set(t, {onStart: (c) => (pid = c.pid!)})
          await waitUntil('helm to leave the release pending-upgrade', async () => (await release()).status === 'pending-upgrade')
          killTree(pid)
          killed = await running
        } finally {
          await lift()
        }
        expect((await release()).status, kase.name).toBe('pending-upgrade')
      }
      expect(killed.signal, `${kase.name}: ${killed.stderr}`).toBe('SIGKILL')
      const rerun = await set(t)
      expect(rerun.code, `${kase.name}: ${rerun.stderr}${rerun.stdout.slice(-1500)}`).toBe(0)
      expect(await cniDump(kube, base), kase.name).toEqual(reference[t])
    }
  }

  it('SIGKILL at every step boundary and inside helm (helm killed with it: release left pending-upgrade), then a rerun: the canonical dump equals an uninterrupted run', async () => {
    await killCases
  }, 900_000)

  it('two concurrent sets: one is refused naming the holder (exit 3); run again, neither change is lost', async () => {
    const a = ['cni', 'values', 'set', '--yes', 'podAnnotations.first=a', '--cilium-chart', UPSTREAM.ciliumChart]
    const b = ['cni', 'values', 'set', '--yes', 'podAnnotations.second=b', '--cilium-chart', UPSTREAM.ciliumChart]
    const runs = await Promise.all([cli(a), cli(b)])
    const refused = runs.findIndex((r) => r.code === 3)
    expect(runs.map((r) => r.code).sort(), runs.map((r) => r.stderr).join('\n')).toEqual([0, 3])
    expect(`${runs[refused]!.stdout}${runs[refused]!.stderr}`).toMatch(/holds the lock .*pid \d+ \(cni values set\)/)
    const retry = await cli(refused === 0 ? a : b)
    expect(retry.code, retry.stderr).toBe(0)
    const c = await cr()
    expect(c.spec.cni.cilium.values).toMatchObject({podAnnotations: {first: 'a', second: 'b'}})
    expect((await release()).config).toMatchObject({podAnnotations: {first: 'a', second: 'b'}})
  }, 180_000)

  it('a set paused (SIGSTOP) inside helm-upgrade or at record-values while a second operator breaks the lock and sets another key: resumed, it exits 3 and writes nothing; the second change survives in the release and the IchorInstallation', async () => {
    for (const at of ['helm-upgrade', 'record-values']) {
      // Stopped as the step's action starts: its Lease check (the guard) has passed.
      const {resumed, meanwhile: second} = await pausedWhile(
        (onEvent) =>
          cli(['cni', 'values', 'set', '--yes', `podAnnotations.first=${at}`, '--cilium-chart', UPSTREAM.ciliumChart, '--timeout', '60s', '--json'], {onEvent}),
        (e) => e.event === 'task' && e.id === at && e.status === 'running',
        () => cli(['cni', 'values', 'set', '--yes', `podAnnotations.second=${at}`, '--cilium-chart', UPSTREAM.ciliumChart, '--break-lock']),
      )
      expect(second.code, second.stderr).toBe(0)
      expect(resumed.code, `${at}: ${resumed.stderr}${resumed.stdout.slice(-1500)}`).toBe(3)
      const r = await release()
      const c = await cr()
      expect(r.config.podAnnotations, at).toMatchObject({second: at})
      expect((r.config.podAnnotations as Record<string, string>).first, at).not.toBe(at)
      expect(c.spec.cni.cilium.values.podAnnotations, at).toMatchObject({second: at})
      expect((c.spec.cni.cilium.values.podAnnotations as Record<string, string>).first, at).not.toBe(at)
      expectRecorded(c, r)
    }
  }, 300_000)

  it('cni values edit: an unchanged buffer is a no-op; a refused buffer reopens with the problems on top; the fixed one is applied', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ichor-editor-'))
    const editor = join(dir, 'editor.sh')
    // The "editor": records what it was shown, then writes the next prepared buffer (if any).
    writeFileSync(
      editor,
      '#!/bin/sh\nn=$(( $(cat "$EDIT_DIR/count" 2>/dev/null || echo 0) + 1 )); echo $n > "$EDIT_DIR/count"\ncp "$1" "$EDIT_DIR/seen-$n.yaml"\n[ -f "$EDIT_DIR/$n.yaml" ] && cp "$EDIT_DIR/$n.yaml" "$1"\nexit 0\n',
      {mode: 0o700},
    )
    const edit = (sub: string, buffers: Record<number, unknown> = {}) => {
      mkdirSync(join(dir, sub))
      for (const [n, v] of Object.entries(buffers)) writeFileSync(join(dir, sub, `${n}.yaml`), stringify(v))
      return runIchor(['cni', 'values', 'edit', '--yes', '--cilium-chart', UPSTREAM.ciliumChart, ...common], {
        ...h.env,
        EDITOR: editor,
        VISUAL: '',
        EDIT_DIR: join(dir, sub),
      })
    }
    const [r0, c0] = [await release(), await cr()]
    const unchanged = await edit('unchanged')
    expect(unchanged.code, unchanged.stderr).toBe(0)
    expect(unchanged.stderr).toMatch(/left unchanged/)
    expect((await release()).revision).toBe(r0.revision)
    expect(readFileSync(join(dir, 'unchanged', 'seen-1.yaml'), 'utf8')).toMatch(/^podAnnotations:/m)

    const layer = {...c0.spec.cni.cilium.values, bandwidthManager: {enabled: true}}
    const fixed = await edit('fix', {1: {...layer, prometheus: {enabled: true, serviceMonitor: {enabled: true}}}, 2: layer})
    expect(fixed.code, fixed.stderr).toBe(0)
    const reopened = readFileSync(join(dir, 'fix', 'seen-2.yaml'), 'utf8')
    expect(reopened).toMatch(/^# The values were not accepted:$/m)
    expect(reopened).toMatch(/^#\s+- prometheus\.serviceMonitor\.enabled: .*monitoring\.coreos\.com/m)
    expect((await cr()).spec.cni.cilium.values).toEqual(layer)
    expect(await release()).toMatchObject({revision: r0.revision + 1, config: expect.objectContaining({bandwidthManager: {enabled: true}})})
  }, 180_000)

  it('cni values edit --set (issue 23 point 1): the editor opens with the change applied; saved as opened, it is applied', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ichor-editor-seed-'))
    const editor = join(dir, 'editor.sh')
    writeFileSync(editor, `#!/bin/sh\ncp "$1" '${join(dir, 'seen.yaml')}'\n`, {mode: 0o700})
    const [r0, c0] = [await release(), await cr()]
    const run = await runIchor(['cni', 'values', 'edit', '--yes', '--set', 'podAnnotations.seeded=yes', '--cilium-chart', UPSTREAM.ciliumChart, ...common], {
      ...h.env,
      EDITOR: editor,
      VISUAL: '',
    })
    expect(run.code, run.stderr).toBe(0)
    expect(readFileSync(join(dir, 'seen.yaml'), 'utf8')).toMatch(/^ {2}seeded: yes$/m)
    const user = c0.spec.cni.cilium.values as {podAnnotations?: Record<string, string>}
    expect((await cr()).spec.cni.cilium.values).toEqual({...user, podAnnotations: {...user.podAnnotations, seeded: 'yes'}})
    expect(await release()).toMatchObject({
      revision: r0.revision + 1,
      config: expect.objectContaining({podAnnotations: expect.objectContaining({seeded: 'yes'})}),
    })
  }, 180_000)

  it('a rerun of init keeps the layer cni values set stored (no new revision); a --cilium-values that differs is refused naming cni values set', async () => {
    const [r0, c0] = [await release(), await cr()]
    const again = await runIchor(h.initArgs, h.env)
    expect(again.code, again.stderr).toBe(0)
    expect((await cr()).spec.cni.cilium.values).toEqual(c0.spec.cni.cilium.values)
    expect((await release()).revision).toBe(r0.revision)
    const file = join(mkdtempSync(join(tmpdir(), 'ichor-values-')), 'other-values.yaml')
    writeFileSync(file, 'podAnnotations:\n  other: c\n')
    const refused = await runIchor([...h.initArgs, '--cilium-values', file], h.env)
    expect(refused.code).toBe(2)
    expect(refused.stderr).toMatch(/-f\/--values, --set: differs from the cilium values the cluster stores; change them with `ichor cni values set/)
    expect((await cr()).spec.cni.cilium.values).toEqual(c0.spec.cni.cilium.values)
  }, 600_000)
})
