// Issue 13 point 10: a helm that outlived its ichor run (ichor SIGKILLed mid-install) goes
// on to finish the release; the next run must wait for it before acting, and must stop
// with a clear message when the release stays pending because its helm died too.
// Real control plane, real helm; the machines (kwok) arriving decide when helm's
// --wait can end.
import {spawn} from 'node:child_process'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {findHelm} from '../../src/lib/helm/binary.js'
import {ReleasePendingError, waitForSettledRelease} from '../../src/lib/helm/pending.js'
import {readReleaseRecord} from '../../src/lib/helm/release.js'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
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
