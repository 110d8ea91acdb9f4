// `ichor stack values diff|edit`, `stack values set` killed at every step boundary, a set after
// the registry lost its content, and object drift in `stack status`, after one full `ichor
// init` on the harness: real apiserver, registry, helm, the real Argo CD chart and Kokumi
// 0.14.0 manifest; simulated Talos nodes, readiness and Kokumi/Argo CD (stack-simulator.ts).
import {mkdirSync, mkdtempSync, readFileSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {gunzipSync, gzipSync} from 'node:zlib'
import {join} from 'node:path'
import {stringify} from 'yaml'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {getObject, type KubeObject} from '../../src/lib/kube/objects.js'
import {OciClient} from '../../src/lib/oci/client.js'
import {readBundleDrift, readPublishedManifest} from '../../src/lib/stack/drift.js'
import {parseObjects} from '../../src/lib/stack/objects.js'
import type {StackStatus} from '../../src/lib/stack/status.js'
import {readInstallation} from '../../src/lib/state/installation.js'
import {jsonResult, runIchor, type HarnessCluster} from '../harness/cluster.js'
import {convergedCluster, CONVERGED_TIMEOUT_MS} from '../harness/converged.js'
import {doneTaskIds, killBeforeTask, pausedWhile, taskIds} from '../harness/kill.js'
import {waitUntil} from '../harness/kube.js'
import {FAULT_LABEL} from '../harness/kwok.js'
import {ownedBy} from '../harness/pod-start-simulator.js'
import {UPSTREAM} from '../support/upstream.js'

type Obj = KubeObject & {spec?: any; status?: any}
type Component = 'argocd' | 'kokumi'

let h: HarnessCluster
let kube: Kube
let oci: OciClient
let day2: string[]
let assets: string[]

const cli = (args: string[], env: NodeJS.ProcessEnv = {}, opts?: Parameters<typeof runIchor>[2]) =>
  runIchor([...args, ...day2, ...assets], {...h.env, ...env}, opts)
const status = async () => {
  const run = await runIchor(['stack', 'status', '-o', 'json', ...day2], h.env)
  return {run, doc: JSON.parse(run.stdout) as StackStatus}
}
const order = (c: Component) => getObject<Obj>(kube, {apiVersion: 'delivery.kokumi.dev/v1alpha1', kind: 'Order', name: c, namespace: c})

/**
 * What a values set leaves behind for a component: the CR's spec and status, the registry, the
 * Order, the Preparation served, the Application.
 *
 * Not the Preparation's identity: Kokumi 0.14.0 gives every render a new artifact digest (oras
 * stamps `org.opencontainers.image.created`, to the second: test/harness/kokumi-simulator.ts
 * `push`), so two runs that set the same values serve two Preparations. What holds instead, and
 * is compared: the served Preparation is the Order's latest, its artifact is what Argo CD syncs,
 * and it was rendered from the digest ichor published. `preparationDigest()` reads the identity,
 * for tests that assert it is new.
 */
async function endState(c: Component) {
  const cr = (await readInstallation(kube))!
  const recorded = cr.status!.stack[c]!
  const app = await getObject<Obj>(kube, {apiVersion: 'argoproj.io/v1alpha1', kind: 'Application', name: c, namespace: 'argocd'})
  const o = await order(c)
  const digest = o?.status?.latestArtifactDigest as string | undefined
  const prepName = o?.status?.latestPreparationName as string | undefined
  const prep = prepName
    ? await getObject<Obj>(kube, {apiVersion: 'delivery.kokumi.dev/v1alpha1', kind: 'Preparation', name: prepName, namespace: c})
    : undefined
  return {
    spec: cr.spec.stack[c],
    status: recorded,
    registry: (await oci.headManifest(`ichor/${c}`, recorded.publishedTag))?.digest,
    order: {spec: o?.spec},
    preparation: {
      sourceDigest: prep?.spec?.source?.baseDigest,
      namedAfterArtifact: prepName === `${c}-${digest?.slice(7, 19)}` && prep?.spec?.artifact?.digest === digest,
      served: digest !== undefined && app?.status?.sync?.revision === digest,
    },
    application: {sync: app?.status?.sync?.status, health: app?.status?.health?.status},
  }
}

/** The artifact digest of the Order's latest Preparation: a new one on every Kokumi render. */
const preparationDigest = async (c: Component) => (await order(c))?.status?.latestArtifactDigest as string | undefined

beforeAll(async () => {
  h = await convergedCluster('1+1')
  kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
  oci = new OciClient(h.registry.endpoint)
  day2 = ['--kubeconfig', join(h.stateDir, 'kubeconfig'), '--registry-endpoint', h.registry.endpoint]
  assets = ['--argocd-chart', UPSTREAM.argocdChart, '--kokumi-manifest', h.kokumiManifest]
}, CONVERGED_TIMEOUT_MS)
afterAll(async () => h?.stop())

describe('ichor stack values diff|edit and set under kills, losses and drift', () => {
  it('values diff: nothing against the published bundle; a change shows in the effective values and the bundle objects; bad values exit 2', async () => {
    for (const c of ['argocd', 'kokumi']) {
      const none = await cli(['stack', 'values', 'diff', c, '--json'])
      expect(none.code, none.stderr).toBe(0)
      expect(jsonResult(none)).toMatchObject({component: c, changed: false, values: '', manifest: ''})
    }
    const argocd = await cli(['stack', 'values', 'diff', 'argocd', 'server.replicas=2'])
    expect(argocd.code, argocd.stderr).toBe(0)
    const [values, manifest] = argocd.stdout.split(/^(?=--- published 10\.1\.1-)/m)
    expect(values).toMatch(/^--- published argocd \(effective values\)$/m)
    expect(values).toMatch(/^\+\s+replicas: 2$/m)
    expect(manifest).toMatch(/^\+\+\+ proposed 10\.1\.1-[0-9a-f]{12} \(manifest\.yaml\)$/m)
    expect(manifest).toMatch(/^\+\s+replicas: 2$/m)
    const kokumi = await cli(['stack', 'values', 'diff', 'kokumi', 'controller.replicas=2', '--json'])
    expect(kokumi.code, kokumi.stderr).toBe(0)
    const k = jsonResult<{changed: boolean; values: string; manifest: string; published: {tag: string}; proposed: {tag: string}}>(kokumi)
    expect(k.changed).toBe(true)
    expect(k.values).toMatch(/^\+\s+replicas: 2$/m)
    expect(k.manifest).toMatch(/^\+\s+replicas: 2$/m)
    expect(k.proposed.tag).not.toBe(k.published.tag)
    const bad = await cli(['stack', 'values', 'diff', 'kokumi', 'controller.replicaz=2'])
    expect(bad.code).toBe(2)
    expect(`${bad.stdout}${bad.stderr}`).toMatch(/controller\.replicaz/)
  }, 300_000)

  // Issue 10: a real run that publishes takes the pinned artifacts or those the cluster was installed
  // with (status.artifacts); anything else needs --allow-unpinned, as init does.
  // (stack sync renders only what the registry lost, and checks the artifacts then, the same way.)
  it('an Argo CD chart neither pinned nor installed: stack values set refuses it without --allow-unpinned (exit 2, nothing changed); --dry-run takes it', async () => {
    const other = join(mkdtempSync(join(tmpdir(), 'ichor-chart-')), 'argo-cd-10.1.1.tgz')
    writeFileSync(other, gzipSync(gunzipSync(readFileSync(UPSTREAM.argocdChart)), {level: 1})) // the same chart, other bytes
    const args = [...day2, '--argocd-chart', other, '--kokumi-manifest', h.kokumiManifest]
    const before = await endState('argocd')
    const r = await runIchor(['stack', 'values', 'set', 'argocd', '--yes', '--set', 'server.replicas=3', ...args], h.env)
    const said = `${r.stdout}${r.stderr}`
    expect(r.code, said).toBe(2)
    expect(said).toMatch(/ichor stack values set: not the pinned artifacts, nothing was changed/)
    expect(said).toMatch(/--argocd-chart: .*is not the pinned argo-cd 10\.11\.6 .*pass --allow-unpinned/)
    // The Kokumi manifest the cluster was installed with is not asked about again.
    expect(said).not.toMatch(/--kokumi-manifest:/)
    expect(await endState('argocd')).toEqual(before)
    const dry = await runIchor(['stack', 'values', 'set', 'argocd', '--set', 'server.replicas=3', '--dry-run', ...args], h.env)
    expect(dry.code, dry.stderr).toBe(0)
  }, 300_000)

  it('values edit: an unchanged buffer is a no-op; a refused buffer reopens with the problems on top; the fixed one is published and served', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ichor-editor-'))
    const editor = join(dir, 'editor.sh')
    // The "editor": records what it was shown, then writes the next prepared buffer (if any).
    writeFileSync(
      editor,
      '#!/bin/sh\nn=$(( $(cat "$EDIT_DIR/count" 2>/dev/null || echo 0) + 1 )); echo $n > "$EDIT_DIR/count"\ncp "$1" "$EDIT_DIR/seen-$n.yaml"\n[ -f "$EDIT_DIR/$n.yaml" ] && cp "$EDIT_DIR/$n.yaml" "$1"\nexit 0\n',
      {mode: 0o700},
    )
    const edit = (c: Component, sub: string, buffers: Record<number, unknown> = {}) => {
      mkdirSync(join(dir, sub))
      for (const [n, v] of Object.entries(buffers)) writeFileSync(join(dir, sub, `${n}.yaml`), stringify(v))
      return cli(['stack', 'values', 'edit', c, '--yes', '--json'], {EDITOR: editor, VISUAL: '', EDIT_DIR: join(dir, sub)})
    }
    const before = await endState('argocd')
    const unchanged = await edit('argocd', 'unchanged')
    expect(unchanged.code, unchanged.stderr).toBe(0)
    expect(jsonResult(unchanged)).toMatchObject({changed: false, component: 'argocd'})
    expect(await endState('argocd')).toEqual(before)
    expect(readFileSync(join(dir, 'unchanged', 'seen-1.yaml'), 'utf8')).toMatch(/^# The user layer of Argo CD's chart values/m)

    const fixed = await edit('argocd', 'fix', {1: {server: {replicaz: 2}}, 2: {server: {replicas: 2}}})
    expect(fixed.code, `${fixed.stderr}\n${fixed.stdout.slice(-2000)}`).toBe(0)
    expect(readFileSync(join(dir, 'fix', 'seen-2.yaml'), 'utf8')).toMatch(/^# The values were not accepted:\n#\s+- server\.replicaz: /m)
    const result = jsonResult<{tag: string; digest: string; changed: boolean}>(fixed)
    expect(result.changed).toBe(true)
    const after = await endState('argocd')
    expect(after.spec).toEqual({values: {server: {replicas: 2}}})
    expect(after.status).toMatchObject({publishedTag: result.tag, digest: result.digest, applicationSync: 'Synced', applicationHealth: 'Healthy'})
    expect(after.order.spec.source.version).toBe(result.tag)
    expect(after.preparation).toEqual({sourceDigest: result.digest, namedAfterArtifact: true, served: true})
    expect(after.application).toEqual({sync: 'Synced', health: 'Healthy'})
    // What was edited is what is published: diff with no change shows nothing.
    const none = await cli(['stack', 'values', 'diff', 'argocd', '--json'])
    expect(jsonResult(none)).toMatchObject({changed: false})

    const kokumi = await edit('kokumi', 'kokumi', {1: {server: {replicas: 2}}})
    expect(kokumi.code, `${kokumi.stderr}\n${kokumi.stdout.slice(-2000)}`).toBe(0)
    expect((await endState('kokumi')).spec).toEqual({values: {server: {replicas: 2}}})
    expect((await status()).doc.healthy).toBe(true)
  }, 600_000)

  it('values set killed as each step starts, then rerun: the same end state as an uninterrupted run', async () => {
    const set = (v: string, opts?: Parameters<typeof runIchor>[2]) =>
      cli(['stack', 'values', 'set', 'argocd', '--yes', '--set', `server.podAnnotations.kill=${v}`, '--json'], {}, opts)
    // The end states of uninterrupted runs to either value: each kill case moves to the other one.
    const reference: Record<string, Awaited<ReturnType<typeof endState>>> = {}
    const referenceDigest: Record<string, string | undefined> = {}
    let ids: string[] = []
    for (const v of ['a', 'b']) {
      const r = await set(v)
      expect(r.code, r.stderr).toBe(0)
      reference[v] = await endState('argocd')
      referenceDigest[v] = await preparationDigest('argocd')
      expect(reference[v]!.preparation).toEqual({sourceDigest: reference[v]!.status.digest, namedAfterArtifact: true, served: true})
      ids = taskIds(r)
    }
    expect(ids).toEqual([
      'lease',
      'store-values',
      'publish-bundles',
      'rerender-orders',
      'close-registry-tunnel',
      'orders',
      'wait-applications',
      'record-status',
    ])
    const kokumi = await endState('kokumi')
    const kokumiDigest = await preparationDigest('kokumi')
    for (const [k, id] of ids.entries()) {
      const v = k % 2 === 0 ? 'a' : 'b'
      const killed = await set(v, {killOn: killBeforeTask(k)})
      expect(killed.signal, `before ${id}: ${killed.stderr}`).toBe('SIGKILL')
      const rerun = await set(v)
      expect(rerun.code, `before ${id}: ${rerun.stderr}`).toBe(0)
      const end = await endState('argocd')
      expect(end, `killed before ${id}`).toEqual(reference[v])
      // Moving back to v rendered again: Kokumi 0.14.0 serves a new Preparation of the same
      // bundle (see endState), from ichor's unchanged digest.
      expect(await preparationDigest('argocd'), `killed before ${id}`).not.toBe(referenceDigest[v])
    }
    // Nothing of Kokumi's own component moved, its Preparation included.
    expect(await endState('kokumi')).toEqual(kokumi)
    expect(await preparationDigest('kokumi')).toBe(kokumiDigest)
  }, 1_200_000)

  it('a values set paused (SIGSTOP) as its plan starts while another set changes another key: resumed, it reads the stored layer under the Lease, and neither key is lost', async () => {
    const {resumed, meanwhile: second} = await pausedWhile(
      (onEvent) => cli(['stack', 'values', 'set', 'argocd', '--yes', '--set', 'server.podAnnotations.pausedFirst=a', '--json'], {}, {onEvent}),
      (e) => e.event === 'start',
      () => cli(['stack', 'values', 'set', 'argocd', '--yes', '--set', 'server.podAnnotations.whilePaused=b']),
    )
    expect(second.code, second.stderr).toBe(0)
    // Either it reads the other change under the Lease (exit 0) or it stops on the conflict (exit 3): never a lost change.
    expect([0, 3], `${resumed.stderr}${resumed.stdout.slice(-1500)}`).toContain(resumed.code)
    expect((await readInstallation(kube))!.spec.stack.argocd.values).toMatchObject({server: {podAnnotations: {whilePaused: 'b'}}})
  }, 300_000)

  it('values set paused (SIGSTOP) after it read the stored layer under the Lease, while a second operator breaks the lock and sets another key: resumed, it exits 3 naming the change and writes nothing', async () => {
    const {resumed, meanwhile: second} = await pausedWhile(
      (onEvent) => cli(['stack', 'values', 'set', 'argocd', '--yes', '--set', 'server.podAnnotations.brokenFirst=a', '--json'], {}, {onEvent}),
      (e) => e.event === 'task' && e.id === 'store-values' && e.status === 'running',
      () => cli(['stack', 'values', 'set', 'argocd', '--yes', '--set', 'server.podAnnotations.breaker=b', '--break-lock']),
    )
    expect(second.code, second.stderr).toBe(0)
    expect(resumed.code, `${resumed.stderr}${resumed.stdout.slice(-1500)}`).toBe(3)
    expect(`${resumed.stdout}${resumed.stderr}`).toMatch(/spec\.stack\.argocd\.values|lost the lock/)
    const values = (await readInstallation(kube))!.spec.stack.argocd.values as {server: {podAnnotations: Record<string, string>}}
    // (Its JSON patch may have landed just before the SIGSTOP did: the second operator then read
    // and kept brokenFirst, and the first stops at its next write. Either way breaker survives.)
    expect(values.server.podAnnotations).toMatchObject({breaker: 'b'})
  }, 300_000)

  it('values set after the registry lost its content: the losses are put back first, the set converges well within its timeout', async () => {
    await h.registry.restartEmpty()
    const lost = await status()
    expect(lost.run.code).toBe(1)
    const r = await cli(['stack', 'values', 'set', 'argocd', '--yes', '--set', 'server.podAnnotations.wiped=yes', '--timeout', '120s', '--json'])
    expect(r.code, `${r.stderr}\n${r.stdout.slice(-3000)}`).toBe(0)
    expect(doneTaskIds(r)).toEqual(expect.arrayContaining(['publish-bundles', 'rerender-orders']))
    const after = await status()
    expect(after.run.code, JSON.stringify(after.doc.components.map((c) => c.problems))).toBe(0)
    expect(after.doc.components.every((c) => c.registry.bundle && c.registry.preparation)).toBe(true)
  }, 600_000)

  // Kokumi's Applications carry `syncPolicy.automated.selfHeal: true`, so a running Argo CD puts
  // an out-of-band change back by itself within seconds (test/harness/argocd-simulator.ts, after
  // argo-cd v3.4.4's autoSync): a drift `stack status` can name is one nobody heals, as while
  // Argo CD's application controller (the StatefulSet argocd-application-controller of the
  // argo-cd chart) crash-loops. The simulator acts only while that pod is Ready.
  it("an object changed out of band while Argo CD's controller crash-loops: status names it (a dry-run apply as argocd-controller) with exit 1; stack sync has Argo CD sync it back once it runs again", async () => {
    const server = async () => (await getObject<Obj>(kube, {apiVersion: 'apps/v1', kind: 'Deployment', name: 'argocd-server', namespace: 'argocd'}))!
    const image = (await server()).spec.template.spec.containers[0].image as string
    const clean = await status()
    expect(clean.run.code, JSON.stringify(clean.doc.components.map((c) => c.problems))).toBe(0)
    expect(clean.doc.components.map((c) => c.driftedObjects)).toEqual([[], []])

    const controller = async () => getObject<Obj>(kube, {apiVersion: 'v1', kind: 'Pod', name: 'argocd-application-controller-0', namespace: 'argocd'})
    const ready = (pod: Obj | undefined) =>
      ((pod?.status?.conditions ?? []) as {type: string; status: string}[]).some((c) => c.type === 'Ready' && c.status === 'True')
    const running = await controller()
    expect(ready(running), 'the application controller runs before the test').toBe(true)
    const lift = h.pods.hold((pod) => ownedBy(pod, 'StatefulSet', 'argocd-application-controller'), 'crashloop')
    let lifted: Promise<void> | undefined
    try {
      await kube.request('DELETE', '/api/v1/namespaces/argocd/pods/argocd-application-controller-0')
      await waitUntil(
        'the application controller back, crash-looping',
        async () => {
          const pod = await controller()
          return pod !== undefined && pod.metadata.uid !== running!.metadata.uid && pod.metadata.labels?.[FAULT_LABEL] === 'crashloop' && !ready(pod)
        },
        {timeoutMs: 60_000},
      )
      // A round of the simulator that began while the old pod ran has finished; the next sees it down.
      await h.stack.tick()

      await kube.request('PATCH', '/apis/apps/v1/namespaces/argocd/deployments/argocd-server', {
        body: [{op: 'replace', path: '/spec/template/spec/containers/0/image', value: 'quay.io/argoproj/argocd:v0.0.0-out-of-band'}],
        contentType: 'application/json-patch+json',
        query: {fieldManager: 'kubectl-edit'},
      })
      const drifted = await status()
      expect(drifted.run.code).toBe(1)
      const argocd = drifted.doc.components.find((c) => c.component === 'argocd')!
      expect(argocd.driftedObjects).toEqual([{object: 'Deployment argocd/argocd-server', fields: ['spec.template.spec.containers[0].image']}])
      expect(argocd.drift).toContain(
        'Deployment argocd/argocd-server differs from the published bundle (spec.template.spec.containers[0].image): run ichor stack sync to have Argo CD sync it again',
      )
      expect(drifted.doc.components.find((c) => c.component === 'kokumi')!.driftedObjects).toEqual([])
      // Nobody heals it while the controller is down.
      await h.stack.tick()
      expect((await server()).spec.template.spec.containers[0].image).toBe('quay.io/argoproj/argocd:v0.0.0-out-of-band')

      // The fixed controller starts once stack sync has found the drift and asked Argo CD for a
      // sync: the step then waits until Argo CD put the object back. A crash-looping container
      // stays in its back-off after the fix, so its pod is deleted (as an operator skips the
      // back-off) and the StatefulSet starts a healthy one.
      const restart = async () => {
        await lift()
        await kube.request('DELETE', '/api/v1/namespaces/argocd/pods/argocd-application-controller-0')
      }
      const sync = await cli(
        ['stack', 'sync', '--yes', '--json'],
        {},
        {
          killOn: (e) => {
            if (e.event === 'task' && e.id === 'resync-drifted' && e.status === 'running') lifted ??= restart()
            return false
          },
        },
      )
      expect(sync.code, `${sync.stderr}\n${sync.stdout.slice(-3000)}`).toBe(0)
      expect(lifted, 'stack sync ran resync-drifted').toBeDefined()
      // Argo CD's own Application tracks the controller StatefulSet just restarted: wait-applications
      // runs when it still reads Progressing at its probe (a real wait), and is skipped otherwise.
      expect(doneTaskIds(sync).filter((id) => id !== 'wait-applications')).toEqual(['lease', 'resync-drifted'])
      expect((await server()).spec.template.spec.containers[0].image).toBe(image)
    } finally {
      await (lifted ?? lift())
    }
    await waitUntil('the application controller Ready again', async () => ready(await controller()), {timeoutMs: 60_000})
    // Argo CD reads its own StatefulSet's rollout on its next round: until then the Application is
    // Progressing and status rightly says so (exit 1). Wait for Argo CD, not for ichor's answer.
    await waitUntil(
      'Argo CD reads its own Application Healthy again',
      async () =>
        (await getObject<Obj>(kube, {apiVersion: 'argoproj.io/v1alpha1', kind: 'Application', name: 'argocd', namespace: 'argocd'}))?.status?.health?.status ===
        'Healthy',
      {timeoutMs: 60_000},
    )
    const after = await status()
    expect(after.run.code, JSON.stringify(after.doc.components.map((c) => c.problems))).toBe(0)
    expect(after.doc.components.map((c) => c.driftedObjects)).toEqual([[], []])
  }, 600_000)
  it('the drift check remembers what it found in line: a second look makes no dry run but for Secrets; a changed object is dry-run again and named', async () => {
    const saved = process.env.XDG_CACHE_HOME
    process.env.XDG_CACHE_HOME = mkdtempSync(join(tmpdir(), 'ichor-drift-'))
    try {
      // The same client, counting the dry-run applies it sends.
      let dryRuns: string[] = []
      const counting: Kube = {
        ...kube,
        request: (method, path, options) => {
          if (method === 'PATCH' && options?.query?.dryRun) dryRuns = [...dryRuns, path]
          return kube.request(method, path, options)
        },
      }
      const tag = (await readInstallation(kube))!.status!.stack.argocd!.publishedTag
      const look = async () => {
        dryRuns = []
        const drifted = await readBundleDrift(counting, oci, 'argocd', tag)
        return {drifted, dryRuns}
      }
      // A look after a look dry-runs only the Secrets, unless an object moved in between: a
      // controller may still write one (a Deployment's status after this file's roll-outs), and
      // that object is rightly dry-run again. So it looks again, a few times at most, until the
      // cluster holds still; a cache that remembers nothing fails every time.
      const lookAgain = async (want: number) => {
        let r = await look()
        for (let i = 0; i < 5 && r.dryRuns.length !== want; i++) {
          await new Promise((res) => setTimeout(res, 1000))
          r = await look()
        }
        return r
      }
      const bundle = parseObjects((await readPublishedManifest(oci, 'argocd', tag))!)
      const secrets = bundle.filter((o) => o.kind === 'Secret').length

      const cold = await look()
      expect(cold.drifted).toEqual([])
      expect(cold.dryRuns).toHaveLength(bundle.length)
      const warm = await lookAgain(secrets)
      expect(warm.drifted).toEqual([])
      expect(warm.dryRuns, warm.dryRuns.join(' ')).toHaveLength(secrets)

      const cm = '/api/v1/namespaces/argocd/configmaps/argocd-cm'
      const before = (await kube.request<Obj & {data?: Record<string, string>}>('GET', cm)).data ?? {}
      const [key, value] = Object.entries(before)[0]!
      await kube.request('PATCH', cm, {
        body: {data: {[key]: `${value} # out of band`}},
        contentType: 'application/merge-patch+json',
        query: {fieldManager: 'kubectl-edit'},
      })
      const changed = await look()
      expect(changed.drifted).toEqual([{object: 'ConfigMap argocd/argocd-cm', fields: [`data.${key}`]}])
      expect(changed.dryRuns).toEqual(expect.arrayContaining([cm]))
      expect(changed.dryRuns.length).toBeGreaterThanOrEqual(secrets + 1) // more only when a controller moved another object meanwhile (above)
      // Put back as Argo CD would (its manager, forced): in line again, and remembered again.
      await kube.request('PATCH', cm, {body: {data: {[key]: value}}, contentType: 'application/merge-patch+json', query: {fieldManager: 'argocd-controller'}})
      expect((await look()).drifted).toEqual([])
      const again = await lookAgain(secrets)
      expect(again.dryRuns, again.dryRuns.join(' ')).toHaveLength(secrets)

      // A CRD change (as `cni upgrade` makes one): the verdicts on its custom resources no longer
      // hold. Here the CiliumNetworkPolicy schema loses spec.description, which the bundle's
      // policies set: a sync would now be refused, and the warm cache must not hide that.
      const crd = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/ciliumnetworkpolicies.cilium.io'
      const policies = bundle.filter((o) => o.kind === 'CiliumNetworkPolicy')
      expect(policies.length).toBeGreaterThan(0)
      const versions = (await kube.request<Obj>('GET', crd)).spec.versions as {name: string; schema: {openAPIV3Schema: any}}[]
      const v = versions.findIndex((x) => x.name === policies[0]!.apiVersion.split('/')[1])
      const at = `/spec/versions/${v}/schema/openAPIV3Schema/properties/spec/properties/description`
      const description = versions[v]!.schema.openAPIV3Schema.properties.spec.properties.description
      await kube.request('PATCH', crd, {body: [{op: 'remove', path: at}], contentType: 'application/json-patch+json'})
      try {
        const afterCrd = await look()
        expect(afterCrd.drifted!.map((d) => d.object).sort()).toEqual(policies.map((p) => `CiliumNetworkPolicy argocd/${p.metadata.name}`).sort())
        // The policies are dry-run again, besides the Secrets; one more only when a controller
        // moved an object meanwhile (as above), never the whole bundle again.
        expect(afterCrd.dryRuns, afterCrd.dryRuns.join(' ')).toEqual(
          expect.arrayContaining(policies.map((p) => expect.stringContaining(`/ciliumnetworkpolicies/${p.metadata.name}`))),
        )
        expect(afterCrd.dryRuns.length).toBeGreaterThanOrEqual(secrets + policies.length)
        expect(afterCrd.dryRuns.length).toBeLessThan(bundle.length)
      } finally {
        await kube.request('PATCH', crd, {body: [{op: 'add', path: at, value: description}], contentType: 'application/json-patch+json'})
      }
      expect((await look()).drifted).toEqual([])
      const remembered = await lookAgain(secrets)
      expect(remembered.dryRuns, remembered.dryRuns.join(' ')).toHaveLength(secrets)
    } finally {
      if (saved === undefined) delete process.env.XDG_CACHE_HOME
      else process.env.XDG_CACHE_HOME = saved
    }
  }, 300_000)
})
