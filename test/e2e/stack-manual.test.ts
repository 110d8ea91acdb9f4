// Promotion Manual as a day-2 mode (issue 21, points 5 and 6), on one harness cluster made with
// `init --promotion Manual`: real apiserver, registry, helm, the real Argo CD chart and Kokumi
// 0.14.0 manifest and CRDs (Orders with spec.autoDeploy); simulated Talos nodes, readiness and
// Kokumi/Argo CD (stack-simulator.ts; its Preparation controller re-reconciles every Preparation
// on a restart, the last approved one listed re-pointing the Serving, as Kokumi 0.14.0 does).
import {mkdtempSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {getObject, listObjects, type KubeObject} from '../../src/lib/kube/objects.js'
import {OciClient} from '../../src/lib/oci/client.js'
import {readInstallation} from '../../src/lib/state/installation.js'
import {jsonEvents, runIchor, startHarnessCluster, type CliRun, type HarnessCluster} from '../harness/cluster.js'
import {kokumiLaterManifestFixture} from '../harness/fixtures.js'
import {killBeforeTask, taskIds} from '../harness/kill.js'
import type {StackStatus} from '../../src/lib/stack/status.js'
import {waitUntil} from '../harness/kube.js'
import {UPSTREAM} from '../support/upstream.js'

type Obj = KubeObject & {spec?: any; status?: any}
type Component = 'argocd' | 'kokumi'
const KOKUMI = 'delivery.kokumi.dev/v1alpha1'
const APPROVE = 'delivery.kokumi.dev/approve-deploy'
const AUTO = 'delivery.kokumi.dev/auto-deploy'

let h: HarnessCluster
let kube: Kube
let oci: OciClient
let day2: string[]
let assets: string[]
let manualInit: string[]

const said = (r: CliRun) => `${r.stdout}${r.stderr}`
const endEvent = (r: CliRun) => jsonEvents(r).find((e) => e.event === 'end') as {ok: boolean; changed: boolean} | undefined
const cli = (args: string[]) => runIchor([...args, ...day2], h.env)
/** promote and promotion set reach no registry: the kubeconfig only. */
const kubeCli = (args: string[]) => runIchor([...args, ...day2.slice(0, 2)], h.env)
const order = (c: Component) => getObject<Obj>(kube, {apiVersion: KOKUMI, kind: 'Order', name: c, namespace: c})
const serving = (c: Component) => getObject<Obj>(kube, {apiVersion: KOKUMI, kind: 'Serving', name: c, namespace: c})
const application = (c: Component) => getObject<Obj>(kube, {apiVersion: 'argoproj.io/v1alpha1', kind: 'Application', name: c, namespace: 'argocd'})
const preparations = async (c: Component) => (await listObjects(kube, {apiVersion: KOKUMI, kind: 'Preparation', namespace: c})) as Obj[]
const approved = async (c: Component) => (await preparations(c)).filter((p) => p.metadata.labels?.[APPROVE] === 'true').map((p) => p.metadata.name)

/** The Application serves the Order's latest Preparation, Synced and Healthy, and its artifact is in the registry. */
async function servesLatest(c: Component): Promise<void> {
  const o = await order(c)
  const app = await application(c)
  expect(app?.status?.sync?.revision).toBe(o?.status?.latestArtifactDigest)
  expect([app?.status?.sync?.status, app?.status?.health?.status]).toEqual(['Synced', 'Healthy'])
  expect((await serving(c))?.spec?.preparationName).toBe(o?.status?.latestPreparationName)
  expect(await oci.headManifest(`${c}/${c}`, o?.status?.latestArtifactDigest)).toBeTruthy()
}

/** The Serving, and so the Application, stays at the latest Preparation through a few resyncs of every Preparation. */
async function keepsServingLatest(c: Component): Promise<void> {
  for (let i = 0; i < 4; i++) await h.stack.tick()
  await servesLatest(c)
}

/** The end state of `stack promotion set Automatic`: Orders, every Preparation's labels, the Serving. */
async function expectAutomatic(): Promise<void> {
  expect((await readInstallation(kube))?.spec.stack.promotion).toBe('Automatic')
  for (const c of ['argocd', 'kokumi'] as const) {
    expect((await order(c))?.spec?.autoDeploy).toBe('Enabled')
    // The latest alone Enabled and nothing approved: Kokumi re-points the Serving at every
    // Enabled or approved Preparation on a resync, the last in name order winning.
    const latest = (await order(c))?.status?.latestPreparationName
    const preps = await preparations(c)
    expect(preps.length, c).toBeGreaterThan(1)
    expect(Object.fromEntries(preps.map((p) => [p.metadata.name, p.metadata.labels?.[AUTO]]))).toEqual(
      Object.fromEntries(preps.map((p) => [p.metadata.name, p.metadata.name === latest ? 'Enabled' : 'Disabled'])),
    )
    expect(await approved(c)).toEqual([])
    await waitUntil(`${c} Serving Automatic`, async () => (await serving(c))?.spec?.preparationPolicy?.type === 'Automatic')
  }
}

/** The end state of `stack promotion set Manual`: all Disabled, the served Preparation the one approval. */
async function expectManual(): Promise<void> {
  expect((await readInstallation(kube))?.spec.stack.promotion).toBe('Manual')
  for (const c of ['argocd', 'kokumi'] as const) {
    expect((await order(c))?.spec?.autoDeploy).toBe('Disabled')
    expect(new Set((await preparations(c)).map((p) => p.metadata.labels?.[AUTO]))).toEqual(new Set(['Disabled']))
    await waitUntil(`${c} Serving Manual`, async () => (await serving(c))?.spec?.preparationPolicy?.type === 'Manual')
    expect(await approved(c)).toEqual([(await serving(c))?.spec?.preparationName])
  }
}

/**
 * Runs `args` (--yes --json added) once killed as each step of its --dry-run plan starts, in
 * step order, then once to the end: exit 0. Returns the step ids and the last run.
 */
async function killedAtEveryStep(args: string[], midStep?: (e: Record<string, unknown>) => boolean): Promise<{ids: string[]; last: CliRun}> {
  // First, optionally, a kill inside a step (at one of its progress events): part of its work
  // done. The CLI keeps going until the signal lands, so the run may also have ended first.
  if (midStep) {
    const r = await runIchor([...args, '--yes', '--json', ...day2.slice(0, 2)], h.env, {killOn: midStep})
    expect(r.signal === 'SIGKILL' || r.code === 0, `mid-step: ${r.stderr.slice(-3000)}`).toBe(true)
  }
  const plan = await kubeCli([...args, '--dry-run', '--json'])
  expect(plan.code, said(plan).slice(-3000)).toBe(0)
  const ids = taskIds(plan)
  const log: string[] = []
  for (const [k, id] of ids.entries()) {
    const r = await runIchor([...args, '--yes', '--json', ...day2.slice(0, 2)], h.env, {killOn: killBeforeTask(k)})
    log.push(`kill before ${id}: ${r.signal ?? `exit ${r.code}`}`)
    expect(r.signal, `before ${id}: ${r.stderr.slice(-3000)}`).toBe('SIGKILL')
  }
  const last = await kubeCli([...args, '--yes', '--json', '--timeout', '600'])
  expect(last.code, `${log.join('\n')}\n${said(last).slice(-3000)}`).toBe(0)
  return {ids, last}
}

beforeAll(async () => {
  h = await startHarnessCluster()
  manualInit = [...h.initArgs, '--promotion', 'Manual']
  const init = await runIchor([...manualInit, '--json'], h.env)
  expect(init.code, `${init.stderr}\n${init.stdout.slice(-2000)}`).toBe(0)
  kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
  oci = new OciClient(h.registry.endpoint)
  day2 = ['--kubeconfig', join(h.stateDir, 'kubeconfig'), '--registry-endpoint', h.registry.endpoint]
  assets = ['--argocd-chart', UPSTREAM.argocdChart, '--kokumi-manifest', h.kokumiManifest]
}, 600_000)
afterAll(async () => h?.stop())

describe('promotion Manual as a day-2 mode, and init reruns keeping the stored settings', () => {
  // Issue 21 point 6: an omitted flag keeps the stored setting; a different one is refused naming the day-2 command.
  it('init rerun without --promotion keeps Manual; with --promotion Automatic or another --kube-proxy it is refused naming the day-2 command, nothing changed', async () => {
    const rerun = await runIchor([...h.initArgs, '--json'], h.env)
    expect(rerun.code, said(rerun).slice(-3000)).toBe(0)
    expect((await readInstallation(kube))?.spec.stack.promotion).toBe('Manual')
    for (const c of ['argocd', 'kokumi'] as const) expect((await order(c))?.spec?.autoDeploy).toBe('Disabled')

    const before = await readInstallation(kube)
    const automatic = await runIchor([...h.initArgs, '--promotion', 'Automatic'], h.env)
    expect(automatic.code, said(automatic)).toBe(2)
    expect(said(automatic)).toMatch(/--promotion: .*Manual.*ichor stack promotion set Automatic/)
    const proxy = await runIchor([...h.initArgs, '--kube-proxy', 'kube-proxy'], h.env)
    expect(proxy.code, said(proxy)).toBe(2)
    expect(said(proxy)).toMatch(/--kube-proxy: .*replaced.*ichor cni kube-proxy restore/)
    const after = await readInstallation(kube)
    expect(after?.spec).toEqual(before?.spec)
    expect(after?.metadata.resourceVersion).toBe(before?.metadata.resourceVersion)
    for (const c of ['argocd', 'kokumi'] as const) expect((await order(c))?.spec?.autoDeploy).toBe('Disabled')
  }, 600_000)

  // Issue 21 point 5: set, promote, set, promote; each set ends at "waiting for approval".
  it('the whole Manual cycle twice: each set ends promptly naming `ichor stack promote argocd`, each promote serves it, one approval per Order that survives a Kokumi restart', async () => {
    for (const replicas of [2, 3]) {
      const servedBefore = (await application('argocd'))?.status?.sync?.revision
      const set = await cli(['stack', 'values', 'set', 'argocd', '--yes', '--set', `server.replicas=${replicas}`, '--timeout', '600', ...assets])
      expect(set.code, said(set).slice(-3000)).toBe(0)
      expect(set.ms, 'no wait for an Application only an approval moves').toBeLessThan(120_000)
      expect(said(set)).toMatch(/argocd: .*waits for approval.*ichor stack promote argocd/)
      const recorded = (await readInstallation(kube))?.status?.stack.argocd
      expect((await order('argocd'))?.spec?.source?.version).toBe(recorded?.publishedTag)
      expect((await application('argocd'))?.status?.sync?.revision, 'nothing served before the approval').toBe(servedBefore)

      const promote = await kubeCli(['stack', 'promote', 'argocd', '--yes', '--timeout', '600'])
      expect(promote.code, said(promote).slice(-3000)).toBe(0)
      await servesLatest('argocd')
      expect(await approved('argocd')).toEqual([(await order('argocd'))?.status?.latestPreparationName])
    }
    // Kokumi reconciles every Preparation again on a restart: the single approval keeps the newest served.
    const newest = (await order('argocd'))?.status?.latestPreparationName
    await h.stack.restart()
    for (let i = 0; i < 4; i++) await h.stack.tick()
    expect((await serving('argocd'))?.spec).toMatchObject({preparationName: newest, preparationPolicy: {type: 'Manual'}})
    await servesLatest('argocd')
  }, 900_000)

  it('registry loss in Manual: stack sync serves the same content again (the served artifact exists), one approval per Order', async () => {
    const recorded = (await readInstallation(kube))?.status?.stack
    await h.registry.restartEmpty()
    const sync = await cli(['stack', 'sync', '--yes', '--timeout', '600', ...assets])
    expect(sync.code, said(sync).slice(-3000)).toBe(0)
    for (const c of ['argocd', 'kokumi'] as const) {
      await servesLatest(c)
      const served = await getObject<Obj>(kube, {apiVersion: KOKUMI, kind: 'Preparation', name: (await serving(c))?.spec?.preparationName, namespace: c})
      expect(served?.spec?.source?.baseDigest, `${c}: the same bundle`).toBe(recorded?.[c]?.digest)
      expect(await approved(c)).toEqual([served?.metadata.name])
    }
  }, 900_000)

  it('stack promotion set Automatic, then Manual: the Orders move, every Preparation is relabelled, the Serving follows and keeps it across a restart', async () => {
    const toAutomatic = await kubeCli(['stack', 'promotion', 'set', 'Automatic', '--yes', '--timeout', '600'])
    expect(toAutomatic.code, said(toAutomatic).slice(-3000)).toBe(0)
    await expectAutomatic()
    await h.stack.restart()
    for (const c of ['argocd', 'kokumi'] as const) await keepsServingLatest(c)

    const toManual = await kubeCli(['stack', 'promotion', 'set', 'Manual', '--yes', '--timeout', '600'])
    expect(toManual.code, said(toManual).slice(-3000)).toBe(0)
    expect(toManual.ms).toBeLessThan(120_000)
    await expectManual()
    await h.stack.restart()
    for (let i = 0; i < 4; i++) await h.stack.tick()
    for (const c of ['argocd', 'kokumi'] as const) {
      expect((await serving(c))?.spec?.preparationPolicy?.type).toBe('Manual')
      await servesLatest(c)
    }
    // An init rerun now keeps Manual and ends without waiting.
    const rerun = await runIchor([...h.initArgs, '--json'], h.env)
    expect(rerun.code, said(rerun).slice(-3000)).toBe(0)
    expect((await readInstallation(kube))?.spec.stack.promotion).toBe('Manual')
  }, 900_000)

  it('stack promotion set Automatic, then Manual, killed inside the relabelling and as each step starts: a rerun converges to the same state, and a further run changes nothing', async () => {
    for (const [mode, expectMode] of [
      ['Automatic', expectAutomatic],
      ['Manual', expectManual],
    ] as const) {
      // Also killed once after the first Order's Preparations are relabelled, before the second's.
      const {ids} = await killedAtEveryStep(['stack', 'promotion', 'set', mode], (e) => e.event === 'progress' && e.id === 'relabel-preparations')
      expect(ids).toEqual(['lease', 'store-promotion', 'order-promotion', 'relabel-preparations', 'wait-applications'])
      await expectMode()
      for (const c of ['argocd', 'kokumi'] as const) await keepsServingLatest(c)
      const again = await kubeCli(['stack', 'promotion', 'set', mode, '--yes', '--json', '--timeout', '600'])
      expect(again.code, said(again).slice(-3000)).toBe(0)
      expect(endEvent(again), mode).toMatchObject({ok: true, changed: false})
    }
  }, 1_200_000)

  it('stack promote killed as each step starts: a rerun serves the waiting Preparation with the one approval, and a further run changes nothing', async () => {
    const set = await cli(['stack', 'values', 'set', 'argocd', '--yes', '--set', 'server.replicas=4', '--timeout', '600', ...assets])
    expect(set.code, said(set).slice(-3000)).toBe(0)
    expect(said(set)).toMatch(/argocd: .*waits for approval.*ichor stack promote argocd/)
    const waiting = (await order('argocd'))?.status?.latestPreparationName
    expect((await serving('argocd'))?.spec?.preparationName).not.toBe(waiting)

    const {ids} = await killedAtEveryStep(['stack', 'promote', 'argocd'])
    expect(ids).toEqual(['lease', 'approve-preparation', 'wait-applications'])
    await servesLatest('argocd')
    expect((await serving('argocd'))?.spec?.preparationName).toBe(waiting)
    expect(await approved('argocd')).toEqual([waiting])
    await keepsServingLatest('argocd')
    const again = await kubeCli(['stack', 'promote', 'argocd', '--yes', '--json', '--timeout', '600'])
    expect(again.code, said(again).slice(-3000)).toBe(0)
    expect(endEvent(again)).toMatchObject({ok: true, changed: false})
  }, 1_200_000)
  // Issue 38 point 9: after 0.14.0 Kokumi also hashes the resolved source and destination
  // (renderer/hash.go on main), so an upgrade renders every Order once again under a new digest.
  it('a Kokumi upgrade renders every Order again with the same content: stack status reports a re-render, not an approval; stack sync serves it, killed at every step, and after a registry loss', async () => {
    const components = ['argocd', 'kokumi'] as const
    const status = async () => {
      const run = await cli(['stack', 'status', '-o', 'json'])
      return {run, doc: JSON.parse(run.stdout) as StackStatus}
    }
    const prep = async (c: Component, name: string) => getObject<Obj>(kube, {apiVersion: KOKUMI, kind: 'Preparation', name, namespace: c})
    /** Kokumi rendered the Order again under another config hash, and the Serving still serves the older render. */
    const renderedAgain = (c: Component) =>
      waitUntil(`${c} rendered again by the new Kokumi`, async () => {
        const o = await order(c)
        const served = (await serving(c))?.spec?.preparationName
        const latest = o?.status?.latestPreparationName
        if (!served || !latest || served === latest || !o?.status?.conditions?.some((x: any) => x.type === 'Ready' && x.status === 'True')) return undefined
        const [a, b] = [await prep(c, latest), await prep(c, served)]
        return a?.spec?.configHash !== b?.spec?.configHash && a?.spec?.source?.baseDigest === b?.spec?.source?.baseDigest ? {latest, served} : undefined
      })
    /** Init with another Kokumi manifest (a Kokumi upgrade or downgrade), its bundle promoted: Argo CD rolls Kokumi's controller out. */
    const installKokumi = async (manifest: string) => {
      const rerun = await runIchor([...h.initArgs.map((a) => (a === h.kokumiManifest ? manifest : a)), '--json'], h.env)
      expect(rerun.code, said(rerun).slice(-3000)).toBe(0)
      const promote = await kubeCli(['stack', 'promote', 'kokumi', '--yes', '--timeout', '600'])
      expect(promote.code, said(promote).slice(-3000)).toBe(0)
      return [...assets.slice(0, 2), '--kokumi-manifest', manifest]
    }
    const expectReportedAsRerender = async (again: Record<Component, {latest: string; served: string}>) => {
      const {run, doc} = await status()
      expect(said(run)).not.toMatch(/waits for approval:/)
      expect(run.code, said(run).slice(-3000)).toBe(0)
      for (const c of components) {
        const s = doc.components.find((x) => x.component === c)
        expect(s?.rerendered, c).toEqual({preparation: again[c].latest, sameContentAs: again[c].served})
      }
      const human = await cli(['stack', 'status'])
      expect(human.stdout).toMatch(/re-rendered {2}\S+, same content as the served \S+: nothing to approve/)
    }

    // Upgrade past 0.14.0: every Order renders again.
    const later = kokumiLaterManifestFixture(mkdtempSync(join(tmpdir(), 'kokumi-later-')))
    const laterAssets = await installKokumi(later)
    const upgraded = {argocd: await renderedAgain('argocd'), kokumi: await renderedAgain('kokumi')}
    await expectReportedAsRerender(upgraded)
    // The registry lost everything before anyone ran sync: the served artifacts are gone, and
    // the new renders' config hashes are not those of the served ones.
    const recorded = (await readInstallation(kube))?.status?.stack
    await h.registry.restartEmpty()
    const sync = await cli(['stack', 'sync', '--yes', '--timeout', '600', ...laterAssets])
    expect(sync.code, said(sync).slice(-3000)).toBe(0)
    expect(said(sync)).not.toMatch(/waits for approval:/)
    for (const c of components) {
      await servesLatest(c)
      const served = await prep(c, (await serving(c))?.spec?.preparationName)
      expect(served?.spec?.source?.baseDigest, `${c}: the same bundle`).toBe(recorded?.[c]?.digest)
      expect(await approved(c)).toEqual([served?.metadata.name])
    }

    // Back to 0.14.0, whose hash is of the spec alone: rendered again; this time sync finds both artifacts.
    await installKokumi(h.kokumiManifest)
    const downgraded = {argocd: await renderedAgain('argocd'), kokumi: await renderedAgain('kokumi')}
    await expectReportedAsRerender(downgraded)
    // Killed inside the approvals and as each step starts; the last run ends with nothing waiting.
    const {ids, last} = await killedAtEveryStep(
      ['stack', 'sync', '--registry-endpoint', h.registry.endpoint, ...assets],
      (e) => e.event === 'progress' && e.id === 'approve-rerenders',
    )
    expect(ids).toEqual(['lease', 'republish-bundles', 'rerender-orders', 'approve-rerenders', 'resync-drifted', 'close-registry-tunnel', 'wait-applications'])
    expect(JSON.parse(last.stdout).awaitingApproval).toEqual([])
    for (const c of components) {
      await servesLatest(c)
      expect(await approved(c)).toEqual([downgraded[c].latest])
      await keepsServingLatest(c)
    }
    const quiet = await cli(['stack', 'sync', '--yes', '--json', '--timeout', '600', ...assets])
    expect(quiet.code, said(quiet).slice(-3000)).toBe(0)
    expect(endEvent(quiet)).toMatchObject({ok: true, changed: false})
  }, 1_500_000)
})
