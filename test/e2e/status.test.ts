// `ichor status` on a restored converged cluster (1+1, Cilium 1.18.0): the whole cluster at a
// glance, read-only (no Lease, nothing written); the Lease holder of a running command shown; a
// Cilium agent that does not become ready is exit 1 naming it.
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {parse as parseYaml} from 'yaml'
import {acquireLease, holderIdentity} from '../../src/lib/kube/lease.js'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {deleteObject, listObjects} from '../../src/lib/kube/objects.js'
import type {ClusterStatus} from '../../src/lib/overview/read.js'
import {readReleaseRecord} from '../../src/lib/helm/release-record.js'
import {readInstallation} from '../../src/lib/state/installation.js'
import {DEFAULT_TALOS_VERSION} from '../../src/lib/talos/versions.js'
import {runIchor, type HarnessCluster} from '../harness/cluster.js'
import {convergedCluster, CONVERGED_TIMEOUT_MS} from '../harness/converged.js'
import {waitUntil} from '../harness/kill.js'
import {ownedBy} from '../harness/pod-start-simulator.js'

describe('ichor status on the harness (1+1)', () => {
  let h: HarnessCluster
  let kube: Kube
  const status = (args: string[]) => runIchor(['status', '--kubeconfig', join(h.stateDir, 'kubeconfig'), '--state-dir', h.stateDir, ...args], h.env)
  beforeAll(async () => {
    h = await convergedCluster('1+1')
    kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
  }, CONVERGED_TIMEOUT_MS)
  afterAll(() => h?.stop())

  it('a healthy cluster: every node, Kubernetes, Cilium, the stack and the next upgrade; exit 0; -o yaml is the same document; nothing written', async () => {
    const leases = async () =>
      (await listObjects(kube, {apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace: 'ichor-system'})).map(
        (l) => `${l.metadata.name}@${l.metadata.resourceVersion}`,
      )
    const before = {
      cr: (await readInstallation(kube))!.metadata.resourceVersion,
      release: (await readReleaseRecord(kube, 'cilium', 'kube-system'))!.revision,
      leases: await leases(),
    }
    const started = Date.now()
    const run = await status(['-o', 'json'])
    const ms = Date.now() - started
    expect(run.code, run.stderr).toBe(0)
    const r = JSON.parse(run.stdout) as ClusterStatus
    expect(r).toMatchObject({
      healthy: true,
      cluster: {name: 'e2e'},
      // The API server's version: the harness runs the envtest build whatever version Talos was told.
      kubernetes: ((await kube.request('GET', '/version')) as {gitVersion: string}).gitVersion.replace(/^v/, ''),
      cilium: {chart: '1.18.0', release: 'deployed', kubeProxy: 'replaced', agents: {ready: 2, desired: 2}, operator: {ready: 2, desired: 2}},
      stack: {promotion: 'Automatic'},
      nextUpgrade: {command: 'ichor cni upgrade --to 1.18.12', why: expect.stringMatching(/newest 1\.18 patch/)},
      problems: [],
      warnings: [],
    })
    expect(r.nodes).toEqual([
      // kwok plays the kubelets: it reports its own version, as a real kubelet reports its.
      {address: h.controlPlanes[0], role: 'controlplane', name: expect.any(String), ready: true, talos: DEFAULT_TALOS_VERSION, kubelet: expect.any(String)},
      {address: h.workers[0], role: 'worker', name: expect.any(String), ready: true, talos: DEFAULT_TALOS_VERSION, kubelet: expect.any(String)},
    ])
    for (const c of r.stack.components) expect(c, c.component).toMatchObject({sync: 'Synced', health: 'Healthy', served: expect.stringMatching(/^sha256:/)})
    expect(r.lease).toBeUndefined()
    const yaml = await status(['-o', 'yaml'])
    expect(parseYaml(yaml.stdout)).toEqual(r)
    const text = await status([])
    expect(text.stdout).toMatch(/^Cluster e2e \(https:\/\/[^)]+\): healthy$/m)
    expect(text.stdout).toMatch(/^NODE +ROLE +TALOS +KUBELET +STATUS$/m)
    expect(text.stdout).toMatch(/^Next +ichor cni upgrade --to 1\.18\.12 /m)
    // Read-only: no Lease taken, the IchorInstallation and the release as they were.
    expect(await leases()).toEqual(before.leases)
    expect((await readInstallation(kube))!.metadata.resourceVersion).toBe(before.cr)
    expect((await readReleaseRecord(kube, 'cilium', 'kube-system'))!.revision).toBe(before.release)
    console.log(`ichor status on the harness 1+1: ${ms} ms`)
  })

  it('while a command holds the Lease: its holder is shown, and the cluster is still healthy', async () => {
    const held = await acquireLease(kube, {command: 'cni values set', ttlSeconds: 30})
    try {
      const r = JSON.parse((await status(['--json'])).stdout) as ClusterStatus
      expect(r.lease).toMatchObject({holder: holderIdentity('cni values set')})
      expect(r.healthy).toBe(true)
    } finally {
      await held.release()
    }
  })

  it('a Cilium agent that does not become ready: exit 1, the agents named with the command that shows more', async () => {
    const lift = h.pods.hold((pod) => ownedBy(pod, 'DaemonSet', 'cilium'))
    try {
      const [agent] = await listObjects(kube, {apiVersion: 'v1', kind: 'Pod', namespace: 'kube-system'}, {labelSelector: 'k8s-app=cilium'})
      await deleteObject(kube, {apiVersion: 'v1', kind: 'Pod', namespace: 'kube-system', name: agent!.metadata.name})
      let run = await status(['--json'])
      await waitUntil('status to see the agent missing', async () => (run = await status(['--json'])).code === 1)
      const r = JSON.parse(run.stdout) as ClusterStatus
      expect(r.healthy).toBe(false)
      expect(r.problems).toEqual([expect.stringMatching(/^the Cilium agents \(DaemonSet cilium\) 1\/2 ready .*: see ichor cni status$/)])
      expect((await status([])).stdout).toMatch(/^Problems:\n {2}x the Cilium agents/m)
    } finally {
      await lift()
    }
  })
})
