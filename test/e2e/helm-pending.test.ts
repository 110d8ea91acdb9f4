// Issue 13 point 10: a helm that outlived its ichor run (ichor SIGKILLed mid-install) goes
// on to finish the release; the next run must wait for it before acting, and must stop
// with a clear message when the release stays pending because its helm died too.
// Real control plane, real helm; the machines (kwok) arriving decide when helm's
// --wait can end.
import {spawn} from 'node:child_process'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {execa} from 'execa'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {adoptCiliumTask, ciliumReleaseView} from '../../src/lib/cilium/tasks.js'
import {findHelm} from '../../src/lib/helm/binary.js'
import {ReleasePendingError, waitForSettledRelease} from '../../src/lib/helm/pending.js'
import {readReleaseRecord} from '../../src/lib/helm/release.js'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {openSession} from '../../src/lib/session/session.js'
import {startControlPlane, type ControlPlane} from '../harness/apiserver.js'
import {startMachines} from '../harness/machines.js'

let cp: ControlPlane
let kube: Kube
let work: string
let chart: string

function writeChart(dir: string): string {
  const path = join(dir, 'slow')
  mkdirSync(join(path, 'templates'), {recursive: true})
  writeFileSync(join(path, 'Chart.yaml'), 'apiVersion: v2\nname: slow\nversion: 0.1.0\n')
  writeFileSync(
    join(path, 'templates', 'deployment.yaml'),
    `apiVersion: apps/v1
kind: Deployment
metadata: {name: {{ .Release.Name }}, namespace: {{ .Release.Namespace }}}
spec:
  replicas: 1
  selector: {matchLabels: {app: {{ .Release.Name }}}}
  template:
    metadata: {labels: {app: {{ .Release.Name }}}}
    spec: {containers: [{name: app, image: registry.invalid/app:1}]}
`,
  )
  return path
}

/** A helm install --wait that nobody awaits, as a SIGKILLed ichor leaves behind. */
async function orphanHelmInstall(release: string) {
  const helm = await findHelm()
  const child = spawn(helm.path, ['install', release, chart, '--namespace', 'default', '--wait', '--timeout', '120s', '--kubeconfig', cp.kubeconfigPath], {stdio: 'ignore'})
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
  // Until helm has written its pending-install record.
  while ((await readReleaseRecord(kube, release, 'default'))?.status !== 'pending-install') await new Promise((r) => setTimeout(r, 200))
  return {child, exited}
}

beforeAll(async () => {
  cp = await startControlPlane()
  kube = await connectKube({kubeconfig: cp.kubeconfigPath})
  work = mkdtempSync(join(tmpdir(), 'ichor-helm-pending-'))
  chart = writeChart(work)
})

afterAll(async () => {
  await cp?.stop()
  rmSync(work, {recursive: true, force: true})
})

describe('waitForSettledRelease', () => {
  it('waits while a helm left running by an earlier run finishes the release, then returns the deployed record', async () => {
    // Given a helm install still waiting for its Deployment (release pending-install)
    const orphan = await orphanHelmInstall('left-running')
    const progress: string[] = []
    let simulatorStarted = false
    let settledWhilePending = false
    const waiting = waitForSettledRelease(kube, 'left-running', 'default', {intervalMs: 200, timeoutMs: 120_000, onProgress: (m) => progress.push(m)})
    void waiting.then(() => (settledWhilePending = !simulatorStarted))

    // When the workload becomes ready, so that helm can finish
    await new Promise((r) => setTimeout(r, 1000))
    simulatorStarted = true
    const sim = await startMachines(cp.kubeconfigPath, {nodes: 1})
    try {
      // Then the wait ends only with helm's own outcome
      const record = await waiting
      expect(settledWhilePending).toBe(false)
      expect(record?.status).toBe('deployed')
      expect(await orphan.exited).toBe(0)
      expect(progress).toEqual(['release default/left-running is pending-install: waiting for the helm working on it to finish'])
    } finally {
      await sim.stop()
    }
  })

  it('stops with a clear error when the release stays pending because its helm was killed too', async () => {
    // Given a helm killed mid-install: nobody will ever finish the release
    const orphan = await orphanHelmInstall('killed-mid-install')
    orphan.child.kill('SIGKILL')
    await orphan.exited

    // When the next run waits for it, Then it gives up naming the release, its status and what to do
    const error = (await waitForSettledRelease(kube, 'killed-mid-install', 'default', {intervalMs: 100, timeoutMs: 500}).catch((e: unknown) => e)) as ReleasePendingError
    expect(error).toBeInstanceOf(ReleasePendingError)
    expect(error.message).toMatch(/^Helm release default\/killed-mid-install is still pending-install \(revision 1\) after waiting \d+s/)
    expect(error.hint).toMatch(/helm rollback killed-mid-install -n default/)
  })

  it('returns at once when the release has no record or a settled one', async () => {
    expect(await waitForSettledRelease(kube, 'never-installed', 'default', {timeoutMs: 0})).toBeUndefined()
  })
})

/** A chart whose ConfigMap takes `port`: out of range, the API server refuses it and the helm operation fails at once. */
function writePortChart(dir: string): string {
  const path = join(dir, 'ported')
  mkdirSync(join(path, 'templates'), {recursive: true})
  writeFileSync(join(path, 'Chart.yaml'), 'apiVersion: v2\nname: ported\nversion: 0.1.0\n')
  writeFileSync(join(path, 'values.yaml'), 'port: 8080\n')
  writeFileSync(
    join(path, 'templates', 'service.yaml'),
    `apiVersion: v1
kind: Service
metadata: {name: {{ .Release.Name }}-svc, namespace: {{ .Release.Namespace }}}
spec:
  ports: [{port: {{ .Values.port }}}]
`,
  )
  return path
}

// Issue 21 point 13: init's "interrupted adoption" cleanup deleted every non-deployed record,
// superseded revisions included (the rollback history Cilium's upgrade guide relies on), then
// failed with "cannot reuse a name that is still in use". Only a lone first revision that
// never deployed is an interrupted adoption. Real helm; the release is kube-system/cilium
// as init adopts it, with a small chart.
describe('the adoption step on a rerun of init', () => {
  const helm = async (args: string[]) => {
    const run = await execa((await findHelm()).path, [...args, '--namespace', 'kube-system', '--kubeconfig', cp.kubeconfigPath], {reject: false})
    return run
  }
  const secrets = async () =>
    (await kube.request<{items: Array<{metadata: {name: string; labels?: Record<string, string>}}>}>('GET', '/api/v1/namespaces/kube-system/secrets', {query: {labelSelector: 'owner=helm,name=cilium'}})).items
      .map((s) => `${s.metadata.name} ${s.metadata.labels?.status}`)
      .sort()

  let ported: string

  it('after a first install that failed (a lone revision 1) removes that record and adopts again', async () => {
    ported = writePortChart(work)
    expect((await helm(['install', 'cilium', ported, '--set', 'port=99999'])).exitCode).not.toBe(0)
    expect(await secrets()).toEqual(['sh.helm.release.v1.cilium.v1 failed'])
    const session = openSession({command: 'init', kubeconfig: cp.kubeconfigPath})
    try {
      const task = adoptCiliumTask({session, release: ciliumReleaseView(session), chartPath: async () => ported, values: async () => ({port: 8080}), timeoutMs: 30_000})
      expect(await task.probe()).toMatchObject({done: false})
      const progress: string[] = []
      await task.run((m) => progress.push(m))
      expect(progress).toContain('removed the record of an adoption that did not finish (failed)')
      expect(await secrets()).toEqual(['sh.helm.release.v1.cilium.v1 deployed'])
    } finally {
      await session.close()
    }
  })

  it('after a failed day-2 upgrade keeps every revision (superseded and failed), changes nothing and says what failed', async () => {
    expect((await helm(['upgrade', 'cilium', ported, '--set', 'port=8081'])).exitCode).toBe(0)
    // A day-2 upgrade that failed and was not rolled back: revision 3 failed.
    const failed = await helm(['upgrade', 'cilium', ported, '--set', 'port=99999'])
    expect(failed.exitCode).not.toBe(0)
    const before = await secrets()
    expect(before).toEqual(['sh.helm.release.v1.cilium.v1 superseded', 'sh.helm.release.v1.cilium.v2 deployed', 'sh.helm.release.v1.cilium.v3 failed'])

    const session = openSession({command: 'init', kubeconfig: cp.kubeconfigPath})
    try {
      const task = adoptCiliumTask({session, release: ciliumReleaseView(session), chartPath: async () => ported, values: async () => ({port: 8080}), timeoutMs: 5_000})
      const probe = await task.probe()
      // The release was adopted long ago: the adoption holds, and says what the newest revision is.
      expect(probe).toMatchObject({done: true})
      expect(JSON.stringify(probe)).toMatch(/revision 3 is failed/)
      expect(JSON.stringify(probe)).toMatch(/ichor cni values set/)
      // Even run (the engine never runs a step that holds), it deletes nothing and installs nothing.
      const progress: string[] = []
      await task.run((m) => progress.push(m))
      expect(await secrets()).toEqual(before)
    } finally {
      await session.close()
    }
  })
})
