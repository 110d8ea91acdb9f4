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
import type {CniContext} from '../../src/lib/cilium/context.js'
import {adoptCiliumTask, ciliumReleaseView, upgradeCiliumValuesTask} from '../../src/lib/cilium/tasks.js'
import {findHelm} from '../../src/lib/helm/binary.js'
import {ReleasePendingError, settlePendingRelease, waitForSettledRelease} from '../../src/lib/helm/pending.js'
import {HELM_MACHINE_LABEL, HELM_RUN_LABEL, helmRunningHere, machineMark} from '../../src/lib/helm/local-helms.js'
import {HELM_TIMEOUT_LABEL, HelmReleaseError, helmUpgrade, upgradeArgs} from '../../src/lib/helm/release.js'
import {decodeReleaseSecret, readReleaseRecord, type ReleaseSecret, valuesHash} from '../../src/lib/helm/release-record.js'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {openSession, type Session} from '../../src/lib/session/session.js'
import {startControlPlane, type ControlPlane} from '../harness/apiserver.js'
import {testHelms} from '../harness/helm.js'
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
  const child = spawn(helm.path, ['install', release, chart, '--namespace', 'default', '--wait', '--timeout', '120s', '--kubeconfig', cp.kubeconfigPath], {
    stdio: 'ignore',
  })
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
    const error = (await waitForSettledRelease(kube, 'killed-mid-install', 'default', {intervalMs: 100, timeoutMs: 500}).catch(
      (e: unknown) => e,
    )) as ReleasePendingError
    expect(error).toBeInstanceOf(ReleasePendingError)
    expect(error.message).toMatch(
      /^Helm release default\/killed-mid-install is still pending-install \(revision 1, Secret sh\.helm\.release\.v1\.killed-mid-install\.v1\) after waiting \d+s/,
    )
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
    (
      await kube.request<{items: Array<{metadata: {name: string; labels?: Record<string, string>}}>}>('GET', '/api/v1/namespaces/kube-system/secrets', {
        query: {labelSelector: 'owner=helm,name=cilium'},
      })
    ).items
      .map((s) => `${s.metadata.name} ${s.metadata.labels?.status}`)
      .sort()

  let ported: string

  it('after a first install that failed (a lone revision 1) removes that record and adopts again', async () => {
    ported = writePortChart(work)
    expect((await helm(['install', 'cilium', ported, '--set', 'port=99999'])).exitCode).not.toBe(0)
    expect(await secrets()).toEqual(['sh.helm.release.v1.cilium.v1 failed'])
    const session = openSession({command: 'init', kubeconfig: cp.kubeconfigPath})
    try {
      const task = adoptCiliumTask({
        session,
        release: ciliumReleaseView(session),
        chartPath: async () => ported,
        values: async () => ({port: 8080}),
        timeoutMs: 30_000,
      })
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
      const task = adoptCiliumTask({
        session,
        release: ciliumReleaseView(session),
        chartPath: async () => ported,
        values: async () => ({port: 8080}),
        timeoutMs: 5_000,
      })
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

/**
 * The helm upgrade a SIGKILLed ichor leaves behind, on a fresh release of the unschedulable
 * chart: ichor's own arguments (rollback on failure, its labels), its wait never ending before
 * `timeoutSeconds`. Resolves once helm wrote its pending-upgrade record.
 */
async function orphanUpgrade(release: string, timeoutSeconds: number) {
  const unschedulable = writeUnschedulableChart(work)
  const helm = await findHelm()
  const install = spawn(helm.path, ['install', release, unschedulable, '--namespace', 'default', '--kubeconfig', cp.kubeconfigPath], {stdio: 'ignore'})
  expect(await new Promise((r) => install.on('close', r))).toBe(0)
  const args = upgradeArgs(helm, {
    kubeconfig: cp.kubeconfigPath,
    release,
    namespace: 'default',
    chartPath: unschedulable,
    values: {tag: '2'},
    wait: true,
    rollbackOnFailure: true,
    timeoutSeconds,
  })
  const orphan = spawn(helm.path, args, {stdio: ['pipe', 'ignore', 'ignore']})
  orphan.stdin.end(JSON.stringify({tag: '2'}))
  const exited = new Promise<number | null>((r) => orphan.on('close', r))
  while ((await readReleaseRecord(kube, release, 'default'))?.status !== 'pending-upgrade') await new Promise((r) => setTimeout(r, 100))
  return {orphan, exited, pending: (await readReleaseRecord(kube, release, 'default'))!}
}

/** A Deployment no node can take (a node selector nothing matches): helm's --wait never ends before its --timeout. */
function writeUnschedulableChart(dir: string): string {
  const path = join(dir, 'unschedulable')
  mkdirSync(join(path, 'templates'), {recursive: true})
  writeFileSync(join(path, 'Chart.yaml'), 'apiVersion: v2\nname: unschedulable\nversion: 0.1.0\n')
  writeFileSync(join(path, 'values.yaml'), 'tag: "1"\n')
  writeFileSync(
    join(path, 'templates', 'deployment.yaml'),
    `apiVersion: apps/v1
kind: Deployment
metadata: {name: {{ .Release.Name }}, namespace: {{ .Release.Namespace }}}
spec:
  replicas: 1
  selector: {matchLabels: {app: {{ .Release.Name }}}}
  template:
    metadata: {labels: {app: {{ .Release.Name }}}, annotations: {tag: {{ .Values.tag | quote }}}}
    spec: {nodeSelector: {no-such-node: "true"}, containers: [{name: app, image: registry.invalid/app:1}]}
`,
  )
  return path
}

// Issue 21 point 12: the record of an interrupted upgrade was deleted after at most 60 s
// while the helm a killed ichor left running may work for its whole --timeout: two
// operations could then run at once. The record now says which --timeout ichor gave its helm.
describe('a pending record whose helm is still working', () => {
  it('settlePendingRelease deletes nothing while the helm that wrote it is within the --timeout ichor gave it, whatever wait the caller asks for', async () => {
    const release = 'still-working'
    // The helm upgrade a SIGKILLed ichor leaves behind, --timeout 8s.
    const {exited, pending} = await orphanUpgrade(release, 8)
    expect(pending.labels?.[HELM_TIMEOUT_LABEL]).toBe('8')

    // A rerun asking to wait 2 s (less than the orphan's --timeout)
    const progress: string[] = []
    const started = Date.now()
    const left = await settlePendingRelease(kube, release, 'default', {waitMs: 2_000, progress: (m) => progress.push(m)})
    const waited = Date.now() - started
    console.log(`settle waited ${waited} ms; progress: ${JSON.stringify(progress)}; left ${left?.revision} ${left?.status}`)

    // Then it waited for helm's own outcome of revision 2 and removed no record
    expect(progress.filter((m) => /removed the record/.test(m))).toEqual([])
    expect(progress[0]).toMatch(/a helm from an interrupted run is still working on it: ichor waits for it up to \d+s \(the --timeout 8s it was given\)/)
    expect(left && left.revision >= 2 && left.status !== 'pending-upgrade').toBe(true)
    expect(await exited).not.toBe(0)
    const revisions = (
      await kube.request<{items: Array<{metadata: {labels?: Record<string, string>}}>}>('GET', '/api/v1/namespaces/default/secrets', {
        query: {labelSelector: `owner=helm,name=${release}`},
      })
    ).items
      .map((s) => `${s.metadata.labels?.version} ${s.metadata.labels?.status}`)
      .sort()
    // Revision 2 failed (its wait timed out) and helm's rollback wrote revision 3.
    expect(revisions).toEqual(['1 deployed', '2 failed', '3 failed'])
  }, 90_000)
})

// The common case of point 12: ichor and its helm both killed (a crash, a closed laptop lid
// that ends the session), rerun from the same machine. Waiting out a helm that is provably
// gone only delays the operator; one marked as another machine's is waited out.
describe('a pending record whose helm ran on this machine and is gone', () => {
  it("is removed at once when no helm of this machine works on the release; the same record marked as another machine's is waited out", async () => {
    const release = 'gone-here'
    const {orphan, exited, pending} = await orphanUpgrade(release, 120)
    expect(pending.labels?.[HELM_MACHINE_LABEL]).toBe(machineMark())
    const token = pending.labels![HELM_RUN_LABEL]!
    expect(helmRunningHere(token)).toBe(true)
    orphan.kill('SIGKILL')
    await exited
    expect(helmRunningHere(token)).toBe(false)

    // Marked as another machine's: a helm there may still work for its --timeout (120 s).
    const patchMachine = (value: string) =>
      kube.request('PATCH', `/api/v1/namespaces/default/secrets/${pending.secretName}`, {
        body: {metadata: {labels: {[HELM_MACHINE_LABEL]: value}}},
        contentType: 'application/merge-patch+json',
      })
    await patchMachine('another-machine')
    const told: string[] = []
    const waitedOut = settlePendingRelease(kube, release, 'default', {progress: (m) => told.push(m)})
    await new Promise((r) => setTimeout(r, 3_000))
    expect(told.join('\n')).toMatch(/still working on it: ichor waits for it up to \d+s \(the --timeout 120s it was given\)/)
    expect((await readReleaseRecord(kube, release, 'default'))?.status).toBe('pending-upgrade')

    // This machine's again: the settle under way removes it on its next look.
    await patchMachine(machineMark()!)
    const started = Date.now()
    const left = await waitedOut
    console.log(`settled ${Date.now() - started} ms after the mark came back; progress: ${JSON.stringify(told)}`)
    expect(Date.now() - started).toBeLessThan(10_000)
    expect(told.join('\n')).toMatch(/written by a helm on this machine that is no longer running/)
    expect(left).toMatchObject({revision: 1, status: 'deployed'})
  }, 90_000)
})

// Issue 38 point 1: every `helm upgrade` copies the last revision's labels forward (helm
// v3.18.6 pkg/action/upgrade.go prepareUpgrade, mergeCustomLabels(lastRelease.Labels, ...)),
// so an operator's plain `helm upgrade` writes a pending record carrying ichor's machine mark
// and timeout label. ichor must not take it for one of its own helms that is gone.
describe('a pending record written by a helm ichor did not start, with the labels it inherited', () => {
  it('is neither removed nor upgraded over: ichor waits it out and stops naming it', async () => {
    const release = 'operators-helm'
    const unschedulable = writeUnschedulableChart(work)
    const helm = await findHelm()
    const install = spawn(helm.path, ['install', release, unschedulable, '--namespace', 'default', '--kubeconfig', cp.kubeconfigPath], {stdio: 'ignore'})
    expect(await new Promise((r) => install.on('close', r))).toBe(0)
    // Revision 2: ichor's own upgrade (its labels), deployed.
    const ours = spawn(
      helm.path,
      upgradeArgs(helm, {
        kubeconfig: cp.kubeconfigPath,
        release,
        namespace: 'default',
        chartPath: unschedulable,
        values: {},
        wait: false,
        rollbackOnFailure: false,
      }),
      {
        stdio: ['pipe', 'ignore', 'ignore'],
      },
    )
    ours.stdin.end('{}')
    expect(await new Promise((r) => ours.on('close', r))).toBe(0)
    // Revision 3: the operator's plain helm upgrade, still waiting.
    const operators = spawn(
      helm.path,
      ['upgrade', release, unschedulable, '--namespace', 'default', '--set', 'tag=3', '--wait', '--timeout', '120s', '--kubeconfig', cp.kubeconfigPath],
      {stdio: 'ignore'},
    )
    const exited = new Promise((r) => operators.on('close', r))
    try {
      while ((await readReleaseRecord(kube, release, 'default'))?.status !== 'pending-upgrade') await new Promise((r) => setTimeout(r, 100))
      const pending = (await readReleaseRecord(kube, release, 'default'))!
      // The precondition: it carries ichor's labels, copied forward by helm.
      expect(pending.labels?.[HELM_MACHINE_LABEL]).toBe(machineMark())
      expect(pending.labels?.[HELM_TIMEOUT_LABEL]).toBe('300')

      const progress: string[] = []
      const settled = await settlePendingRelease(kube, release, 'default', {waitMs: 1_000, progress: (m) => progress.push(m)}).then(
        (r) => r,
        (e: unknown) => e,
      )
      console.log(`settle: ${settled instanceof Error ? settled.message : JSON.stringify(settled)}; progress ${JSON.stringify(progress)}`)
      expect(settled).toBeInstanceOf(ReleasePendingError)
      expect((settled as Error).message).toMatch(
        /operators-helm is still pending-upgrade \(revision 3, Secret sh\.helm\.release\.v1\.operators-helm\.v3\).*a helm ichor did not start/s,
      )
      expect(progress.filter((m) => /removed the record/.test(m))).toEqual([])
      expect(progress.join('\n')).toMatch(/a helm ichor did not start is working on it/)
      expect((await readReleaseRecord(kube, release, 'default'))?.revision).toBe(3)
      expect((await readReleaseRecord(kube, release, 'default'))?.status).toBe('pending-upgrade')
    } finally {
      operators.kill('SIGKILL')
      await exited
    }
  }, 90_000)
})

// Issue 21 point 12, the other way round (1 of 7 kills of ichor alone in the chaos run): the
// helm a killed run left behind writes its pending record just after the rerun's wait read
// the release, and helm refuses the rerun's upgrade with "another operation is in progress".
describe('cni values set meeting a helm from the interrupted run', () => {
  it('says a helm from the interrupted run is still working and how long ichor waits, waits for it, then upgrades', async () => {
    // kube-system/cilium is the release the adoption tests above left (chart "ported", a Service).
    const ported = join(work, 'ported')
    const unschedulable = writeUnschedulableChart(work)
    const helm = await findHelm()
    let orphanExited: Promise<number | null> | undefined
    // The race, made deterministic: the orphan starts between the rerun's wait and its helm
    // (the step asks for helm's target right before it runs helm).
    const raced = {
      kube: async () => kube,
      guard: async () => {},
      async helmTarget() {
        if (!orphanExited) {
          const args = upgradeArgs(helm, {
            kubeconfig: cp.kubeconfigPath,
            release: 'cilium',
            namespace: 'kube-system',
            chartPath: unschedulable,
            values: {},
            wait: true,
            rollbackOnFailure: true,
            timeoutSeconds: 6,
          })
          const orphan = spawn(helm.path, args, {stdio: ['pipe', 'ignore', 'ignore']})
          orphan.stdin.end('{}')
          orphanExited = new Promise((r) => orphan.on('close', r))
          for (let i = 0; !/^pending-/.test((await readReleaseRecord(kube, 'cilium', 'kube-system'))?.status ?? ''); i++) {
            if (i > 100) throw new Error('the orphan helm wrote no pending record')
            await new Promise((r) => setTimeout(r, 100))
          }
        }
        return {kubeconfig: cp.kubeconfigPath}
      },
    } as unknown as Session
    const effective = {port: 8443}
    // The plan read the release before the orphan started.
    const context = {release: await readReleaseRecord(kube, 'cilium', 'kube-system')} as CniContext
    const change = {user: effective, effective, hash: valuesHash(effective), chartPath: ported, chartVersion: '0.1.0', previousUser: {}, notes: [], context}
    const progress: string[] = []
    const task = upgradeCiliumValuesTask({session: raced, change: async () => change, timeoutMs: 30_000})
    const outcome = await task
      .run((m) => progress.push(m))
      .then(
        () => 'ok',
        (e: Error) => e.message,
      )
    console.log(`outcome: ${outcome}; progress: ${JSON.stringify(progress)}`)
    expect(outcome).toBe('ok')
    expect(progress).toContain('helm refused: a helm from an interrupted run is still working on release kube-system/cilium; waiting for it, then trying again')
    expect(
      progress.some((m) => /a helm from an interrupted run is still working on it: ichor waits for it up to \d+s \(the --timeout 6s it was given\)/.test(m)),
    ).toBe(true)
    expect(await orphanExited).not.toBe(0)
    expect(await readReleaseRecord(kube, 'cilium', 'kube-system')).toMatchObject({status: 'deployed', chartName: 'ported', config: effective})
  }, 90_000)
})

// Issue 38 point 2: helm's Secret driver replaces a record without a resourceVersion (v3.18.6
// and v4 pkg/storage/driver/secrets.go Update), so deleting a pending record and reusing its
// revision number cannot fence a helm that was only paused (a closed laptop lid): it wakes and
// overwrites the record the next run wrote. A paused helm is still a process on this machine.
describe('a helm paused past its deadline, a second ichor, then the helm woken', () => {
  it('the second run removes and writes nothing and stops naming the record and helm rollback; the woken helm ends it; the history is consistent for both majors', async () => {
    // kube-system/cilium is the release the tests above left (chart "ported", deployed).
    const ported = join(work, 'ported')
    const unschedulable = writeUnschedulableChart(work)
    const helm = await findHelm()
    const args = upgradeArgs(helm, {
      kubeconfig: cp.kubeconfigPath,
      release: 'cilium',
      namespace: 'kube-system',
      chartPath: unschedulable,
      values: {},
      wait: true,
      rollbackOnFailure: true,
      timeoutSeconds: 3,
    })
    const first = spawn(helm.path, args, {stdio: ['pipe', 'ignore', 'ignore']})
    first.stdin.end('{}')
    const firstExited = new Promise<number | null>((r) => first.on('close', r))
    try {
      while ((await readReleaseRecord(kube, 'cilium', 'kube-system'))?.status !== 'pending-upgrade') await new Promise((r) => setTimeout(r, 50))
      first.kill('SIGSTOP')
      const pending = (await readReleaseRecord(kube, 'cilium', 'kube-system'))!

      // A second ichor, past the paused helm's deadline (its --timeout 3s plus helm's grace).
      const session = {kube: async () => kube, guard: async () => {}, helmTarget: async () => ({kubeconfig: cp.kubeconfigPath})} as unknown as Session
      const effective = {port: 8444}
      const context = {release: pending} as CniContext
      const change = {user: effective, effective, hash: valuesHash(effective), chartPath: ported, chartVersion: '0.1.0', previousUser: {}, notes: [], context}
      const progress: string[] = []
      const started = Date.now()
      const outcome = await upgradeCiliumValuesTask({session, change: async () => change, timeoutMs: 30_000})
        .run((m) => progress.push(m))
        .then(
          () => undefined,
          (e: unknown) => e,
        )
      console.log(`second run after ${Date.now() - started} ms: ${outcome instanceof Error ? outcome.message : 'ok'}; progress ${JSON.stringify(progress)}`)
      // Its deadline: created (whole seconds) + --timeout 3 s + helm's 30 s grace.
      expect(Date.now() - (pending.createdAt ?? 0)).toBeGreaterThan(32_000)
      expect(outcome).toBeInstanceOf(ReleasePendingError)
      expect((outcome as ReleasePendingError).exitCode).toBe(1)
      expect((outcome as Error).message).toMatch(
        new RegExp(
          `cilium is still pending-upgrade \\(revision ${pending.revision}, Secret ${pending.secretName.replace(/\./g, '\\.')}\\).*cannot prove the helm that wrote it stopped`,
          's',
        ),
      )
      expect((outcome as ReleasePendingError).hint).toMatch(/helm rollback cilium -n kube-system/)
      expect(progress.filter((m) => /removed the record/.test(m))).toEqual([])
      const afterSecond = await recordsOf('cilium', 'kube-system')
      expect(afterSecond.at(-1)).toMatchObject({revision: pending.revision, status: 'pending-upgrade'})

      // When the paused helm wakes, it ends its own upgrade (its wait ran out: failed, rolled back).
      first.kill('SIGCONT')
      expect(await firstExited).not.toBe(0)
      const after = await recordsOf('cilium', 'kube-system')
      console.log(`history after the woken helm: ${JSON.stringify(after.map((r) => `${r.revision} ${r.status}`))}`)
      // No record the second run saw was rewritten with other contents, revisions are contiguous, one is deployed.
      for (const seen of afterSecond) expect(after.find((r) => r.revision === seen.revision)).toMatchObject({config: seen.config, manifest: seen.manifest})
      expect(after.map((r) => r.revision)).toEqual(after.map((_, i) => i + 1))
      expect(after.filter((r) => r.status === 'deployed')).toHaveLength(1)
      expect(after.at(-1)).toMatchObject({revision: pending.revision + 1, status: 'deployed', chartName: 'ported'})
      expect(after.find((r) => r.revision === pending.revision)?.status).toBe('failed')
      // helm of both majors reads the same history and status as ichor.
      const newest = await readReleaseRecord(kube, 'cilium', 'kube-system')
      for (const {major, path} of testHelms()) {
        const target = ['--namespace', 'kube-system', '--kubeconfig', cp.kubeconfigPath, '-o', 'json']
        const history = JSON.parse((await execa(path, ['history', 'cilium', ...target])).stdout) as Array<{revision: number; status: string}>
        expect(
          history.map((h) => `${h.revision} ${h.status}`),
          `helm ${major} history`,
        ).toEqual(after.map((r) => `${r.revision} ${r.status}`))
        const status = JSON.parse((await execa(path, ['status', 'cilium', ...target])).stdout) as {version: number; info: {status: string}}
        expect({revision: status.version, status: status.info.status}, `helm ${major} status`).toEqual({revision: newest?.revision, status: newest?.status})
      }
    } finally {
      first.kill('SIGCONT')
      first.kill('SIGKILL')
      await firstExited
    }
  }, 120_000)
})

/** Every revision's record of the release, oldest first, decoded from its Secret. */
async function recordsOf(release: string, namespace: string) {
  const {items} = await kube.request<{items: ReleaseSecret[]}>('GET', `/api/v1/namespaces/${namespace}/secrets`, {
    query: {labelSelector: `owner=helm,name=${release}`},
  })
  return items.map(decodeReleaseSecret).sort((a, b) => a.revision - b.revision)
}

// Issue 38 point 3: the guard against a hung helm signalled it at --timeout + 120 s, which cut
// the rollback of a failed --atomic / --rollback-on-failure upgrade: helm gives the rollback
// the upgrade's --timeout again (helm v3.18.6 and v4 pkg/action/upgrade.go failRelease), and a
// helm signalled then leaves the release pending-rollback for good. The guard's margin is
// made small here so that --timeout + margin falls inside the rollback, with real helm.
describe('the guard against a hung helm, on an upgrade whose rollback outlives --timeout + margin', () => {
  it('lets helm finish its rollback and reports what the release record says', async () => {
    const release = 'guarded'
    const unschedulable = writeUnschedulableChart(work)
    const helm = await findHelm()
    const install = spawn(helm.path, ['install', release, unschedulable, '--namespace', 'default', '--kubeconfig', cp.kubeconfigPath], {stdio: 'ignore'})
    expect(await new Promise((r) => install.on('close', r))).toBe(0)
    // The upgrade's wait runs out at 5 s; the rollback (to a revision no node can take either)
    // waits 5 s more. The old guard signalled at 5 s + 3 s.
    const started = Date.now()
    const error = await helmUpgrade({
      kubeconfig: cp.kubeconfigPath,
      release,
      namespace: 'default',
      chartPath: unschedulable,
      values: {tag: '2'},
      wait: true,
      rollbackOnFailure: true,
      timeoutSeconds: 5,
      guardMarginMs: 3_000,
    }).then(
      () => undefined,
      (e: unknown) => e,
    )
    const took = Date.now() - started
    console.log(`helm upgrade ended after ${took} ms: ${(error as Error | undefined)?.message}`)
    expect(error).toBeInstanceOf(HelmReleaseError)
    // helm's own outcome, not the guard's: its rollback ran to its end.
    expect((error as HelmReleaseError).helmMessage).toMatch(/an error occurred while rolling back the release/)
    expect(took).toBeGreaterThan(8_000)
    expect((error as HelmReleaseError).helmMessage).toMatch(/\(the release record says revision 3 is failed\)$/)
    const history = (await recordsOf(release, 'default')).map((r) => `${r.revision} ${r.status}`)
    expect(history).toEqual(['1 deployed', '2 failed', '3 failed'])
  }, 90_000)
})
