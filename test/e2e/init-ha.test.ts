// ichor init on three control planes and two workers (an HA homelab), with `--promotion Manual`:
// the whole init, the hand-over on every control plane, and a kill at every task boundary. Harness
// as in init.test.ts (real apiserver, helm, registry, talosctl gen/validate; simulated nodes,
// readiness and Kokumi/Argo CD following Kokumi 0.14.0).
import {readFileSync} from 'node:fs'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {getObject, type KubeObject} from '../../src/lib/kube/objects.js'
import {readTalosBundle} from '../../src/lib/state/installation.js'
import {readStateKeyFile} from '../../src/lib/state/state-key.js'
import {inlineManifestForms} from '../../src/lib/talos/handover.js'
import {jsonEvents, jsonResult, runIchor, startHarnessCluster, type CliRun, type HarnessCluster} from '../harness/cluster.js'
import {canonicalDump, nodeConfig} from '../harness/dump.js'

type Obj = KubeObject & {spec?: any; status?: any; data?: Record<string, string>}
type Event = {event?: string; id?: string; index?: number; status?: string; changed?: boolean; tasks?: {id: string}[]}

const endEvent = (r: CliRun) => jsonEvents(r).find((e) => e.event === 'end') as {ok: boolean; changed: boolean} | undefined
const failure = (r: CliRun) => `${r.stderr.slice(-4000)}\n${r.stdout.slice(-3000)}`

describe('ichor init on 3 control planes + 2 workers with --promotion Manual', () => {
  let reference: HarnessCluster
  let killed: HarnessCluster
  let kube: Kube
  let first: CliRun
  let manual: string[]
  let expected: Awaited<ReturnType<typeof canonicalDump>>

  beforeAll(async () => {
    ;[reference, killed] = await Promise.all([startHarnessCluster({controlPlanes: 3, workers: 2}), startHarnessCluster({controlPlanes: 3, workers: 2})])
    manual = [...reference.initArgs, '--promotion', 'Manual']
    first = await runIchor([...manual, '--json'], reference.env)
    kube = await connectKube({kubeconfig: reference.cp.kubeconfigPath})
  }, 600_000)
  afterAll(async () => Promise.all([reference?.stop(), killed?.stop()]))

  it('configures all five nodes, hands Cilium over on every control plane, and ends healthy', async () => {
    expect(first.code, failure(first)).toBe(0)
    expect(endEvent(first)).toMatchObject({ok: true, changed: true})
    expect(reference.controlPlanes).toHaveLength(3)
    expect(reference.workers).toHaveLength(2)
    for (const ip of [...reference.controlPlanes, ...reference.workers]) expect(nodeConfig(reference, ip), ip).toMatch(/machine:/)
    // The inline entry is gone from each control plane, and Cilium from Talos's inventory.
    for (const ip of reference.controlPlanes) expect(inlineManifestForms(nodeConfig(reference, ip)), ip).toEqual([])
    const dump = await canonicalDump(kube, reference)
    expect(dump.controlPlaneHasCilium).toBe(false)
    expect(dump.inventoryKeys).toEqual([])
    expect(dump.release).toMatchObject({revision: 1, status: 'deployed'})
    expect(dump.cr.spec).toMatchObject({talos: {controlPlanes: reference.controlPlanes, workers: reference.workers}, stack: {promotion: 'Manual'}})
    expected = dump
  })

  // Issue 12 point 14: Manual promotion on a fresh cluster must not wait for an approval nobody gives.
  it('Manual: init approves the first install itself, says so, and the Orders stay Manual', async () => {
    const done = jsonEvents(first)
      .filter((e) => e.event === 'task' && e.status === 'done')
      .map((e) => e.id)
    expect(done).toContain('promote-first-install')
    for (const c of ['argocd', 'kokumi']) {
      const order = await getObject<Obj>(kube, {apiVersion: 'delivery.kokumi.dev/v1alpha1', kind: 'Order', name: c, namespace: c})
      expect(order?.spec.autoDeploy).toBe('Disabled')
      const prep = await getObject<Obj>(kube, {
        apiVersion: 'delivery.kokumi.dev/v1alpha1',
        kind: 'Preparation',
        name: order!.status.latestPreparationName,
        namespace: c,
      })
      expect(prep?.metadata.labels?.['delivery.kokumi.dev/approve-deploy']).toBe('true')
      const app = await getObject<Obj>(kube, {apiVersion: 'argoproj.io/v1alpha1', kind: 'Application', name: c, namespace: 'argocd'})
      expect(app?.status).toMatchObject({sync: {status: 'Synced'}, health: {status: 'Healthy'}})
    }
    expect(jsonResult<{promotion: string}>(first).promotion).toBe('Manual')
    // The plain summary says it and names the command for every later bundle.
    const plain = await runIchor(manual, reference.env)
    expect(plain.code, failure(plain)).toBe(0)
    expect(plain.stdout).toMatch(/Promotion: +Manual\. ichor approved the first install itself .*ichor stack promote argocd\|kokumi/)
  }, 300_000)

  it('a no-op rerun changes nothing', async () => {
    const again = await runIchor([...manual, '--json'], reference.env)
    expect(again.code, failure(again)).toBe(0)
    expect(endEvent(again)).toMatchObject({ok: true, changed: false})
  }, 300_000)

  // Issue 12 point 11: a second laptop (another state folder) against nodes the first one configured.
  it('a second init with another state folder is refused naming the node, and the cluster keeps the first bundle', async () => {
    const other = join(reference.stateDir, '..', 'second-laptop')
    const args = manual.map((a, i) => (manual[i - 1] === '--state-dir' ? other : a))
    const second = await runIchor(args, reference.env)
    expect(second.code, failure(second)).toBe(3)
    const said = `${second.stdout}\n${second.stderr}`
    expect(said).toMatch(/node 127\.0\.0\.11 is already configured from another Talos secrets bundle: it refuses the talosconfig in \S*second-laptop/)
    expect(said).toMatch(/another machine ran ichor init against these nodes.*--state-dir/s)
    expect(said).toMatch(/talosctl reset/)
    const stored = (
      await readTalosBundle(
        kube,
        () => readStateKeyFile(reference.stateKeyFile, 'the harness key'),
        () => undefined,
      )
    )?.bundle
    expect(stored?.secretsYaml.toString('utf8')).toBe(readFileSync(join(reference.stateDir, 'secrets.yaml'), 'utf8'))
    expect(readFileSync(join(other, 'secrets.yaml'), 'utf8')).not.toBe(stored?.secretsYaml.toString('utf8'))
    // The first laptop still converges with nothing to do.
    const again = await runIchor([...manual, '--json'], reference.env)
    expect(endEvent(again)).toMatchObject({ok: true, changed: false})
  }, 300_000)

  // Kill anywhere, on the HA layout (this replaced a 1+1 variant: the steps are the same, and here
  // every node step acts on five nodes). SIGKILL as each task begins, plus once inside the
  // parallel applies (some nodes configured, others not) and once inside the helm adoption; each
  // run is rerun by the next; the end state equals the uninterrupted run's, and the generated
  // passwords created first are never regenerated.
  it('killed at every task boundary, inside the applies and inside the helm adoption: reruns converge to the uninterrupted end state', async () => {
    const killArgs = [...killed.initArgs, '--promotion', 'Manual', '--json']
    const taskIds = (jsonEvents(first).find((e) => e.event === 'start') as Event).tasks!.map((t) => t.id)
    expect(taskIds.length).toBeGreaterThan(15)
    const kube = await connectKube({kubeconfig: killed.cp.kubeconfigPath})
    const adminSecret = async () =>
      (await getObject<Obj>(kube, {apiVersion: 'v1', kind: 'Secret', name: 'ichor-kokumi-admin', namespace: 'ichor-system'}).catch(() => undefined))?.data
    let firstPasswords: Record<string, string> | undefined
    const log: string[] = []
    for (let k = 0; k < taskIds.length; k++) {
      const run = await runIchor(killArgs, killed.env, {killOn: (e) => e.event === 'task' && e.index === k && e.status === 'checking'})
      log.push(`kill before ${taskIds[k]}: ${run.signal ?? `exit ${run.code}`}`)
      expect(run.code === 0 || run.signal === 'SIGKILL', `${taskIds[k]}: ${failure(run)}`).toBe(true)
      firstPasswords ??= await adminSecret()
      if (taskIds[k] === 'apply-configs') {
        const inside = await runIchor(killArgs, killed.env, {killOn: (e) => e.event === 'progress' && e.id === 'apply-configs'})
        log.push(`kill inside apply-configs: ${inside.signal ?? `exit ${inside.code}`}`)
      }
      if (taskIds[k] === 'adopt-cilium') {
        // helm install --take-ownership is running when the kill comes.
        let child: {kill(signal: NodeJS.Signals): boolean} | undefined
        const inside = await runIchor(killArgs, killed.env, {
          onStart: (c) => (child = c),
          killOn: (e) => {
            if (e.event === 'task' && e.id === 'adopt-cilium' && e.status === 'running') setTimeout(() => child?.kill('SIGKILL'), 400)
            return false
          },
        })
        log.push(`kill inside adopt-cilium: ${inside.signal ?? `exit ${inside.code}`}`)
      }
    }
    const last = await runIchor(killArgs, killed.env)
    expect(last.code, `${log.join('\n')}\n${failure(last)}`).toBe(0)
    expect(log.filter((l) => l.startsWith('kill before') && l.endsWith('SIGKILL')).length, log.join('\n')).toBeGreaterThan(taskIds.length - 2)
    expect(log, log.join('\n')).toContain('kill inside apply-configs: SIGKILL')
    const dump = await canonicalDump(kube, killed)
    expect(dump).toEqual(expected)
    for (const ip of killed.controlPlanes) expect(inlineManifestForms(nodeConfig(killed, ip)), ip).toEqual([])
    expect(firstPasswords).toBeDefined()
    expect(await adminSecret()).toEqual(firstPasswords)
    const again = await runIchor(killArgs, killed.env)
    expect(endEvent(again)).toMatchObject({ok: true, changed: false})
  }, 2_400_000)
})
