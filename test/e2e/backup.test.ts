// `ichor backup` and `ichor backup inspect` on a restored converged 1+1 cluster. Real: the etcd
// the snapshot comes from (read through its Maintenance API by the simulated Talos node, as
// machined's EtcdSnapshot reads it), etcdutl's snapshot status, the API server the
// IchorInstallation and the sealed bundle are read from, age and tar. SIMULATED: the Talos node
// that serves `talosctl etcd snapshot` (test/sim/talosctl-simulator.mjs).
import {execFileSync, type ChildProcess} from 'node:child_process'
import {existsSync, mkdtempSync, readdirSync, readFileSync, statSync, watch, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {parse} from 'yaml'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {openBackupFile, type BackupManifest} from '../../src/lib/backup/archive.js'
import {connectKube} from '../../src/lib/kube/client.js'
import {givenStateKey} from '../../src/lib/state/state-key.js'
import {killTree} from '../harness/kill.js'
import {jsonResult, runIchor, type CliRun, type HarnessCluster} from '../harness/cluster.js'
import {convergedCluster, CONVERGED_TIMEOUT_MS} from '../harness/converged.js'

type BackupResult = {path: string; bytes: number; manifest: BackupManifest}

describe('ichor backup on the harness', () => {
  let h: HarnessCluster
  let out: string
  const show = (run: CliRun) => `${run.stderr.slice(-3000)}${run.stdout.slice(-2000)}`
  const access = () => ['--kubeconfig', join(h.stateDir, 'kubeconfig'), '--state-dir', h.stateDir]
  const backup = (file: string, extra: string[] = [], env: NodeJS.ProcessEnv = {}, opts: Parameters<typeof runIchor>[2] = {}) =>
    runIchor(['backup', file, ...access(), '--json', ...extra], {...h.env, ...env}, opts)
  const opened = async (file: string) => {
    const dir = mkdtempSync(join(tmpdir(), 'ichor-backup-e2e-'))
    const manifest = await openBackupFile(file, (await givenStateKey(h.stateKeyFile))!, dir)
    return {dir, manifest}
  }

  beforeAll(async () => {
    h = await convergedCluster('1+1')
    out = mkdtempSync(join(tmpdir(), 'ichor-backups-'))
  }, CONVERGED_TIMEOUT_MS)
  afterAll(async () => h?.stop())

  it("writes one encrypted 0600 file holding the harness etcd's real snapshot, the IchorInstallation and the sealed bundle; inspect lists the same", async () => {
    const file = join(out, 'first.ichor-backup')
    const run = await backup(file)
    expect(run.code, show(run)).toBe(0)
    const result = jsonResult<BackupResult>(run)
    expect(result.path).toBe(file)
    expect(statSync(file).size).toBe(result.bytes)
    expect(statSync(file).mode & 0o777).toBe(0o600)
    expect(readdirSync(out)).toEqual(['first.ichor-backup'])
    const m = result.manifest
    expect(m).toMatchObject({
      format: 'ichor-backup/v1',
      nodes: {controlPlanes: h.controlPlanes, workers: h.workers},
      etcd: {node: h.controlPlanes[0]},
      cluster: {name: h.initArgs[h.initArgs.indexOf('--cluster-name') + 1]},
    })
    expect(m.versions.cilium).toMatch(/^1\.\d+\.\d+$/)

    // The snapshot is the harness etcd's own: etcdutl reads the revision the manifest names, and
    // the keys of what ichor made are in it (etcd stores keys as they are).
    const {dir} = await opened(file)
    const status = JSON.parse(execFileSync(h.cp.etcdutl, ['snapshot', 'status', join(dir, 'etcd.snapshot'), '-w', 'json'], {encoding: 'utf8'})) as {
      revision: number
      totalKey: number
    }
    expect(status.revision).toBe(m.etcd.revision)
    expect(status.totalKey).toBe(m.etcd.totalKeys)
    expect(m.etcd.revision).toBeGreaterThan(100)
    const snapshot = readFileSync(join(dir, 'etcd.snapshot'))
    for (const key of ['/registry/secrets/ichor-system/ichor-kokumi-admin', '/registry/secrets/kube-system/sh.helm.release.v1.cilium.v1', '/registry/leases/'])
      expect(snapshot.includes(Buffer.from(key)), key).toBe(true)
    const installation = JSON.parse(readFileSync(join(dir, 'installation.json'), 'utf8')) as {kind: string; metadata: {uid: string; managedFields?: unknown}}
    const kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
    const live = (await kube.request('GET', '/apis/ichor.maesh.dev/v1alpha1/ichorinstallations/ichor')) as {metadata: {uid: string}}
    expect(installation).toMatchObject({kind: 'IchorInstallation', metadata: {uid: live.metadata.uid}})
    expect(installation.metadata.managedFields).toBeUndefined()
    const bundle = JSON.parse(readFileSync(join(dir, 'talos-bundle.json'), 'utf8')) as {
      metadata: {annotations: Record<string, string>}
      data: Record<string, string>
    }
    expect(bundle.metadata.annotations['ichor.maesh.dev/bundle-format']).toBe('age-armor-v1')

    const inspect = await runIchor(['backup', 'inspect', file, '--json'], h.env)
    expect(inspect.code, show(inspect)).toBe(0)
    expect(jsonResult<BackupResult>(inspect)).toEqual({schemaVersion: 1, path: file, bytes: result.bytes, manifest: m})
    const human = await runIchor(['backup', 'inspect', file], h.env)
    expect(human.code, show(human)).toBe(0)
    expect(human.stdout).toContain(`etcd snapshot  revision ${m.etcd.revision}, ${m.etcd.totalKeys} keys`)
    expect(human.stdout).toContain('every part')

    // -o yaml and -o json print the same result document as --json (the one output helper).
    for (const format of ['yaml', 'json'] as const) {
      const other = join(out, `as-${format}.ichor-backup`)
      const printed = await runIchor(['backup', other, ...access(), '-o', format], h.env)
      expect(printed.code, show(printed)).toBe(0)
      const doc = (format === 'yaml' ? parse(printed.stdout) : JSON.parse(printed.stdout)) as BackupResult
      expect(doc).toMatchObject({path: other, bytes: statSync(other).size, manifest: {format: 'ichor-backup/v1', nodes: m.nodes}})
    }
  }, 180_000)

  it("holds no plaintext secret: neither the bundle's keys nor the generated passwords are in its bytes, nor in the output", async () => {
    const file = join(out, 'first.ichor-backup')
    const bytes = readFileSync(file)
    const kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
    const secretValues = async (name: string) =>
      Object.values(((await kube.request('GET', `/api/v1/namespaces/ichor-system/secrets/${name}`)) as {data: Record<string, string>}).data).map((v) =>
        Buffer.from(v, 'base64').toString('utf8'),
      )
    const talosSecrets = parse(readFileSync(join(h.stateDir, 'secrets.yaml'), 'utf8')) as {secrets: Record<string, string>; trustdinfo: {token: string}}
    const needles = [
      ...(await secretValues('ichor-kokumi-admin')),
      ...(await secretValues('ichor-argocd-redis')),
      talosSecrets.trustdinfo.token,
      ...Object.values(talosSecrets.secrets),
    ].filter((n) => n.length >= 16)
    expect(needles.length).toBeGreaterThan(3)
    for (const needle of needles) {
      expect(bytes.includes(Buffer.from(needle)), 'a secret in the file').toBe(false)
      expect(bytes.includes(Buffer.from(Buffer.from(needle).toString('base64'))), 'a secret in the file, base64').toBe(false)
    }
  }, 60_000)

  it("a key that does not open the cluster's bundle is refused (exit 2) and no file is written; a folder that does not exist is refused before the cluster is asked", async () => {
    const other = join(out, 'other.key')
    writeFileSync(other, 'a passphrase of another cluster\n', {mode: 0o600})
    const file = join(out, 'wrong-key.ichor-backup')
    const run = await backup(file, ['--state-passphrase-file', other])
    expect(run.code, show(run)).toBe(2)
    expect(jsonResult<{error: {message: string}}>(run).error.message).toMatch(/does not decrypt ichor-system\/ichor-talos/)
    expect(existsSync(file)).toBe(false)
    const missing = await runIchor(['backup', join(out, 'no', 'such', 'folder', 'x.ichor-backup'), '--kubeconfig', join(out, 'no-kubeconfig'), '--json'], h.env)
    expect(missing.code, show(missing)).toBe(2)
    expect(jsonResult<{error: {message: string}}>(missing).error.message).toMatch(/^FILE: the folder .*no\/such\/folder does not exist$/)
    const noKey = await backup(file, [], {ICHOR_STATE_PASSPHRASE_FILE: ''})
    expect(noKey.code, show(noKey)).toBe(2)
    expect(jsonResult<{error: {message: string}}>(noKey).error.message).toMatch(
      /^a backup is encrypted with the key that seals the Talos bundle: no passphrase/,
    )
  }, 120_000)

  it('killed while it writes, it never leaves a half file at the path: SIGTERM removes its temp file, and the next backup removes one a SIGKILL left', async () => {
    const file = join(out, 'killed.ichor-backup')
    const killedMidWrite: string[] = []
    for (const signal of ['SIGKILL', 'SIGTERM', 'SIGKILL', 'SIGTERM'] as const) {
      let child: ChildProcess | undefined
      let killed = false
      const watcher = watch(out, (_event, name) => {
        if (killed || !child?.pid || !name?.startsWith('.killed.ichor-backup.')) return
        killed = true
        if (signal === 'SIGKILL') killTree(child.pid)
        else child.kill('SIGTERM')
      })
      const run = await backup(file, [], {}, {onStart: (c) => (child = c)})
      watcher.close()
      // Whatever the moment the signal landed, the path holds a whole backup or nothing.
      if (existsSync(file)) expect((await opened(file)).manifest.format).toBe('ichor-backup/v1')
      if (run.code === 0) continue
      expect(run.signal ?? run.code, show(run)).toBeTruthy()
      const temps = readdirSync(out).filter((n) => n.startsWith('.killed.ichor-backup.'))
      if (signal === 'SIGTERM') expect(temps, 'a SIGTERM leaves no temp file').toEqual([])
      if (!existsSync(file)) killedMidWrite.push(signal)
    }
    expect(killedMidWrite.length, 'at least one kill landed while the file was written').toBeGreaterThan(0)
    const again = await backup(file)
    expect(again.code, show(again)).toBe(0)
    expect(readdirSync(out).filter((n) => n.startsWith('.killed.ichor-backup.'))).toEqual([])
    const {manifest} = await opened(file)
    expect(manifest.etcd.revision).toBeGreaterThan(0)
  }, 300_000)
  // Last: it loses the whole cluster. A control test of the harness that `ichor restore` stands on:
  // the backup's snapshot, recovered by the simulated `talosctl bootstrap --recover-from` into
  // the real etcd, brings back what was there when it was taken, and nothing made after it.
  it("the harness: a total loss, then the backup's etcd snapshot recovered by talosctl bootstrap --recover-from brings back the objects of its time with their uids, and not the later ones", async () => {
    const kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
    const configMap = (name: string) => ({apiVersion: 'v1', kind: 'ConfigMap', metadata: {name, namespace: 'default'}, data: {at: name}})
    const before = (await kube.request('POST', '/api/v1/namespaces/default/configmaps', {body: configMap('before-backup')})) as {metadata: {uid: string}}
    const file = join(out, 'before-loss.ichor-backup')
    const run = await backup(file)
    expect(run.code, show(run)).toBe(0)
    await kube.request('POST', '/api/v1/namespaces/default/configmaps', {body: configMap('after-backup')})
    const {dir, manifest} = await opened(file)
    const cp = h.controlPlanes[0]!
    const talos = (args: string[], node = cp) => h.nodes.run([...args, '--nodes', node, '--endpoints', node, '--talosconfig', join(h.stateDir, 'talosconfig')])
    const configs = Object.fromEntries(
      [...h.controlPlanes, ...h.workers].map((ip) => [
        ip,
        (JSON.parse(readFileSync(join(h.nodes.stateDir, `node-${ip}.json`), 'utf8')) as {config: string}).config,
      ]),
    )

    await h.loseEverything()
    await expect(kube.request('GET', '/api/v1/namespaces/default/configmaps/before-backup')).rejects.toThrow()
    expect((await h.nodes.run(['get', 'disks', '--insecure', '--nodes', cp])).exitCode).toBe(0) // maintenance mode
    for (const [ip, config] of Object.entries(configs)) {
      const path = join(dir, `${ip}.yaml`)
      writeFileSync(path, config)
      const applied = await h.nodes.run(['apply-config', '--insecure', '--nodes', ip, '--file', path])
      expect(applied.exitCode, applied.stderr).toBe(0)
    }
    // A file that is no snapshot is refused by talosctl before anything reaches the node.
    const junk = join(dir, 'junk.snapshot')
    writeFileSync(junk, 'not a snapshot')
    const refused = await talos(['bootstrap', '--recover-from', junk])
    expect(refused.exitCode).not.toBe(0)
    expect(refused.stderr).toMatch(/invalid database/) // etcdutl's Status of a file that is no bbolt database
    expect(existsSync(join(h.nodes.stateDir, 'etcd-recover.request'))).toBe(false)

    const recovered = await talos(['bootstrap', '--recover-from', join(dir, 'etcd.snapshot')])
    expect(recovered.exitCode, recovered.stderr).toBe(0)
    expect(recovered.stdout).toContain(`revision ${manifest.etcd.revision}, total keys ${manifest.etcd.totalKeys}`)
    const back = (await kube.request('GET', '/api/v1/namespaces/default/configmaps/before-backup')) as {metadata: {uid: string}}
    expect(back.metadata.uid).toBe(before.metadata.uid)
    await expect(kube.request('GET', '/api/v1/namespaces/default/configmaps/after-backup')).rejects.toThrow(/404|not found/i)
    const installation = JSON.parse(readFileSync(join(dir, 'installation.json'), 'utf8')) as {metadata: {uid: string}}
    expect(((await kube.request('GET', '/apis/ichor.maesh.dev/v1alpha1/ichorinstallations/ichor')) as {metadata: {uid: string}}).metadata.uid).toBe(
      installation.metadata.uid,
    )
    // A second bootstrap is refused as Talos refuses it.
    expect((await talos(['bootstrap'])).stderr).toMatch(/AlreadyExists/)
  }, 300_000)
})
