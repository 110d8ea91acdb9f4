// `ichor upgrade plan` on restored converged clusters: from Cilium 1.18.0 (1+1) the hops to the
// default set, which is also the newest combination the compatibility data allows; the first hop
// run for real drops out of the next plan. On 3+1 at Talos v1.13.9 with Kubernetes 1.36.0: Talos
// first, then Cilium's patch and minors, Kubernetes' patch last, nothing downgraded. At the
// default set itself (nothing to do): init.test.ts, whose cluster is the default. Live objects
// a crossed Cilium minor removes or deprecates are named under the hop that crosses it.
// Read-only: no Lease, the IchorInstallation and the Cilium release unchanged.
import {join} from 'node:path'
import {parse as parseYaml} from 'yaml'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {pinnedAssets} from '../../src/lib/assets/lock.js'
import type {CniStatusReport} from '../../src/lib/cilium/status.js'
import {readReleaseRecord} from '../../src/lib/helm/release-record.js'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {deleteObject, listObjects} from '../../src/lib/kube/objects.js'
import type {UpgradePlanResult} from '../../src/lib/plans/upgrade-plan.js'
import {readInstallation} from '../../src/lib/state/installation.js'
import {DEFAULT_TALOS_VERSION, defaultKubernetesVersion} from '../../src/lib/talos/versions.js'
import {runIchor, type HarnessCluster} from '../harness/cluster.js'
import {ciliumCrd, createCrdRaw} from '../harness/cilium-simulator.js'
import {convergedCluster, CONVERGED_TIMEOUT_MS} from '../harness/converged.js'
import {loadKubeConfig, waitForCrdEstablished} from '../harness/kube.js'
import {UPSTREAM} from '../support/upstream.js'

const commands = (r: UpgradePlanResult) => r.hops.map((h) => h.command)

/** What a read-only command must leave as it found it. */
async function untouched(kube: Kube) {
  const cr = (await readInstallation(kube))!
  const release = (await readReleaseRecord(kube, 'cilium', 'kube-system'))!
  const leases = await listObjects(kube, {apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace: 'ichor-system'})
  return {cr: cr.metadata.resourceVersion, revision: release.revision, leases: leases.map((l) => `${l.metadata.name}@${l.metadata.resourceVersion}`)}
}

describe('ichor upgrade plan on a Cilium 1.18.0 cluster (1+1, the chart the day-2 tests start from)', () => {
  let h: HarnessCluster
  let kube: Kube
  const plan = (args: string[]) => runIchor(['upgrade', 'plan', '--kubeconfig', join(h.stateDir, 'kubeconfig'), '--state-dir', h.stateDir, ...args], h.env)
  beforeAll(async () => {
    h = await convergedCluster('1+1')
    kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
  }, CONVERGED_TIMEOUT_MS)
  afterAll(() => h?.stop())

  it('to the default set: Cilium patch, then minor by minor, then Kubernetes minor by minor; exit 0, nothing written, no Lease taken', async () => {
    const before = await untouched(kube)
    const run = await plan(['--json'])
    expect(run.code, run.stderr).toBe(0)
    const r = JSON.parse(run.stdout) as UpgradePlanResult
    // init with --cilium-chart 1.18.0 and no --kubernetes-version: the Kubernetes that chart is tested on.
    expect(r.current).toMatchObject({talos: {lowest: DEFAULT_TALOS_VERSION}, kubernetes: {lowest: '1.33.6'}, cilium: '1.18.0'})
    expect(r.current.talos.nodes.map((n) => n.node)).toEqual([...h.controlPlanes, ...h.workers])
    expect(r).toMatchObject({targetKind: 'default', upToDate: false, compatibility: {revision: 1, origin: 'embedded'}})
    expect(r.target).toEqual({talos: DEFAULT_TALOS_VERSION, kubernetes: defaultKubernetesVersion(), cilium: pinnedAssets().cilium.version})
    expect(commands(r)).toEqual([
      'ichor cni upgrade --to 1.18.12',
      'ichor cni upgrade --to 1.19.6',
      'ichor cni upgrade --to 1.20.0',
      'ichor kubernetes upgrade --to 1.34.1',
      'ichor kubernetes upgrade --to 1.35.4',
      'ichor kubernetes upgrade --to 1.36.3',
    ])
    for (const hop of r.hops) expect(hop.source, hop.command).toMatch(/cilium\/cilium|go-kubernetes|Talos/)
    expect(await untouched(kube)).toEqual(before)
  })

  it('--to-latest: the newest combination the data allows (the default set is it); -o yaml is the same document', async () => {
    const json = await plan(['--to-latest', '-o', 'json'])
    expect(json.code, json.stderr).toBe(0)
    const r = JSON.parse(json.stdout) as UpgradePlanResult
    expect(r).toMatchObject({targetKind: 'latest', target: {talos: 'v1.14.1', kubernetes: '1.36.3', cilium: '1.20.0'}})
    expect(commands(r)).toEqual(commands(JSON.parse((await plan(['--json'])).stdout) as UpgradePlanResult))
    const yaml = await plan(['--to-latest', '-o', 'yaml'])
    expect(yaml.code, yaml.stderr).toBe(0)
    expect(parseYaml(yaml.stdout)).toEqual(r)
  })

  it('objects Cilium 1.19 removes and 1.20 deprecates show under the hop that crosses that minor, as cni upgrade will read them; the JSON carries them; the plan still exits 0; cni status names them as warnings', async () => {
    const kc = loadKubeConfig(h.cp.kubeconfigPath)
    await createCrdRaw(kc, ciliumCrd('1.18.0', 'ciliumbgppeeringpolicies.cilium.io'))
    await waitForCrdEstablished(kc, 'ciliumbgppeeringpolicies.cilium.io')
    const bgp = {
      apiVersion: 'cilium.io/v2alpha1',
      kind: 'CiliumBGPPeeringPolicy',
      metadata: {name: 'rack1'},
      spec: {nodeSelector: {}, virtualRouters: [{localASN: 64512, neighbors: [{peerAddress: '192.0.2.1/32', peerASN: 64513}]}]},
    }
    // Mutual authentication: a warning of the 1.20 notes, not a refusal.
    const auth = {
      apiVersion: 'cilium.io/v2',
      kind: 'CiliumNetworkPolicy',
      metadata: {name: 'mutual', namespace: 'default'},
      spec: {endpointSelector: {}, ingress: [{fromEndpoints: [{}], authentication: {mode: 'required'}}]},
    }
    await kube.request('POST', '/apis/cilium.io/v2alpha1/ciliumbgppeeringpolicies', {body: bgp})
    await kube.request('POST', '/apis/cilium.io/v2/namespaces/default/ciliumnetworkpolicies', {body: auth})
    try {
      const before = await untouched(kube)
      const json = await plan(['--json'])
      expect(json.code, json.stderr).toBe(0)
      const r = JSON.parse(json.stdout) as UpgradePlanResult
      expect(r.removedApis.refusals.map((f) => [f.minor, f.object])).toEqual([['1.19', 'CiliumBGPPeeringPolicy rack1']])
      expect(r.removedApis.warnings.map((f) => [f.minor, f.object])).toEqual([['1.20', 'CiliumNetworkPolicy default/mutual']])
      const human = await plan([])
      expect(human.code, human.stderr).toBe(0)
      const hop = (n: number) => human.stdout.split(/\n(?=\d+\. )/).find((b) => b.startsWith(`${n}. `)) ?? ''
      expect(hop(1)).not.toMatch(/rack1|mutual/) // the 1.18 patch crosses no minor
      expect(hop(2)).toMatch(/^2\. ichor cni upgrade --to 1\.19\.6$/m)
      expect(hop(2)).toMatch(
        /first change or delete .*--skip-removed-api-check[\s\S]*- CiliumBGPPeeringPolicy rack1: Cilium 1\.19 removes CiliumBGPPeeringPolicy/,
      )
      expect(hop(2)).not.toContain('mutual')
      expect(hop(3)).toMatch(/Cilium 1\.20's upgrade notes also warn of:\n\s+- CiliumNetworkPolicy default\/mutual: .*mutual authentication/)
      expect(hop(3)).not.toContain('rack1')
      // cni status reads the same path and names both as warnings: healthy still, exit 0.
      const cni = await runIchor(['cni', 'status', '--kubeconfig', join(h.stateDir, 'kubeconfig'), '--state-dir', h.stateDir, '--json'], h.env)
      expect(cni.code, cni.stderr + cni.stdout.slice(-2000)).toBe(0)
      const status = JSON.parse(cni.stdout) as CniStatusReport
      expect(status.removedApis).toEqual(r.removedApis)
      const named = status.problems.filter((p) => /rack1|mutual/.test(p.what))
      expect(named.map((p) => [p.severity, p.what.split(':')[0], p.fix.split(',')[0]])).toEqual([
        ['warning', 'CiliumBGPPeeringPolicy rack1', 'change or delete it before ichor cni upgrade --to 1.19.6'],
        ['warning', 'CiliumNetworkPolicy default/mutual', 'nothing blocks ichor cni upgrade --to 1.20.0; move off it before a later Cilium removes it'],
      ])
      expect(await untouched(kube)).toEqual(before)
    } finally {
      await deleteObject(kube, {apiVersion: bgp.apiVersion, kind: bgp.kind, name: 'rack1'})
      await deleteObject(kube, {apiVersion: auth.apiVersion, kind: auth.kind, name: 'mutual', namespace: 'default'})
    }
    const clean = JSON.parse((await plan(['--json'])).stdout) as UpgradePlanResult
    expect(clean.removedApis).toEqual({refusals: [], warnings: []})
    const cleanStatus = await runIchor(['cni', 'status', '--kubeconfig', join(h.stateDir, 'kubeconfig'), '--state-dir', h.stateDir, '--json'], h.env)
    expect((JSON.parse(cleanStatus.stdout) as CniStatusReport).removedApis).toEqual({refusals: [], warnings: []})
  })

  it("the plan's first command, run for real, drops out of the next plan", async () => {
    const first = await plan(['--to-latest', '--json'])
    const hop = (JSON.parse(first.stdout) as UpgradePlanResult).hops[0]!
    const [, ...args] = hop.command.split(' ') // "ichor cni upgrade --to X" as the operator would type it
    const run = await runIchor([...args, '--yes', '--mirror', UPSTREAM.dir, '--kubeconfig', join(h.stateDir, 'kubeconfig'), '--state-dir', h.stateDir], h.env)
    expect(run.code, run.stderr.slice(-3000)).toBe(0)
    const next = JSON.parse((await plan(['--to-latest', '--json'])).stdout) as UpgradePlanResult
    expect(next.current.cilium).toBe(hop.to)
    expect(commands(next)).toEqual(commands(JSON.parse(first.stdout) as UpgradePlanResult).slice(1))
  }, 300_000)
})

describe('ichor upgrade plan on Talos v1.13.9 with Kubernetes 1.36.0 (3+1)', () => {
  let h: HarnessCluster
  let kube: Kube
  const plan = (args: string[]) => runIchor(['upgrade', 'plan', '--kubeconfig', join(h.stateDir, 'kubeconfig'), '--state-dir', h.stateDir, ...args], h.env)
  beforeAll(async () => {
    h = await convergedCluster('3+1@v1.13.9')
    kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
  }, CONVERGED_TIMEOUT_MS)
  afterAll(() => h?.stop())

  it('to the defaults: Talos first, then Cilium patch by patch and minor by minor, then the Kubernetes patch', async () => {
    const before = await untouched(kube)
    const run = await plan(['--json'])
    expect(run.code, run.stderr).toBe(0)
    const r = JSON.parse(run.stdout) as UpgradePlanResult
    expect(r.current).toMatchObject({talos: {lowest: 'v1.13.9'}, kubernetes: {lowest: '1.36.0'}})
    expect(r.current.talos.nodes).toHaveLength(4)
    expect(commands(r)).toEqual([
      'ichor talos upgrade --to v1.14.1',
      'ichor cni upgrade --to 1.18.12',
      'ichor cni upgrade --to 1.19.6',
      'ichor cni upgrade --to 1.20.0',
      'ichor kubernetes upgrade --to 1.36.3',
    ])
    expect(r.target).toEqual({talos: 'v1.14.1', kubernetes: '1.36.3', cilium: '1.20.0'})
    expect(await untouched(kube)).toEqual(before)
  })

  it('--to-latest: the same hops, printed one per line with the current versions', async () => {
    const run = await plan(['--to-latest'])
    expect(run.code, run.stderr).toBe(0)
    const steps = run.stdout.split('\n').filter((l) => /^\d+\. ichor /.test(l))
    expect(steps).toEqual([
      '1. ichor talos upgrade --to v1.14.1',
      '2. ichor cni upgrade --to 1.18.12',
      '3. ichor cni upgrade --to 1.19.6',
      '4. ichor cni upgrade --to 1.20.0',
      '5. ichor kubernetes upgrade --to 1.36.3',
    ])
    expect(run.stdout).toMatch(/^Current: Talos v1\.13\.9, Kubernetes 1\.36\.0, Cilium 1\.18\.0$/m)
    expect(run.stdout).toContain('Nothing was changed.')
  })
})
