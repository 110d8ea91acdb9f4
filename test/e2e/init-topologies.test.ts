// `ichor init` on the clusters homelabs run most: one node, and control planes only. On the real
// scheduler a control plane keeps Talos's NoSchedule taint unless the machine config allows
// scheduling there, and neither Kokumi's nor Argo CD's manifests tolerate it: without a worker,
// everything ichor installs would stay Pending. Harness: real control plane (apiserver,
// controller-manager, scheduler), kwok machines registered by the simulated Talos nodes.
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {listObjects, type KubeObject} from '../../src/lib/kube/objects.js'
import {runIchor, startHarnessCluster, type CliRun, type HarnessCluster} from '../harness/cluster.js'

type Pod = KubeObject & {spec: {nodeName?: string}; status?: {phase?: string; conditions?: {type: string; status: string}[]}}
type Node = KubeObject & {spec?: {taints?: {key: string; effect: string}[]}}

/** Every pod of what ichor installs, as `namespace/name phase ready node`, for a readable failure. */
async function podStates(kube: Kube): Promise<string[]> {
  const pods = (
    await Promise.all(['kube-system', 'kokumi', 'argocd'].map((namespace) => listObjects<Pod>(kube, {apiVersion: 'v1', kind: 'Pod', namespace})))
  ).flat()
  return pods.map((p) => {
    const ready = p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ? 'ready' : 'not-ready'
    return `${p.metadata.namespace}/${p.metadata.name} ${p.status?.phase} ${ready} ${p.spec.nodeName ?? '(unscheduled)'}`
  })
}

describe.each([
  {name: 'one node (a single control plane, no worker)', controlPlanes: 1},
  {name: 'three control planes, no worker', controlPlanes: 3},
])('ichor init on $name, on the real scheduler', ({controlPlanes}) => {
  let h: HarnessCluster
  let kube: Kube
  let run: CliRun

  beforeAll(async () => {
    h = await startHarnessCluster({controlPlanes, workers: 0})
    run = await runIchor(h.initArgs, h.env)
    kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
  }, 600_000)
  afterAll(async () => h?.stop())

  it('converges, says that the control planes run workloads, and every pod of Cilium, Kokumi and Argo CD runs on them', async () => {
    expect(run.code, `${run.stderr.slice(-3000)}\n${run.stdout.slice(-2000)}\n${(await podStates(kube)).join('\n')}`).toBe(0)
    expect(`${run.stdout}${run.stderr}`).toMatch(/no worker: the control planes run workloads too/)
    const nodes = await listObjects<Node>(kube, {apiVersion: 'v1', kind: 'Node'})
    expect(nodes).toHaveLength(controlPlanes)
    for (const n of nodes) {
      expect(n.metadata.labels?.['node-role.kubernetes.io/control-plane']).toBe('')
      expect(n.spec?.taints ?? []).not.toContainEqual(expect.objectContaining({key: 'node-role.kubernetes.io/control-plane'}))
    }
    const states = await podStates(kube)
    // Jobs' pods have completed (Succeeded); everything else runs and is ready.
    const notRunning = states.filter((s) => !/ Running ready /.test(s) && !/ Succeeded /.test(s))
    expect(notRunning).toEqual([])
    for (const ns of ['kokumi', 'argocd']) expect(states.filter((s) => s.startsWith(`${ns}/`) && / Running ready /.test(s)).length).toBeGreaterThan(0)
  })
})
