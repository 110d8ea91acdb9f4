// The restored converged cluster (test/harness/converged.ts) that most e2e files start from: it
// must be the cluster `init` left (the same canonical dump, ichor on it changes nothing), and
// every copy must be a cluster of its own.
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {join} from 'node:path'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {createIfAbsent} from '../../src/lib/kube/apply.js'
import {getObject} from '../../src/lib/kube/objects.js'
import {jsonEvents, runIchor, type HarnessCluster} from '../harness/cluster.js'
import {convergedCluster, convergedDump, convergedInit, CONVERGED_TIMEOUT_MS} from '../harness/converged.js'
import {canonicalDump} from '../harness/dump.js'

const marker = {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'written-by-one-copy', namespace: 'default'}, data: {a: 'b'}}
const markerRef = {apiVersion: 'v1', kind: 'ConfigMap', name: 'written-by-one-copy', namespace: 'default'}

describe('a converged cluster restored from the saved one', () => {
  let a: HarnessCluster
  let b: HarnessCluster
  let kubeA: Kube
  let kubeB: Kube

  beforeAll(async () => {
    // Two copies at once, as a file with a second cluster for a kill loop has.
    ;[a, b] = await Promise.all([convergedCluster('1+1'), convergedCluster('1+1')])
    kubeA = await connectKube({kubeconfig: a.cp.kubeconfigPath})
    kubeB = await connectKube({kubeconfig: b.cp.kubeconfigPath})
  }, CONVERGED_TIMEOUT_MS)
  afterAll(async () => {
    await a?.stop()
    await b?.stop()
  })

  it('the saved cluster was made by a successful init --json', async () => {
    const init = await convergedInit('1+1')
    expect(init.code).toBe(0)
    expect(jsonEvents(init).find((e) => e.event === 'end')).toMatchObject({
      ok: true,
      changed: true,
    })
  })

  it('is the cluster init left: the same canonical dump as before it was saved', async () => {
    expect(await canonicalDump(kubeA, a)).toEqual(await convergedDump('1+1'))
    expect(await canonicalDump(kubeB, b)).toEqual(await convergedDump('1+1'))
  })

  it('ichor works on it from its own state folder: cni status and stack status are healthy, an init rerun changes nothing', async () => {
    const kubeconfig = ['--kubeconfig', join(a.stateDir, 'kubeconfig')]
    const cni = await runIchor(['cni', 'status', ...kubeconfig, '--state-dir', a.stateDir], a.env)
    expect(cni.code, cni.stderr + cni.stdout).toBe(0)
    const stack = await runIchor(['stack', 'status', ...kubeconfig, '--registry-endpoint', a.registry.endpoint], a.env)
    expect(stack.code, stack.stderr + stack.stdout).toBe(0)
    const rerun = await runIchor([...a.initArgs, '--json'], a.env)
    expect(rerun.code, rerun.stderr.slice(-3000)).toBe(0)
    expect(jsonEvents(rerun).find((e) => e.event === 'end')).toMatchObject({ok: true, changed: false})
    expect(await canonicalDump(kubeA, a)).toEqual(await convergedDump('1+1'))
  })

  it('copies do not see each other: a write to one is in neither the other nor a later copy', async () => {
    expect(await createIfAbsent(kubeA, marker)).toBe('created')
    expect(await getObject(kubeA, markerRef)).toBeDefined()
    expect(await getObject(kubeB, markerRef)).toBeUndefined()
    const c = await convergedCluster('1+1')
    try {
      const kubeC = await connectKube({kubeconfig: c.cp.kubeconfigPath})
      expect(await getObject(kubeC, markerRef)).toBeUndefined()
    } finally {
      await c.stop()
    }
  })
})
