// `ichor stack status` and `ichor stack sync` after a full `ichor init` on the harness: real
// apiserver, registry, helm and talosctl, the REAL Kokumi 0.14.0 manifest and CRDs (Orders with
// spec.autoDeploy); simulated: Talos nodes, readiness, and Kokumi/Argo CD (stack-simulator.ts,
// following Kokumi 0.14.0's puller and Order controller). One cluster, one init.
import {writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {deleteObject, getObject, type KubeObject} from '../../src/lib/kube/objects.js'
import {opensKokumiHash} from '../../src/lib/stack/generated-secrets.js'
import {bcryptVerify} from '../../src/lib/stack/bcrypt.js'
import type {ComponentStackStatus, StackStatus} from '../../src/lib/stack/status.js'
import {jsonEvents, runIchor, type CliRun, type HarnessCluster} from '../harness/cluster.js'
import {convergedCluster, CONVERGED_TIMEOUT_MS} from '../harness/converged.js'
import {killBeforeTask, taskIds} from '../harness/kill.js'
import {waitUntil} from '../harness/kube.js'
import {ownedBy} from '../harness/pod-start-simulator.js'
import {UPSTREAM} from '../support/upstream.js'

type Obj = KubeObject & {spec?: any; status?: any}

let h: HarnessCluster
let kube: Kube
let day2: string[]
/** The artifacts the cluster was installed with: a re-render needs them (the pinned ones are not fetched here). */
let assets: string[]

const endEvent = (r: CliRun) => jsonEvents(r).find((e) => e.event === 'end') as {ok: boolean; changed: boolean} | undefined

async function status(): Promise<{run: CliRun; doc: StackStatus}> {
  const run = await runIchor(['stack', 'status', '-o', 'json', ...day2], h.env)
  return {run, doc: JSON.parse(run.stdout) as StackStatus}
}

const byName = (s: StackStatus, c: string) => s.components.find((x) => x.component === c)!

/**
 * A component's status without the identity Kokumi gave its Preparation. Kokumi 0.14.0 gives
 * every render a new Preparation: oras stamps `org.opencontainers.image.created` (to the second)
 * on each push, so the same bundle rendered again is a new artifact digest and so a new
 * Preparation name (test/harness/kokumi-simulator.ts `push`: oras-go pack.go
 * ensureAnnotationCreated). What ichor controls must stay: its published tag and digest, the
 * registry holding them, the Order, the served Preparation's sourceDigest, sync and health.
 */
function withoutPreparationIdentity(c: ComponentStackStatus) {
  const {latestPreparation: _name, latestArtifactDigest: _digest, ...order} = c.order
  const {revision: _revision, ...application} = c.application
  return {...c, order, preparation: {sourceDigest: c.preparation?.sourceDigest}, application}
}

/**
 * `after` is `before` with every component re-rendered by Kokumi: everything but the Preparation
 * identity equal, and that identity new and consistent (the Order's latest Preparation, named
 * after its artifact digest, rendered from ichor's published digest, is what Argo CD serves).
 */
function expectReRendered(after: StackStatus, before: StackStatus): void {
  expect({...after, components: after.components.map(withoutPreparationIdentity)}).toEqual({
    ...before,
    components: before.components.map(withoutPreparationIdentity),
  })
  for (const c of after.components) {
    const was = byName(before, c.component)
    const prep = c.order.latestArtifactDigest!
    expect(prep, `${c.component}: Kokumi re-rendered, a new Preparation digest`).not.toBe(was.order.latestArtifactDigest)
    expect(c.order.latestPreparation).toBe(`${c.component}-${prep.slice(7, 19)}`)
    expect(c.order.latestPreparation).not.toBe(was.order.latestPreparation)
    expect(c.preparation).toEqual({
      name: c.order.latestPreparation,
      sourceDigest: c.published!.digest,
      artifact: `oci://kokumi-registry.kokumi.svc.cluster.local:5000/${c.component}/${c.component}@${prep}`,
    })
    expect(c.application.revision).toBe(prep)
  }
}

beforeAll(async () => {
  h = await convergedCluster('1+1')
  kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
  day2 = ['--kubeconfig', join(h.stateDir, 'kubeconfig'), '--registry-endpoint', h.registry.endpoint]
  assets = ['--argocd-chart', UPSTREAM.argocdChart, '--kokumi-manifest', h.kokumiManifest]
}, CONVERGED_TIMEOUT_MS)
afterAll(async () => h?.stop())

describe('ichor stack status and sync on the real Kokumi 0.14.0 API', () => {
  let healthy: StackStatus

  it('init created the Orders in the installed (0.14.0) shape: autoDeploy Enabled, a Serving per Order', async () => {
    for (const c of ['argocd', 'kokumi']) {
      const order = await getObject<Obj>(kube, {apiVersion: 'delivery.kokumi.dev/v1alpha1', kind: 'Order', name: c, namespace: c})
      expect(order?.spec.autoDeploy).toBe('Enabled')
      expect(order?.spec.promotion).toBeUndefined()
      const serving = await getObject<Obj>(kube, {apiVersion: 'delivery.kokumi.dev/v1alpha1', kind: 'Serving', name: c, namespace: c})
      expect(serving?.spec).toMatchObject({orderName: c, preparationName: order?.status.latestPreparationName, preparationPolicy: {type: 'Automatic'}})
    }
  })

  it('status on a healthy stack: exit 0, every field in line', async () => {
    const {run, doc} = await status()
    expect(run.code, run.stderr).toBe(0)
    const cr = await getObject<Obj>(kube, {apiVersion: 'ichor.maesh.dev/v1alpha1', kind: 'IchorInstallation', name: 'ichor'})
    expect(doc.healthy).toBe(true)
    expect(doc.kokumiVersion).toBe('0.14.0')
    expect(doc.components.map((c) => c.component)).toEqual(['kokumi', 'argocd'])
    for (const c of doc.components) {
      const order = await getObject<Obj>(kube, {apiVersion: 'delivery.kokumi.dev/v1alpha1', kind: 'Order', name: c.component, namespace: c.component})
      const recorded = cr!.status.stack[c.component]
      expect(c.namespace).toBe(c.component)
      expect(c.published).toEqual({
        repository: `kokumi-registry.kokumi.svc.cluster.local:5000/ichor/${c.component}`,
        tag: recorded.publishedTag,
        digest: recorded.digest,
      })
      expect(c.published!.tag).toMatch(c.component === 'kokumi' ? /^0\.14\.0-[0-9a-f]{12}$/ : /^10\.1\.1-[0-9a-f]{12}$/)
      expect(c.registry).toEqual({bundle: true, bundleDigest: recorded.digest, preparation: true})
      const prep = order!.status.latestArtifactDigest as string
      expect(c.order).toEqual({
        exists: true,
        version: recorded.publishedTag,
        promotion: 'Automatic',
        ready: true,
        reason: 'Ready',
        message: `Successfully pushed to kokumi-registry.kokumi.svc.cluster.local:5000/${c.component}/${c.component}`,
        latestPreparation: `${c.component}-${prep.slice(7, 19)}`,
        latestArtifactDigest: prep,
      })
      expect(c.preparation).toEqual({
        name: `${c.component}-${prep.slice(7, 19)}`,
        sourceDigest: recorded.digest,
        artifact: `oci://kokumi-registry.kokumi.svc.cluster.local:5000/${c.component}/${c.component}@${prep}`,
      })
      expect(c.application).toEqual({exists: true, sync: 'Synced', health: 'Healthy', revision: prep})
      expect(c.drift).toEqual([])
      expect(c.problems).toEqual([])
      expect(c.healthy).toBe(true)
    }
    healthy = doc
    const yaml = await runIchor(['stack', 'status', '-o', 'yaml', ...day2], h.env)
    expect(yaml.code).toBe(0)
    expect(yaml.stdout).toMatch(/^healthy: true$/m)
  })

  it('sync on a healthy stack is a no-op (changed: false)', async () => {
    const r = await runIchor(['stack', 'sync', '--yes', '--json', ...day2, ...assets], h.env)
    expect(r.code, r.stderr).toBe(0)
    expect(endEvent(r)).toMatchObject({ok: true, changed: false})
  })

  it('registry storage wiped: status exit 1 naming the losses; sync restores the same digests and the Applications converge', async () => {
    await h.registry.restartEmpty()
    const {run, doc} = await status()
    expect(run.code).toBe(1)
    expect(doc.healthy).toBe(false)
    for (const c of doc.components) {
      const before = byName(healthy, c.component)
      expect(c.published).toEqual(before.published)
      expect(c.registry).toEqual({bundle: false, preparation: false})
      expect(c.order).toEqual(before.order) // Kokumi does not notice by itself: its inputs did not change
      expect(c.problems).toEqual(
        expect.arrayContaining([
          `the registry lost ${before.published!.tag} (published at ${before.published!.digest})`,
          `the registry lost the artifact of Preparation ${before.order.latestPreparation} (${before.order.latestArtifactDigest}) that Argo CD pulls`,
        ]),
      )
      expect(c.healthy).toBe(false)
    }

    const sync = await runIchor(['stack', 'sync', '--yes', '--json', ...day2, ...assets], h.env)
    expect(sync.code, sync.stderr).toBe(0)
    expect(endEvent(sync)).toMatchObject({ok: true, changed: true})
    expect(
      jsonEvents(sync)
        .filter((e) => e.event === 'task' && e.status === 'done')
        .map((e) => e.id),
    ).toEqual(expect.arrayContaining(['republish-bundles', 'rerender-orders']))
    const after = (await status()).doc
    // ichor's bundles come back with the same digests; Kokumi's re-render is a new Preparation
    // (see withoutPreparationIdentity), not the one Argo CD served before the loss.
    expectReRendered(after, healthy)
  })

  it('sync killed at every step boundary converges to the same digests', async () => {
    await h.registry.restartEmpty()
    const whole = await runIchor(['stack', 'sync', '--json', '--dry-run', ...day2, ...assets], h.env)
    const ids = taskIds(whole)
    expect(ids).toEqual(['lease', 'republish-bundles', 'rerender-orders', 'approve-rerenders', 'resync-drifted', 'close-registry-tunnel', 'wait-applications'])
    const log: string[] = []
    for (let k = 0; k < ids.length; k++) {
      const r = await runIchor(['stack', 'sync', '--yes', '--json', ...day2, ...assets], h.env, {killOn: killBeforeTask(k)})
      log.push(`kill before ${ids[k]}: ${r.signal ?? `exit ${r.code}`}`)
      expect(r.code === 0 || r.signal === 'SIGKILL', `${ids[k]}: ${r.stderr}`).toBe(true)
    }
    const last = await runIchor(['stack', 'sync', '--yes', '--json', ...day2, ...assets], h.env)
    expect(last.code, `${log.join('\n')}\n${last.stderr}`).toBe(0)
    expect(log.filter((l) => l.endsWith('SIGKILL')).length).toBe(ids.length)
    const after = await waitUntil('status healthy', async () => {
      const s = await status()
      return s.run.code === 0 && s.doc
    })
    // Same published digests; the Preparations Kokumi rendered again are new (withoutPreparationIdentity).
    expectReRendered(after, healthy)
  })

  it('values set argocd: new tag and digest, the Order moves, Kokumi serves it; the same values again change nothing; bad values are exit 2', async () => {
    const before = byName(healthy, 'argocd').published!
    // The stack as it is now: the registry-loss tests above had Kokumi render both Preparations again.
    const current = (await status()).doc
    expect(current.healthy).toBe(true)
    const set = await runIchor(['stack', 'values', 'set', 'argocd', '--yes', '--set', 'server.replicas=2', '--json', ...day2, ...assets], h.env)
    expect(set.code, set.stderr).toBe(0)
    expect(endEvent(set)).toMatchObject({ok: true, changed: true})
    const result = JSON.parse(set.stdout.slice(set.stdout.lastIndexOf('\n{') + 1)) as {tag: string; digest: string}
    expect(result.tag).toMatch(/^10\.1\.1-[0-9a-f]{12}$/)
    expect(result.tag).not.toBe(before.tag)
    expect(result.digest).not.toBe(before.digest)
    const order = await getObject<Obj>(kube, {apiVersion: 'delivery.kokumi.dev/v1alpha1', kind: 'Order', name: 'argocd', namespace: 'argocd'})
    expect(order?.spec).toEqual({source: {oci: 'oci://kokumi-registry.kokumi.svc.cluster.local:5000/ichor/argocd', version: result.tag}, autoDeploy: 'Enabled'})
    const after = (await status()).doc
    expect(after.healthy).toBe(true)
    expect(byName(after, 'argocd').published).toEqual({repository: before.repository, tag: result.tag, digest: result.digest})
    expect(byName(after, 'argocd').preparation?.sourceDigest).toBe(result.digest)
    // Kokumi's side untouched, its Preparation included: an argocd set renders nothing for it.
    expect(byName(after, 'kokumi')).toEqual(byName(current, 'kokumi'))
    expect(withoutPreparationIdentity(byName(after, 'kokumi'))).toEqual(withoutPreparationIdentity(byName(healthy, 'kokumi')))
    const get = await runIchor(['stack', 'values', 'get', 'argocd', '-o', 'json', '--kubeconfig', day2[1]!], h.env)
    expect(JSON.parse(get.stdout)).toEqual({server: {replicas: 2}})

    const again = await runIchor(['stack', 'values', 'set', 'argocd', '--yes', '--set', 'server.replicas=2', '--json', ...day2, ...assets], h.env)
    expect(again.code, again.stderr).toBe(0)
    expect(endEvent(again)).toMatchObject({ok: true, changed: false})

    const bad = await runIchor(['stack', 'values', 'set', 'argocd', '--yes', '--set', 'server.replicaz=3', ...day2, ...assets], h.env)
    expect(bad.code).toBe(2)
    expect(`${bad.stdout}${bad.stderr}`).toMatch(/server\.replicaz/)
    expect(
      (await getObject<Obj>(kube, {apiVersion: 'delivery.kokumi.dev/v1alpha1', kind: 'Order', name: 'argocd', namespace: 'argocd'}))?.spec.source.version,
    ).toBe(result.tag)
  })

  it('values set that drops an env entry: Argo CD syncs the new bundle server-side and the entry is gone from the cluster', async () => {
    const server = async () => (await getObject<Obj>(kube, {apiVersion: 'apps/v1', kind: 'Deployment', name: 'argocd-server', namespace: 'argocd'}))!
    const envNames = async () => ((await server()).spec.template.spec.containers[0].env ?? []).map((e: {name: string}) => e.name) as string[]
    const file = join(h.stateDir, 'e2e-argocd-env.yaml')
    writeFileSync(file, 'server:\n  env:\n    - name: ICHOR_E2E_DROPPED\n      value: "1"\n')
    const add = await runIchor(['stack', 'values', 'set', 'argocd', '--yes', '-f', file, '--json', ...day2, ...assets], h.env)
    expect(add.code, `${add.stderr}\n${add.stdout.slice(-3000)}`).toBe(0)
    await waitUntil('the env entry synced', async () => (await envNames()).includes('ICHOR_E2E_DROPPED'), {timeoutMs: 120_000})

    const drop = await runIchor(['stack', 'values', 'set', 'argocd', '--yes', '--set', 'server.env=null', '--json', ...day2, ...assets], h.env)
    expect(drop.code, `${drop.stderr}\n${drop.stdout.slice(-3000)}`).toBe(0)
    const result = JSON.parse(drop.stdout.slice(drop.stdout.lastIndexOf('\n{') + 1)) as {digest: string}
    await waitUntil(
      'Argo CD synced the bundle without the entry',
      async () => byName((await status()).doc, 'argocd').preparation?.sourceDigest === result.digest,
      {timeoutMs: 120_000},
    )
    await waitUntil('the env entry removed', async () => !(await envNames()).includes('ICHOR_E2E_DROPPED'), {timeoutMs: 120_000})
    expect((await status()).doc.healthy).toBe(true)
    // Argo CD's manager holds the Deployment; ichor's first apply left no owner of its own.
    const managers = (((await server()).metadata as {managedFields?: {manager: string}[]}).managedFields ?? []).map((f) => f.manager)
    expect(managers).toContain('argocd-controller')
    expect(managers).not.toContain('ichor-bootstrap')
  }, 600_000)

  it('deleted generated Secrets: status and an init rerun name them and the repair, never mint; repair-secrets sets a new password on both sides, shown once', async () => {
    const secret = async (namespace: string, name: string) => {
      const s = await getObject<Obj & {data?: Record<string, string>}>(kube, {apiVersion: 'v1', kind: 'Secret', name, namespace})
      return s && Object.fromEntries(Object.entries(s.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]))
    }
    const before = {auth: await secret('kokumi', 'kokumi-server-auth'), redis: await secret('argocd', 'argocd-redis')}
    // init kept the hash it gave Kokumi, bound to the password: the check needs no bcrypt.
    const initial = (await secret('ichor-system', 'ichor-kokumi-admin'))!
    expect(opensKokumiHash(initial, before.auth!['password-hash']!)).toEqual({matches: true, by: 'binding'})
    // A password edited by hand in ichor's copy: the binding no longer holds, bcrypt finds the mismatch.
    await kube.request('PATCH', '/api/v1/namespaces/ichor-system/secrets/ichor-kokumi-admin', {
      body: {stringData: {password: 'edited-by-hand-00000'}},
      contentType: 'application/merge-patch+json',
      query: {fieldManager: 'kubectl-edit'},
    })
    const edited = await status()
    expect(edited.run.code).toBe(1)
    expect(byName(edited.doc, 'kokumi').problems).toContain(
      'Secret ichor-system/ichor-kokumi-admin does not match kokumi/kokumi-server-auth: ichor will not mint a password kokumi/kokumi-server-auth does not accept; run ichor stack repair-secrets to set a new one on both sides',
    )
    for (const name of ['ichor-kokumi-admin', 'ichor-argocd-redis']) await kube.request('DELETE', `/api/v1/namespaces/ichor-system/secrets/${name}`)

    const {run, doc} = await status()
    expect(run.code).toBe(1)
    expect(byName(doc, 'kokumi').problems).toContain(
      'Secret ichor-system/ichor-kokumi-admin is missing while kokumi/kokumi-server-auth holds the running Kokumi admin password: ichor will not mint a password kokumi/kokumi-server-auth does not accept; run ichor stack repair-secrets to set a new one on both sides',
    )
    expect(byName(doc, 'argocd').problems).toContain(
      'Secret ichor-system/ichor-argocd-redis is missing while argocd/argocd-redis holds the running Argo CD redis password: ichor will not mint a password argocd/argocd-redis does not accept; run ichor stack repair-secrets to set a new one on both sides',
    )

    const init = await runIchor([...h.initArgs, '--json'], h.env)
    expect(init.code).toBe(1)
    expect(`${init.stdout}${init.stderr}`).toMatch(/Secret ichor-system\/ichor-kokumi-admin is missing[^]*ichor stack repair-secrets/)
    expect(`${init.stdout}${init.stderr}`).not.toMatch(/kokumiAdminPassword/)
    expect(await secret('ichor-system', 'ichor-kokumi-admin')).toBeUndefined()
    expect(await secret('kokumi', 'kokumi-server-auth')).toEqual(before.auth)

    const dry = await runIchor(['stack', 'repair-secrets', '--dry-run', '--json', '--kubeconfig', day2[1]!], h.env)
    expect(dry.code, dry.stderr).toBe(0)
    expect(await secret('ichor-system', 'ichor-kokumi-admin')).toBeUndefined()

    const repair = await runIchor(['stack', 'repair-secrets', '--yes', '--json', '--kubeconfig', day2[1]!], h.env)
    expect(repair.code, `${repair.stderr}\n${repair.stdout.slice(-2000)}`).toBe(0)
    const result = JSON.parse(repair.stdout.slice(repair.stdout.lastIndexOf('\n{') + 1)) as {kokumiAdminPassword: string; repaired: string[]; changed: boolean}
    expect(result.repaired).toEqual(['ichor-system/ichor-kokumi-admin', 'ichor-system/ichor-argocd-redis'])
    const admin = (await secret('ichor-system', 'ichor-kokumi-admin'))!
    const auth = (await secret('kokumi', 'kokumi-server-auth'))!
    expect(admin.password).toBe(result.kokumiAdminPassword)
    expect(bcryptVerify(result.kokumiAdminPassword, auth['password-hash']!)).toBe(true)
    expect(opensKokumiHash(admin, auth['password-hash']!)).toEqual({matches: true, by: 'binding'})
    expect(auth['signing-key']).toBe(before.auth!['signing-key'])
    expect(auth.username).toBe(before.auth!.username)
    const redis = (await secret('argocd', 'argocd-redis'))!
    expect((await secret('ichor-system', 'ichor-argocd-redis'))!.password).toBe(redis.auth)
    expect(redis.auth).not.toBe(before.redis!.auth)
    expect((await status()).run.code).toBe(0)

    const again = await runIchor(['stack', 'repair-secrets', '--yes', '--json', '--kubeconfig', day2[1]!], h.env)
    expect(again.code).toBe(0)
    expect(JSON.parse(again.stdout.slice(again.stdout.lastIndexOf('\n{') + 1))).toMatchObject({changed: false, repaired: []})
    expect(again.stdout).not.toContain(result.kokumiAdminPassword)
  }, 600_000)

  // Issue 37 item 2: Argo CD makes its own first admin password when its server starts (the simulator follows
  // argo-cd util/settings/settings.go InitializeSettings); ichor prints it, and says so when it is gone.
  it("stack password argocd: argocd-server's first admin password, which argocd-secret's bcrypt hash verifies; gone once deleted", async () => {
    const secret = async (namespace: string, name: string) => {
      const s = await getObject<Obj & {data?: Record<string, string>}>(kube, {apiVersion: 'v1', kind: 'Secret', name, namespace})
      return s && Object.fromEntries(Object.entries(s.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]))
    }
    const initial = (await secret('argocd', 'argocd-initial-admin-secret'))!
    expect(initial.password).toMatch(/^[0-9A-Za-z-]{16}$/)
    expect(bcryptVerify(initial.password!, (await secret('argocd', 'argocd-secret'))!['admin.password']!)).toBe(true)
    const run = await runIchor(['stack', 'password', 'argocd', '--kubeconfig', day2[1]!], h.env)
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout).toBe(`${initial.password}\n`)
    // Argo CD's guide: delete it once the password is changed; the server does not make it again.
    await deleteObject(kube, {apiVersion: 'v1', kind: 'Secret', name: 'argocd-initial-admin-secret', namespace: 'argocd'})
    for (let i = 0; i < 2; i++) await h.stack.tick()
    const gone = await runIchor(['stack', 'password', 'argocd', '--kubeconfig', day2[1]!], h.env)
    expect(gone.code).toBe(1)
    expect(gone.stdout).toBe('')
    expect(gone.stderr).toMatch(/argocd\/argocd-initial-admin-secret does not exist/)
    expect(await secret('argocd', 'argocd-initial-admin-secret')).toBeUndefined()
  })
})

describe('a workload that crash-loops under an Application (real ReplicaSet controller, kwok pods)', () => {
  it('stack status and the waits name the workload and what its pods wait on', async () => {
    const repoServer = (pod: Parameters<typeof ownedBy>[0]) => ownedBy(pod, 'ReplicaSet', /^argocd-repo-server-[a-z0-9]+$/)
    const lift = h.pods.hold(repoServer, 'crashloop')
    const named =
      /Deployment argocd\/argocd-repo-server 0\/1 ready: pod argocd-repo-server-[a-z0-9]+-[a-z0-9]+ container repo-server CrashLoopBackOff \(back-off restarting failed container\), 3 restarts/
    try {
      // The ReplicaSet controller replaces the pod; the new one crash-loops.
      await kube.request('DELETE', '/api/v1/namespaces/argocd/pods', {query: {labelSelector: 'app.kubernetes.io/name=argocd-repo-server'}})
      const problem = await waitUntil(
        'stack status to name the crash-looping repo-server',
        async () => {
          const {doc} = await status()
          return byName(doc, 'argocd').problems.find((p) => named.test(p))
        },
        {timeoutMs: 60_000, intervalMs: 1000},
      )
      expect(problem).toMatch(/^Application argocd\/argocd is Synced\/(Progressing|Degraded): Deployment argocd\/argocd-repo-server/)
      const {run, doc} = await status()
      expect(run.code).toBe(1)
      expect(byName(doc, 'kokumi').healthy, byName(doc, 'kokumi').problems.join('\n')).toBe(true)
      const human = await runIchor(['stack', 'status', ...day2], h.env)
      expect(human.code).toBe(1)
      expect(human.stdout).toMatch(named)
      // A wait that runs out says which workload held it, not only the Application's health.
      const sync = await runIchor(['stack', 'sync', '--yes', '--timeout', '15s', ...day2, ...assets], h.env)
      expect(sync.code, sync.stderr).not.toBe(0)
      expect(`${sync.stdout}${sync.stderr}`).toMatch(
        /timed out after 15 s waiting for Application argocd\/argocd Synced and Healthy; last seen: .*argocd-repo-server.*CrashLoopBackOff/,
      )
    } finally {
      await lift()
    }
    await waitUntil('the stack to be healthy again once the pod starts', async () => (await status()).run.code === 0, {timeoutMs: 90_000, intervalMs: 1000})
  }, 300_000)
})
