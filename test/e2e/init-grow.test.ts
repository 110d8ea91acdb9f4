// Growing a cluster: `ichor init` on one control plane and one worker, then the same command
// with one more of each (the guide's way to add nodes). The rerun configures only the new
// machines, the new control plane never receives the Cilium inline manifest (Talos would apply
// it and fight the Helm release), and Cilium and the stack run on the new nodes: the real
// DaemonSet controller and scheduler place the pods, kwok runs them. Then the same growth
// again on a second cluster, killed at every task boundary of the rerun.
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {getObject, listObjects, type KubeObject} from '../../src/lib/kube/objects.js'
import {inlineManifestForms} from '../../src/lib/talos/handover.js'
import {jsonEvents, runIchor, startHarnessCluster, type CliRun, type HarnessCluster} from '../harness/cluster.js'
import {canonicalDump, nodeConfig} from '../harness/dump.js'
import {inBackground, killBeforeTask, runWithStepIds, taskIds} from '../harness/kill.js'
import {waitUntil} from '../harness/kube.js'

type Obj = KubeObject & {spec?: any; status?: any}

const endEvent = (r: CliRun) => jsonEvents(r).find((e) => e.event === 'end') as {ok: boolean; changed: boolean} | undefined
const failure = (r: CliRun) => `${r.stderr.slice(-4000)}\n${r.stdout.slice(-3000)}`

/** The init arguments without the last control plane and the last worker: the cluster before it grew. */
function smallerArgs(h: HarnessCluster): string[] {
  const drop = new Set([`--control-plane ${h.controlPlanes.at(-1)}`, `--worker ${h.workers.at(-1)}`])
  const out: string[] = []
  for (let i = 0; i < h.initArgs.length; i++) {
    if (drop.has(`${h.initArgs[i]} ${h.initArgs[i + 1]}`)) i++
    else out.push(h.initArgs[i]!)
  }
  return out
}

async function podsOn(kube: Kube, node: string): Promise<string[]> {
  const pods = (await kube.request<{items: Obj[]}>('GET', '/api/v1/pods', {query: {fieldSelector: `spec.nodeName=${node}`}})).items
  return pods
    .filter((p) => p.status?.conditions?.some((c: {type: string; status: string}) => c.type === 'Ready' && c.status === 'True'))
    .map((p) => `${p.metadata.namespace}/${p.metadata.name}`)
}

describe('ichor init rerun with one more control plane and one more worker', () => {
  let grown: HarnessCluster
  let killed: HarnessCluster
  let kube: Kube
  let grow: CliRun
  let killLoop: Promise<{ids: string[]; log: string[]; last: CliRun}>

  beforeAll(async () => {
    ;[grown, killed] = await Promise.all([startHarnessCluster({controlPlanes: 2, workers: 2}), startHarnessCluster({controlPlanes: 2, workers: 2})])
    const [a, b] = await Promise.all([runIchor([...smallerArgs(grown), '--json'], grown.env), runIchor([...smallerArgs(killed), '--json'], killed.env)])
    expect(a.code, failure(a)).toBe(0)
    expect(b.code, failure(b)).toBe(0)
    kube = await connectKube({kubeconfig: grown.cp.kubeconfigPath})
    // The kill loop on the second cluster needs only the growth run's step ids: it runs in the
    // background from that run's start event on, beside the tests on the grown cluster.
    const {ids, run} = await runWithStepIds((onEvent) => runIchor([...grown.initArgs, '--json'], grown.env, {onEvent}))
    killLoop = inBackground(() => killAtEveryBoundary(ids))
    grow = await run
  }, 900_000)
  afterAll(async () => Promise.all([grown?.stop(), killed?.stop()]))

  it('converges: the new machines are configured, the new control plane without the Cilium inline manifest, and the IchorInstallation lists all four', async () => {
    expect(grow.code, failure(grow)).toBe(0)
    expect(endEvent(grow)).toMatchObject({ok: true, changed: true})
    const [newControlPlane, newWorker] = [grown.controlPlanes.at(-1)!, grown.workers.at(-1)!]
    expect(nodeConfig(grown, newControlPlane)).toMatch(/machine:/)
    expect(nodeConfig(grown, newWorker)).toMatch(/machine:/)
    for (const ip of grown.controlPlanes) expect(inlineManifestForms(nodeConfig(grown, ip)), ip).toEqual([])
    const dump = await canonicalDump(kube, grown)
    expect(dump.inventoryKeys).toEqual([])
    expect(dump.release).toMatchObject({revision: 1, status: 'deployed'})
    expect(dump.cr.spec).toMatchObject({talos: {controlPlanes: grown.controlPlanes, workers: grown.workers}})
  })

  it('Cilium and the stack run on the new nodes: an agent on each of the four, and a rerun changes nothing', async () => {
    const nodes = await listObjects<Obj>(kube, {apiVersion: 'v1', kind: 'Node'})
    expect(nodes).toHaveLength(4)
    await waitUntil(
      'a Ready Cilium agent on every node',
      async () => {
        const ds = await getObject<Obj>(kube, {apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'cilium', namespace: 'kube-system'})
        return ds?.status?.desiredNumberScheduled === 4 && ds.status.numberReady === 4
      },
      {timeoutMs: 60_000, intervalMs: 500},
    )
    for (const n of nodes)
      expect(
        (await podsOn(kube, n.metadata.name)).some((p) => p.startsWith('kube-system/cilium-')),
        n.metadata.name,
      ).toBe(true)
    const again = await runIchor([...grown.initArgs, '--json'], grown.env)
    expect(again.code, failure(again)).toBe(0)
    expect(endEvent(again)).toMatchObject({ok: true, changed: false})
  })

  async function killAtEveryBoundary(ids: string[]) {
    const killArgs = [...killed.initArgs, '--json']
    const log: string[] = []
    for (let k = 0; k < ids.length; k++) {
      const run = await runIchor(killArgs, killed.env, {killOn: killBeforeTask(k)})
      log.push(`kill before ${ids[k]}: ${run.signal ?? `exit ${run.code}`}`)
      expect(run.code === 0 || run.signal === 'SIGKILL', `${ids[k]}: ${failure(run)}`).toBe(true)
    }
    const last = await runIchor(killArgs, killed.env)
    return {ids, log, last}
  }

  it('the growth rerun killed at every task boundary converges to the uninterrupted end state', async () => {
    const killArgs = [...killed.initArgs, '--json']
    const {ids, log, last} = await killLoop
    expect(ids).toEqual(taskIds(grow))
    expect(last.code, `${log.join('\n')}\n${failure(last)}`).toBe(0)
    expect(log.filter((l) => l.endsWith('SIGKILL')).length, log.join('\n')).toBeGreaterThan(ids.length / 2)
    for (const ip of killed.controlPlanes) expect(inlineManifestForms(nodeConfig(killed, ip)), ip).toEqual([])
    const killedKube = await connectKube({kubeconfig: killed.cp.kubeconfigPath})
    const [a, b] = await Promise.all([canonicalDump(kube, grown), canonicalDump(killedKube, killed)])
    expect(b).toEqual(a)
    const again = await runIchor(killArgs, killed.env)
    expect(endEvent(again)).toMatchObject({ok: true, changed: false})
  }, 1_800_000)
})
