// `ichor restore` on the harness: a converged 1+1 cluster backed up, then lost whole (etcd and
// the API server with their data, every machine a new one in maintenance mode, the registry's
// bundles), then brought back from the backup onto the same machines from a laptop with an empty
// state folder. Real: etcd (snapshot, etcdutl restore), the API server, controllers, helm, the
// registry. SIMULATED: the Talos machines (talosctl-simulator.mjs, `bootstrap --recover-from` asks
// the harness to restore its etcd as Talos's etcd service does), Kokumi and Argo CD.
import {execFile} from 'node:child_process'
import {existsSync, mkdtempSync, readdirSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {promisify} from 'node:util'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {readReleaseRecord} from '../../src/lib/helm/release-record.js'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {encrypter} from '../../src/lib/state/sealed-bundle.js'
import {givenStateKey} from '../../src/lib/state/state-key.js'
import {jsonEvents, jsonResult, runIchor, type CliRun, type HarnessCluster} from '../harness/cluster.js'
import {convergedCluster, CONVERGED_TIMEOUT_MS} from '../harness/converged.js'
import {killBeforeTask, taskIds} from '../harness/kill.js'
import {declareMachine} from '../sim/simulated-nodes.js'
import {restoreArgs} from '../support/restore-args.js'
import {UPSTREAM} from '../support/upstream.js'

type Meta = {metadata: {uid: string; name: string; namespace?: string}}

describe('ichor restore on the harness', () => {
  let h: HarnessCluster
  let kube: Kube
  let work: string
  const show = (run: CliRun) => `${run.stderr.slice(-4000)}${run.stdout.slice(-2000)}`
  const day2 = (stateDir: string) => ['--kubeconfig', join(stateDir, 'kubeconfig'), '--state-dir', stateDir]
  const uidOf = async (path: string) => ((await kube.request('GET', path)) as Meta).metadata.uid
  /** Objects ichor made (and the Helm release it owns), by their API path. */
  const made = [
    '/apis/ichor.maesh.dev/v1alpha1/ichorinstallations/ichor',
    '/api/v1/namespaces/ichor-system',
    '/api/v1/namespaces/ichor-system/secrets/ichor-talos',
    '/api/v1/namespaces/ichor-system/secrets/ichor-kokumi-admin',
    '/api/v1/namespaces/ichor-system/secrets/ichor-argocd-redis',
    '/api/v1/namespaces/kube-system/secrets/sh.helm.release.v1.cilium.v1',
    '/apis/apps/v1/namespaces/kube-system/daemonsets/cilium',
    '/apis/delivery.kokumi.dev/v1alpha1/namespaces/argocd/orders/argocd',
    '/apis/delivery.kokumi.dev/v1alpha1/namespaces/kokumi/orders/kokumi',
  ]
  let before: Record<string, string>
  let backupFile: string

  beforeAll(async () => {
    h = await convergedCluster('1+1')
    kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
    work = mkdtempSync(join(tmpdir(), 'ichor-restore-'))
    before = Object.fromEntries(await Promise.all(made.map(async (p) => [p, await uidOf(p)] as const)))
    backupFile = join(work, 'before.ichor-backup')
    const backup = await runIchor(['backup', backupFile, ...day2(h.stateDir)], h.env)
    if (backup.code !== 0) throw new Error(`backup failed: ${show(backup)}`)
  }, CONVERGED_TIMEOUT_MS)
  afterAll(async () => h?.stop())

  it('refuses, before any node is touched: a running cluster, a key that does not open the file, a file that is not a backup (exit 2)', async () => {
    const laptop = join(work, 'refusals')
    const onRunning = await runIchor([...restoreArgs(h, backupFile, laptop), '--json'], h.env)
    expect(onRunning.code, show(onRunning)).toBe(2)
    expect(jsonResult<{error: {message: string}}>(onRunning).error.message).toMatch(/not every node is in maintenance mode, nothing was changed/)
    expect(jsonEvents(onRunning).filter((e) => e.event === 'task')).toEqual([])

    const other = join(work, 'other.key')
    writeFileSync(other, 'the passphrase of another cluster\n', {mode: 0o600})
    const wrongKey = await runIchor([...restoreArgs(h, backupFile, laptop), '--state-passphrase-file', other, '--json'], h.env)
    expect(wrongKey.code, show(wrongKey)).toBe(2)
    expect(jsonResult<{error: {message: string}}>(wrongKey).error.message).toBe(
      `the passphrase from --state-passphrase-file ${other} does not decrypt ${backupFile}`,
    )

    const foreign = join(work, 'foreign.age')
    writeFileSync(foreign, await encrypter((await givenStateKey(h.stateKeyFile))!).encrypt('not a backup'))
    const notBackup = await runIchor([...restoreArgs(h, foreign, laptop), '--json'], h.env)
    expect(notBackup.code, show(notBackup)).toBe(2)
    expect(jsonResult<{error: {message: string}}>(notBackup).error.message).toMatch(/foreign\.age (is damaged|decrypts, but is not an ichor backup)/)
    expect(existsSync(laptop)).toBe(false)
  }, 120_000)

  it('after a total loss, brings the cluster back from a laptop with an empty state folder, killed before each of its steps and run again; every object ichor made is back with its uid', async () => {
    const set = await runIchor(['cni', 'values', 'set', '--yes', 'debug.enabled=true', ...day2(h.stateDir), '--cilium-chart', UPSTREAM.ciliumChart], h.env)
    expect(set.code, show(set)).toBe(0)
    expect((await readReleaseRecord(kube, 'cilium', 'kube-system'))!.revision).toBe(2)

    await h.loseEverything()
    await expect(kube.request('GET', '/api/v1/namespaces')).rejects.toThrow()
    const laptop = join(work, 'laptop')
    const args = restoreArgs(h, backupFile, laptop)
    // One kill before each step, each run continuing what the last left: every boundary is a place a rerun starts from.
    let ids: string[] | undefined
    let runs = 0
    for (let k = 1; ; k++) {
      const run = await runIchor([...args, '--json'], h.env, {killOn: killBeforeTask(k)})
      runs++
      ids ??= taskIds(run)
      if (run.signal === null) {
        expect(run.code, show(run)).toBe(0)
        break
      }
      expect(run.signal, show(run)).toBe('SIGKILL')
      if (k > ids.length) throw new Error(`still killed after ${k} runs`)
    }
    expect(runs).toBeGreaterThan(10)
    // init's steps, with the bootstrap from the snapshot, the record of the backup, the old machines' Nodes, and Kokumi's lost renders asked again.
    expect(ids).toEqual([
      'validate',
      'talos-secrets',
      'talos-configs',
      'apply-configs',
      'bootstrap-etcd',
      'lease',
      'record-restore',
      'forget-old-nodes',
      'node-config-changes',
      'state-in-cluster',
      'wait-cilium',
      'adopt-cilium',
      'talos-handover',
      'stack-secrets',
      'kokumi-apply',
      'argocd-apply',
      'publish-bundles',
      'rerender-orders',
      'close-registry-tunnel',
      'orders',
      'promote-first-install',
      'policies',
      'wait-applications',
      'record-status',
      'show-kokumi-password',
    ])

    for (const path of made) expect(await uidOf(path), path).toBe(before[path])
    // The backup's Helm history: revision 1, not the values change made after it.
    const helm = (argv: string[]) => promisify(execFile)(process.env.ICHOR_HELM ?? 'helm', [...argv, '-n', 'kube-system', '--kubeconfig', h.cp.kubeconfigPath])
    const history = JSON.parse((await helm(['history', 'cilium', '-o', 'json'])).stdout) as {revision: number; status: string}[]
    expect(history.map((r) => [r.revision, r.status])).toEqual([[1, 'deployed']])
    const values = await runIchor(['cni', 'values', 'get', '--kubeconfig', join(laptop, 'kubeconfig'), '-o', 'json'], h.env)
    expect(values.code, show(values)).toBe(0)
    expect(JSON.parse(values.stdout)).not.toHaveProperty('debug')
    expect(readdirSync(laptop).sort()).toEqual(expect.arrayContaining(['kubeconfig', 'secrets.yaml', 'talosconfig']))
  }, 900_000)

  it('the restored cluster is healthy, an init rerun changes nothing, and a values change works', async () => {
    const laptop = join(work, 'laptop')
    const cni = await runIchor(['cni', 'status', ...day2(laptop)], h.env)
    expect(cni.code, show(cni)).toBe(0)
    const stack = await runIchor(['stack', 'status', '--kubeconfig', join(laptop, 'kubeconfig'), '--registry-endpoint', h.registry.endpoint], h.env)
    expect(stack.code, show(stack)).toBe(0)
    const initArgs = h.initArgs.map((a, i) => (h.initArgs[i - 1] === '--state-dir' ? laptop : a))
    const rerun = await runIchor([...initArgs, '--json'], h.env)
    expect(rerun.code, show(rerun)).toBe(0)
    expect(jsonResult<{changed: boolean}>(rerun).changed).toBe(false)
    const set = await runIchor(['cni', 'values', 'set', '--yes', 'debug.enabled=true', ...day2(laptop), '--cilium-chart', UPSTREAM.ciliumChart], h.env)
    expect(set.code, show(set)).toBe(0)
    expect(await readReleaseRecord(kube, 'cilium', 'kube-system')).toMatchObject({revision: 2, status: 'deployed'})
  }, 600_000)

  it("onto other machines with another endpoint: the old machines' Nodes are forgotten, the workloads move to the new ones, and the cluster is healthy", async () => {
    const laptop = join(work, 'laptop')
    const file = join(work, 'restored.ichor-backup')
    const backup = await runIchor(['backup', file, ...day2(laptop)], h.env)
    expect(backup.code, show(backup)).toBe(0)
    const talosVersion = h.initArgs[h.initArgs.indexOf('--talos-version') + 1]!
    const onto = {controlPlanes: ['127.0.0.61'], workers: ['127.0.0.62']}
    declareMachine(h.nodes, {ip: onto.controlPlanes[0]!, role: 'controlplane', talosVersion})
    declareMachine(h.nodes, {ip: onto.workers[0]!, role: 'worker', talosVersion})
    await h.loseEverything()
    const elsewhere = join(work, 'elsewhere')
    const run = await runIchor([...restoreArgs(h, file, elsewhere, onto), '--endpoint', 'https://127.0.0.61:6443', '--json'], h.env)
    expect(run.code, show(run)).toBe(0)
    expect(jsonEvents(run)).toContainEqual(expect.objectContaining({event: 'task', id: 'forget-old-nodes', status: 'done'}))
    const nodes = (await kube.request('GET', '/api/v1/nodes')) as {items: {status: {addresses: {type: string; address: string}[]}}[]}
    const addresses = nodes.items.map((n) => n.status.addresses.find((a) => a.type === 'InternalIP')!.address).sort()
    expect(addresses).toEqual(['127.0.0.61', '127.0.0.62'])
    const cr = (await kube.request('GET', '/apis/ichor.maesh.dev/v1alpha1/ichorinstallations/ichor')) as {spec: {talos: Record<string, unknown>}}
    expect(cr.spec.talos).toMatchObject({endpoint: 'https://127.0.0.61:6443', controlPlanes: onto.controlPlanes, workers: onto.workers})
    expect((await runIchor(['cni', 'status', ...day2(elsewhere)], h.env)).code).toBe(0)
    const stack = await runIchor(['stack', 'status', '--kubeconfig', join(elsewhere, 'kubeconfig'), '--registry-endpoint', h.registry.endpoint], h.env)
    expect(stack.code, show(stack)).toBe(0)
  }, 600_000)
})
