// `ichor cni upgrade` on one harness cluster after a full `ichor init` (Cilium 1.18.0):
// 1.18.0 -> 1.20.0 refused before anything runs, a dry run that changes nothing, live objects
// Cilium 1.19 removes or rejects refused by name (then gone on with the skip flag), the
// upgrade to 1.19.6 with its pre-flight release seen and gone, a downgrade refused, and
// SIGKILL at every step boundary and inside helm upgrade (the release rolled back to 1.18.0
// between cases), each rerun ending with the canonical dump of the uninterrupted run.
import {execFile} from 'node:child_process'
import {promisify} from 'node:util'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {readReleaseRecord, valuesHash, type ReleaseRecord} from '../../src/lib/helm/release-record.js'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {deleteObject, getObject} from '../../src/lib/kube/objects.js'
import {readInstallation, writeInstallationStatus, type Installation} from '../../src/lib/state/installation.js'
import {runIchor, type CliRun, type HarnessCluster, jsonEvents} from '../harness/cluster.js'
import {convergedCluster, CONVERGED_TIMEOUT_MS} from '../harness/converged.js'
import {ownedBy} from '../harness/pod-start-simulator.js'
import {ciliumCrd, createCrdRaw} from '../harness/cilium-simulator.js'
import {loadKubeConfig, waitForCrdEstablished} from '../harness/kube.js'
import {cniDump} from '../harness/dump.js'
import {killTree, waitUntil} from '../harness/kill.js'
import {UPSTREAM} from '../support/upstream.js'

type Event = {event?: string; id?: string; index?: number; status?: string; tasks?: {id: string}[]}

describe('ichor cni upgrade on the harness', () => {
  let h: HarnessCluster
  let kube: Kube
  let common: string[]
  let initial: {release: ReleaseRecord; cr: Installation}
  /** The canonical dump the uninterrupted upgrade left, revisions counted from the one before it. */
  let upgraded: Awaited<ReturnType<typeof cniDump>>
  const cli = (args: string[], opts?: Parameters<typeof runIchor>[2]) => runIchor([...args, ...common], h.env, opts)
  const release = async () => (await readReleaseRecord(kube, 'cilium', 'kube-system'))!
  const cr = async () => (await readInstallation(kube))!
  const ciliumSchemaVersion = async () =>
    (await getObject(kube, {apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', name: 'ciliumnetworkpolicies.cilium.io'}))?.metadata
      ?.labels?.['io.cilium.k8s.crd.schema.version']
  const preflightGone = async () => {
    expect(await readReleaseRecord(kube, 'cilium-preflight', 'kube-system')).toBeUndefined()
    expect(await getObject(kube, {apiVersion: 'apps/v1', kind: 'DaemonSet', namespace: 'kube-system', name: 'cilium-pre-flight-check'})).toBeUndefined()
  }
  /** The end state an upgrade to 1.19.6 must reach, whatever the path. */
  const expectUpgraded = async (label: string) => {
    const [r, c] = [await release(), await cr()]
    expect(r, label).toMatchObject({status: 'deployed', chartVersion: '1.19.6'})
    expect(r.config, label).toMatchObject({upgradeCompatibility: '1.18'})
    expect((r.config as {securityContext: {capabilities: {ciliumAgent: string[]}}}).securityContext.capabilities.ciliumAgent, label).toContain('SYSLOG')
    expect(c.status?.cni, label).toEqual({
      chartVersion: '1.19.6',
      appliedValuesHash: valuesHash(r.config),
      releaseRevision: r.revision,
      upgradeCompatibility: '1.18',
    })
    expect(c.spec.cni.cilium.values, label).toEqual(initial.cr.spec.cni.cilium.values)
    await preflightGone()
    return r
  }

  beforeAll(async () => {
    h = await convergedCluster('1+1')
    kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
    common = ['--kubeconfig', join(h.stateDir, 'kubeconfig'), '--state-dir', h.stateDir]
    initial = {release: await release(), cr: await cr()}
    expect(await ciliumSchemaVersion()).toBe('1.31.11')
  }, CONVERGED_TIMEOUT_MS)
  afterAll(async () => h?.stop())

  it('init records upgradeCompatibility (the installed minor) in the release and the CR status; cni status names the next upgrade', async () => {
    expect(initial.release.config).toMatchObject({upgradeCompatibility: '1.18'})
    expect(initial.cr.status?.cni).toMatchObject({chartVersion: '1.18.0', upgradeCompatibility: '1.18'})
    const status = await cli(['cni', 'status', '-o', 'json'])
    expect(status.code, status.stderr).toBe(0)
    // Cilium's upgrade guide: the newest patch of the current minor (1.18.12) before the next minor.
    expect(JSON.parse(status.stdout)).toMatchObject({
      upgradeCompatibility: '1.18',
      chart: {installed: '1.18.0', next: {version: '1.18.12', command: 'ichor cni upgrade --to 1.18.12'}},
    })
  })

  it('1.18.0 -> 1.19.6 from an older patch is refused before anything runs (latest patch first): exit 2 naming 1.18.12 and --skip-patch-check, same revision', async () => {
    const run = await cli(['cni', 'upgrade', '--yes', '--to', '1.19.6', '--mirror', UPSTREAM.dir, '--json'])
    expect(run.code, run.stderr).toBe(2)
    expect(`${run.stdout}${run.stderr}`).toMatch(
      /1\.18\.0 is not the newest 1\.18 patch ichor knows \(1\.18\.12\).*upgrade to 1\.18\.12 first.*--skip-patch-check/,
    )
    expect(jsonEvents(run).some((e) => e.event === 'task')).toBe(false)
    expect((await release()).revision).toBe(initial.release.revision)
    expect(await cr()).toEqual(initial.cr)
    // The patch step itself is allowed, without a warning: the dry run plans it.
    const patch = await cli(['cni', 'upgrade', '--to', '1.18.12', '--mirror', UPSTREAM.dir, '--dry-run'])
    expect(patch.code, patch.stderr).toBe(0)
    expect(patch.stdout).toMatch(/Cilium chart 1\.18\.12: .*cilium-1\.18\.12\.tgz \(from mirror, .*a chart ichor knows/)
    expect((await release()).revision).toBe(initial.release.revision)
  })

  it('1.18.0 -> 1.20.0 is refused before anything runs: exit 2 naming 1.19, same revision, no Lease taken', async () => {
    const run = await cli(['cni', 'upgrade', '--yes', '--cilium-chart', UPSTREAM.cilium120Chart, '--json'])
    expect(run.code, run.stderr).toBe(2)
    expect(`${run.stdout}${run.stderr}`).toMatch(/1\.18\.0 to 1\.20\.0 skips 1\.19: .*one minor at a time; upgrade to 1\.19\.6 first/)
    expect(jsonEvents(run).some((e) => e.event === 'task')).toBe(false)
    expect((await release()).revision).toBe(initial.release.revision)
    expect(await cr()).toEqual(initial.cr)
  })

  it('--dry-run prints the plan, the chart used and the values diff, and changes nothing', async () => {
    const run = await cli(['cni', 'upgrade', '--to', '1.19.6', '--mirror', UPSTREAM.dir, '--skip-patch-check', '--dry-run'])
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout).toMatch(/Cilium chart 1\.19\.6: .*cilium-1\.19\.6\.tgz \(from mirror, .*not the pin \(1\.20\.0\)/)
    expect(run.stdout).toMatch(/^\+\s+- SYSLOG$/m)
    expect(run.stdout).toMatch(/would run/)
    expect((await release()).revision).toBe(initial.release.revision)
    await preflightGone()
  })

  // Issue 38 point 13: what Cilium 1.19's upgrade notes remove or reject, on the real API server.
  // The BGPv1 CRD is the one a 1.18.0 operator registers with the BGP control plane on (the
  // converged cluster runs without it); the policy is accepted by 1.18.0's CRD, not by 1.19.6's.
  const bgpPolicy = {
    apiVersion: 'cilium.io/v2alpha1',
    kind: 'CiliumBGPPeeringPolicy',
    metadata: {name: 'rack1'},
    spec: {nodeSelector: {}, virtualRouters: [{localASN: 64512, neighbors: [{peerAddress: '192.0.2.1/32', peerASN: 64513}]}]},
  }
  const requiresPolicy = {
    apiVersion: 'cilium.io/v2',
    kind: 'CiliumNetworkPolicy',
    metadata: {name: 'prod-only', namespace: 'default'},
    spec: {endpointSelector: {}, ingress: [{fromEndpoints: [{}], fromRequires: [{matchLabels: {env: 'prod'}}]}]},
  }
  const removedObjects = [
    {
      ref: {apiVersion: bgpPolicy.apiVersion, kind: bgpPolicy.kind, name: 'rack1'},
      collection: '/apis/cilium.io/v2alpha1/ciliumbgppeeringpolicies',
      body: bgpPolicy,
    },
    {
      ref: {apiVersion: requiresPolicy.apiVersion, kind: requiresPolicy.kind, name: 'prod-only', namespace: 'default'},
      collection: '/apis/cilium.io/v2/namespaces/default/ciliumnetworkpolicies',
      body: requiresPolicy,
    },
  ]
  const namesBoth =
    /CiliumBGPPeeringPolicy rack1: Cilium 1\.19 removes CiliumBGPPeeringPolicy[\s\S]*CiliumNetworkPolicy default\/prod-only: spec\.ingress\[0\]\.fromRequires: /

  it("a CiliumBGPPeeringPolicy and a CiliumNetworkPolicy with fromRequires (Cilium 1.19's upgrade notes) refuse 1.18.0 -> 1.19.6 naming both: exit 2, same revision; the dry run with --skip-removed-api-check names them in its warnings", async () => {
    const kc = loadKubeConfig(h.cp.kubeconfigPath)
    await createCrdRaw(kc, ciliumCrd('1.18.0', 'ciliumbgppeeringpolicies.cilium.io'))
    await waitForCrdEstablished(kc, 'ciliumbgppeeringpolicies.cilium.io')
    for (const o of removedObjects) await kube.request('POST', o.collection, {body: o.body})

    const run = await cli(['cni', 'upgrade', '--yes', '--to', '1.19.6', '--mirror', UPSTREAM.dir, '--skip-patch-check', '--json'])
    expect(run.code, run.stderr).toBe(2)
    const error = JSON.parse(run.stdout) as {error: {message: string; issues: {path: string; message: string}[]; hint: string}}
    expect(error.error.message).toMatch(/refusing to upgrade Cilium from 1\.18\.0 to 1\.19\.6: live objects use what Cilium 1\.19 removes or rejects/)
    expect(error.error.issues.map((i) => i.path)).toEqual(['CiliumBGPPeeringPolicy rack1', 'CiliumNetworkPolicy default/prod-only'])
    for (const i of error.error.issues) expect(i.message).toMatch(/1\.19 Upgrade Notes/)
    expect(error.error.hint).toMatch(/--skip-removed-api-check/)
    expect(jsonEvents(run).some((e) => e.event === 'task')).toBe(false)
    expect((await release()).revision).toBe(initial.release.revision)
    expect(await cr()).toEqual(initial.cr)

    const text = await cli(['cni', 'upgrade', '--to', '1.19.6', '--mirror', UPSTREAM.dir, '--skip-patch-check', '--dry-run'])
    expect(text.code).toBe(2)
    expect(`${text.stdout}${text.stderr}`).toMatch(namesBoth)

    const dry = await cli([
      'cni',
      'upgrade',
      '--to',
      '1.19.6',
      '--mirror',
      UPSTREAM.dir,
      '--skip-patch-check',
      '--skip-removed-api-check',
      '--dry-run',
      '--json',
    ])
    expect(dry.code, dry.stderr).toBe(0)
    const result = JSON.parse(dry.stdout) as {warnings: string[]; removedApis: {refusals: {object: string}[]}}
    expect(result.removedApis.refusals.map((f) => f.object)).toEqual(['CiliumBGPPeeringPolicy rack1', 'CiliumNetworkPolicy default/prod-only'])
    expect(result.warnings.join('\n')).toMatch(namesBoth)
    expect((await release()).revision).toBe(initial.release.revision)
  })

  it('1.18.0 -> 1.19.6: the pre-flight release was installed, ready and removed; then the release runs 1.19.6 and the CR records it', async () => {
    // From 1.18.0, not the newest 1.18 patch: the cases below reset to init's 1.18.0 revision.
    // The objects 1.19 removes or rejects are still there: --skip-removed-api-check goes on, naming them.
    const run = await cli(['cni', 'upgrade', '--yes', '--to', '1.19.6', '--mirror', UPSTREAM.dir, '--skip-patch-check', '--skip-removed-api-check', '--json'])
    for (const o of removedObjects) await deleteObject(kube, o.ref)
    expect(run.code, run.stderr + run.stdout.slice(-3000)).toBe(0)
    expect((JSON.parse(run.stdout) as {warnings: string[]}).warnings.join('\n')).toMatch(namesBoth)
    const done = jsonEvents(run)
      .filter((e) => e.event === 'task' && e.status === 'done')
      .map((e) => e.id)
    // preflight-wait may find the pre-flight already ready when it probes (then it is skipped): the marks below show it was.
    expect(done).toEqual(expect.arrayContaining(['preflight-install', 'preflight-remove', 'helm-upgrade', 'record-values']))
    // The pre-flight DaemonSet and Deployment really ran pods (the real controllers made them, kwok started them).
    expect(h.pods.admitted.some((p) => p.owner === 'DaemonSet/cilium-pre-flight-check')).toBe(true)
    expect(h.pods.admitted.some((p) => p.owner?.startsWith('ReplicaSet/cilium-pre-flight-check-'))).toBe(true)
    const r = await expectUpgraded('uninterrupted')
    expect(r.revision).toBe(initial.release.revision + 1)
    // The operator the upgrade rolled to 1.19.6 (simulated: cilium-simulator.ts) updated Cilium's
    // CRDs to 1.19.6's (schema version 1.32.7; it was 1.31.11 after init).
    await waitUntil('the 1.19.6 CiliumNetworkPolicy CRD', async () => (await ciliumSchemaVersion()) === '1.32.7', 30_000)
    upgraded = await cniDump(kube, initial.release.revision)
    expect(upgraded).toMatchObject({
      release: {revision: '+1', status: 'deployed', chart: '1.19.6'},
      history: ['+0 superseded', '+1 deployed'],
      cr: {status: {releaseRevision: '+1', chartVersion: '1.19.6'}},
    })
    const again = await cli(['cni', 'upgrade', '--yes', '--to', '1.19.6', '--mirror', UPSTREAM.dir, '--json'])
    expect(again.code, again.stderr).toBe(0)
    expect((await release()).revision).toBe(r.revision)
  }, 600_000)

  it('a downgrade (1.19.6 -> 1.18.0) is refused before anything runs: exit 2, same revision', async () => {
    const r0 = await release()
    const run = await cli(['cni', 'upgrade', '--yes', '--cilium-chart', UPSTREAM.ciliumChart])
    expect(run.code, run.stderr).toBe(2)
    expect(`${run.stdout}${run.stderr}`).toMatch(/1\.18\.0 is older than the installed 1\.19\.6: Cilium is never downgraded/)
    expect((await release()).revision).toBe(r0.revision)
  })

  it('SIGKILL at every step boundary and inside helm upgrade (helm killed with it: release left pending-upgrade), then a rerun: the canonical dump equals the uninterrupted run', async () => {
    const args = ['cni', 'upgrade', '--yes', '--to', '1.19.6', '--mirror', UPSTREAM.dir, '--skip-patch-check', '--timeout', '120s', '--json']
    const ids = [
      'lease',
      'check-upgrade',
      'validate-values',
      'preflight-install',
      'preflight-wait',
      'preflight-remove',
      'helm-upgrade',
      'wait-operator',
      'wait-agents',
      'record-values',
    ]
    const cases = [
      ...ids.map((id, k) => ({name: `killed before ${id}`, k, inside: false})),
      {name: 'killed inside helm upgrade', k: ids.indexOf('helm-upgrade'), inside: true},
    ]
    for (const kase of cases) {
      // Back to the state init left: the 1.18.0 revision rolled back to, the CR status as init wrote it.
      // Asynchronous: kwok and the pod-start simulator must start the rolled-back pods meanwhile.
      // The newest 1.18.0 revision helm still keeps: it prunes revisions past its history limit (10).
      const helm = (argv: string[]) => promisify(execFile)(process.env.ICHOR_HELM!, [...argv, '-n', 'kube-system', '--kubeconfig', h.cp.kubeconfigPath])
      const history = JSON.parse((await helm(['history', 'cilium', '-o', 'json'])).stdout) as {revision: number; chart: string}[]
      const base = history.filter((e) => e.chart === 'cilium-1.18.0').at(-1)!.revision
      await helm(['rollback', 'cilium', String(base), '--wait', '--timeout', '300s'])
      const back = await release()
      expect(back, `reset, then ${kase.name}`).toMatchObject({status: 'deployed', chartVersion: '1.18.0'})
      expect(valuesHash(back.config)).toBe(valuesHash(initial.release.config))
      await writeInstallationStatus(kube, {...initial.cr.status!, cni: {...initial.cr.status!.cni, releaseRevision: back.revision}})

      let killed: CliRun
      if (!kase.inside) {
        killed = await cli(args, {killOn: (e: Event) => e.event === 'task' && e.index === kase.k && e.status === 'checking'})
      } else {
        // The upgraded DaemonSet is kept unready, so helm is still waiting when ichor and its helm are killed.
        const lift = h.pods.hold((pod) => ownedBy(pod, 'DaemonSet', 'cilium'))
        try {
          let pid = 0
          const running = cli(args, {onStart: (c) => (pid = c.pid!)})
          await waitUntil('helm to leave the release pending-upgrade', async () => (await release()).status === 'pending-upgrade', 600_000)
          killTree(pid)
          killed = await running
        } finally {
          await lift()
        }
        expect(await release(), kase.name).toMatchObject({status: 'pending-upgrade', chartVersion: '1.19.6'})
      }
      // Not killed: the run ended first. In --json mode its error is the last document on stdout.
      expect(killed.signal, `${kase.name}: exit ${killed.code} after ${Math.round(killed.ms)} ms: ${killed.stderr}${killed.stdout.slice(-3000)}`).toBe(
        'SIGKILL',
      )
      const rerun = await cli(args)
      expect(rerun.code, `${kase.name}: ${rerun.stderr}${rerun.stdout.slice(-2000)}`).toBe(0)
      await expectUpgraded(kase.name)
      expect(await cniDump(kube, back.revision), kase.name).toEqual(upgraded)
    }
  }, 3_600_000)

  // Issue 23 point 11: another laptop, or this one without --cilium-chart, after the upgrade.
  it("after the upgrade to 1.19.6, cni values set without the 1.19.6 chart takes it from the release's Helm record and says so (the same templates: only the change differs); a --cilium-chart of another version is refused", async () => {
    const r0 = await release()
    expect(r0.chartVersion).toBe('1.19.6')
    const set = await cli(['cni', 'values', 'set', 'podAnnotations.fromRecord=yes', '--yes'])
    expect(set.code, `${set.stderr}${set.stdout.slice(-2000)}`).toBe(0)
    expect(`${set.stdout}${set.stderr}`).toMatch(
      /the release runs Cilium chart 1\.19\.6.*using the chart from its Helm record \(sh\.helm\.release\.v1\.cilium\.v\d+\)/,
    )
    const r1 = await release()
    expect(r1).toMatchObject({
      revision: r0.revision + 1,
      status: 'deployed',
      chartVersion: '1.19.6',
      config: {upgradeCompatibility: '1.18', podAnnotations: {fromRecord: 'yes'}},
    })
    const without = (m: string) =>
      m
        .split('\n')
        .filter((l) => !l.includes('fromRecord'))
        .join('\n')
    expect(without(r1.manifest)).toBe(without(r0.manifest))
    const other = await cli(['cni', 'values', 'set', 'podAnnotations.other=yes', '--yes', '--cilium-chart', UPSTREAM.ciliumChart])
    expect(other.code, other.stderr).toBe(2)
    expect(`${other.stdout}${other.stderr}`).toMatch(/the release runs Cilium chart 1\.19\.6, and --cilium-chart .* is 1\.18\.0/)
    expect((await release()).revision).toBe(r1.revision)
  }, 600_000)

  it('after the upgrade to 1.19.6, cni kube-proxy restore and replace keep upgradeCompatibility at 1.18 (the minor first installed) in the release and the CR', async () => {
    const r0 = await release()
    expect(r0).toMatchObject({chartVersion: '1.19.6', config: {upgradeCompatibility: '1.18'}})
    for (const verb of ['restore', 'replace'] as const) {
      const run = await cli(['cni', 'kube-proxy', verb, '--yes', '--cilium-chart', UPSTREAM.cilium119Chart])
      expect(run.code, `${verb}: ${run.stderr}${run.stdout.slice(-2000)}`).toBe(0)
      const [r, c] = [await release(), await cr()]
      expect(r.config, verb).toMatchObject({upgradeCompatibility: '1.18', kubeProxyReplacement: verb === 'replace'})
      expect(c.status?.cni, verb).toMatchObject({chartVersion: '1.19.6', upgradeCompatibility: '1.18', appliedValuesHash: valuesHash(r.config)})
    }
  }, 600_000)
})
