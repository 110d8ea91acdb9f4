// `ichor kubeconfig` and `ichor talosconfig` on a restored converged 1+1 cluster, with a home
// folder of the test's own. SIMULATED: `talosctl kubeconfig` (the harness's credentials in the
// shape Talos's GenerateAdmin gives them) and the nodes that check the talosconfig. Real: the
// apiserver the merged kubeconfig reaches, read by ichor's kubectl-style loader and by
// @kubernetes/client-node's.
import {mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync} from 'node:fs'
import {X509Certificate} from 'node:crypto'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {CoreV1Api, KubeConfig} from '@kubernetes/client-node'
import {parse, stringify} from 'yaml'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {connectKube} from '../../src/lib/kube/client.js'
import {readTalosBundle, readTalosBundleSecret} from '../../src/lib/state/installation.js'
import {sealedBundleSecret} from '../../src/lib/state/sealed-bundle.js'
import {givenStateKey} from '../../src/lib/state/state-key.js'
import {killTreeWhen, stepStarts} from '../harness/kill.js'
import {jsonResult, runIchor, type CliRun, type HarnessCluster} from '../harness/cluster.js'
import {convergedCluster, CONVERGED_TIMEOUT_MS} from '../harness/converged.js'
import {shortCertificate} from '../support/short-certificate.js'

type Kubeconfig = {'current-context': string; contexts: {name: string}[]; users: {name: string; user: Record<string, string>}[]}
type Talosconfig = {context: string; contexts: Record<string, {endpoints: string[]; nodes: string[]; key: string}>}

describe('ichor kubeconfig and ichor talosconfig on the harness', () => {
  let h: HarnessCluster
  let home: string
  let env: NodeJS.ProcessEnv
  let cluster: string
  const show = (run: CliRun) => `${run.stderr.slice(-3000)}${run.stdout.slice(-2000)}`
  const kubeconfigFile = () => join(home, '.kube', 'config')
  const talosconfigFile = () => join(home, '.talos', 'config')
  const ichor = (args: string[], extra: NodeJS.ProcessEnv = {}) => runIchor(args, {...env, ...extra})
  const access = () => ['--kubeconfig', join(h.stateDir, 'kubeconfig'), '--state-dir', h.stateDir]

  beforeAll(async () => {
    h = await convergedCluster('1+1')
    home = mkdtempSync(join(tmpdir(), 'ichor-home-'))
    env = {...h.env, HOME: home, KUBECONFIG: '', TALOSCONFIG: ''}
    cluster = h.initArgs[h.initArgs.indexOf('--cluster-name') + 1]!
  }, CONVERGED_TIMEOUT_MS)
  afterAll(async () => h?.stop())

  it("merges a fresh admin kubeconfig into kubectl's file beside another cluster's context; kubectl-style loaders reach the cluster with it; a rerun changes nothing", async () => {
    mkdirSync(join(home, '.kube'), {mode: 0o700})
    const other = {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{name: 'work', cluster: {server: 'https://192.0.2.50:6443'}}],
      users: [{name: 'me@work', user: {token: 'work-token'}}],
      contexts: [{name: 'me@work', context: {cluster: 'work', user: 'me@work'}}],
      'current-context': 'me@work',
    }
    writeFileSync(kubeconfigFile(), stringify(other), {mode: 0o600})
    const run = await ichor(['kubeconfig', ...access()])
    expect(run.code, show(run)).toBe(0)
    expect(run.stdout).toMatch(new RegExp(`Context admin@${cluster}: merged into .*\\.kube/config \\(the current context\\)`))
    const merged = parse(readFileSync(kubeconfigFile(), 'utf8')) as Kubeconfig
    expect(merged['current-context']).toBe(`admin@${cluster}`)
    expect(merged.contexts.map((c) => c.name).sort()).toEqual([`admin@${cluster}`, 'me@work'].sort())
    expect(statSync(kubeconfigFile()).mode & 0o777).toBe(0o600)
    // Its secret (the harness's apiserver takes a token where Talos's kubeconfig has a client key) never reaches the output.
    const admin = merged.users.find((u) => u.name === `admin@${cluster}`)!.user
    const key = admin['client-key-data'] ?? admin.token!
    expect(key.length).toBeGreaterThan(20)
    expect(`${run.stdout}${run.stderr}`).not.toContain(key)
    // kubectl's loading rules (ichor's loader) and client-node's both reach the apiserver.
    const kube = await connectKube({kubeconfig: kubeconfigFile()})
    expect(((await kube.request('GET', '/api/v1/nodes')) as {items: unknown[]}).items.length).toBe(2)
    const kc = new KubeConfig()
    kc.loadFromFile(kubeconfigFile())
    expect((await kc.makeApiClient(CoreV1Api).listNamespace()).items.map((n) => n.metadata?.name)).toContain('ichor-system')
    const again = await ichor(['kubeconfig', ...access(), '--json'])
    expect(again.code, show(again)).toBe(0)
    expect(jsonResult(again)).toMatchObject({changed: false, merged: true, context: `admin@${cluster}`})
  }, 120_000)

  it('a different context of the same name is refused (exit 2, the file unchanged); --context-name adds it beside; --force replaces it', async () => {
    const clash = parse(readFileSync(kubeconfigFile(), 'utf8')) as Kubeconfig
    clash.users = clash.users.map((u) => (u.name === `admin@${cluster}` ? {...u, user: {token: 'someone-elses'}} : u))
    writeFileSync(kubeconfigFile(), stringify(clash), {mode: 0o600})
    const before = readFileSync(kubeconfigFile(), 'utf8')
    const refused = await ichor(['kubeconfig', ...access()])
    expect(refused.code, show(refused)).toBe(2)
    expect(refused.stderr).toMatch(new RegExp(`already has a different user "admin@${cluster}": ichor does not overwrite it`))
    expect(refused.stderr).toMatch(/--context-name NAME/)
    expect(readFileSync(kubeconfigFile(), 'utf8')).toBe(before)
    const named = await ichor(['kubeconfig', ...access(), '--context-name', 'homelab'])
    expect(named.code, show(named)).toBe(0)
    const withNamed = parse(readFileSync(kubeconfigFile(), 'utf8')) as Kubeconfig
    expect(withNamed['current-context']).toBe('homelab')
    expect(withNamed.users.find((u) => u.name === `admin@${cluster}`)?.user).toEqual({token: 'someone-elses'})
    const forced = await ichor(['kubeconfig', ...access(), '--force'])
    expect(forced.code, show(forced)).toBe(0)
    expect((parse(readFileSync(kubeconfigFile(), 'utf8')) as Kubeconfig).users.find((u) => u.name === `admin@${cluster}`)?.user).not.toEqual({
      token: 'someone-elses',
    })
    // A file of its own: written whole, and an existing one only with --force or --merge.
    const own = join(home, 'homelab.kubeconfig')
    expect((await ichor(['kubeconfig', own, ...access()])).code).toBe(0)
    expect(statSync(own).mode & 0o777).toBe(0o600)
    const exists = await ichor(['kubeconfig', own, ...access()])
    expect(exists.code, show(exists)).toBe(2)
    expect(exists.stderr).toMatch(/homelab\.kubeconfig already exists/)
  }, 120_000)

  it("talosconfig: from the sealed copy in the cluster when this machine has none, aimed at the control planes, merged into talosctl's file, and talosctl reaches the nodes with it", async () => {
    const emptyState = mkdtempSync(join(tmpdir(), 'ichor-nostate-'))
    const run = await ichor(['talosconfig', '--kubeconfig', join(h.stateDir, 'kubeconfig'), '--state-dir', emptyState])
    expect(run.code, show(run)).toBe(0)
    expect(run.stdout).toMatch(/From the cluster's sealed Talos bundle/)
    expect(run.stdout).toMatch(/Client certificate valid until \d{4}-/)
    const merged = parse(readFileSync(talosconfigFile(), 'utf8')) as Talosconfig
    const context = merged.contexts[merged.context]!
    expect(context.endpoints).toEqual(h.controlPlanes)
    expect(context.nodes).toEqual(h.controlPlanes.slice(0, 1))
    expect(statSync(talosconfigFile()).mode & 0o777).toBe(0o600)
    expect(statSync(join(home, '.talos')).mode & 0o777).toBe(0o700)
    expect(`${run.stdout}${run.stderr}`).not.toContain(context.key)
    const version = await h.nodes.run(['version', '--nodes', h.workers[0]!, '--talosconfig', talosconfigFile()])
    expect(version.exitCode, version.stderr).toBe(0)
    expect(version.stdout).toMatch(/Tag:\s+v1\.14\./)
    // Another context of the same name, different: refused, the file unchanged.
    const clash = {...merged, contexts: {...merged.contexts, [merged.context]: {...context, endpoints: ['192.0.2.99']}}}
    writeFileSync(talosconfigFile(), stringify(clash), {mode: 0o600})
    const refused = await ichor(['talosconfig', ...access()])
    expect(refused.code, show(refused)).toBe(2)
    expect(refused.stderr).toMatch(/already has a different context/)
  }, 120_000)

  it('a context name that is not one is refused before any connection (exit 2)', async () => {
    const run = await ichor(['kubeconfig', '--context-name', 'has space', '--kubeconfig', join(home, 'missing')])
    expect(run.code, show(run)).toBe(2)
    expect(run.stderr).toMatch(/--context-name: "has space" is not a context name/)
  })

  it('a kubeconfig whose client certificate ends in 10 days: cni status, stack status and doctor warn, naming the renewal; the cluster stays healthy (exit 0)', async () => {
    // The harness's apiserver takes the token; the short-lived certificate rides beside it, as in a Talos kubeconfig.
    const cert = shortCertificate(10, '/O=system:masters/CN=admin')
    const doc = parse(readFileSync(join(h.stateDir, 'kubeconfig'), 'utf8')) as Kubeconfig
    doc.users = doc.users.map((u) => ({...u, user: {...u.user, 'client-certificate-data': cert.crt, 'client-key-data': cert.key}}))
    const short = join(mkdtempSync(join(tmpdir(), 'ichor-shortcert-')), 'kubeconfig')
    writeFileSync(short, stringify(doc), {mode: 0o600})
    const expiring = /the kubeconfig's client certificate \(context "[^"]+"\) expires on \d{4}-\d{2}-\d{2}, in (9|10) day\(s\)/
    const cni = await ichor(['cni', 'status', '--kubeconfig', short, '--state-dir', h.stateDir, '-o', 'json'])
    expect(cni.code, show(cni)).toBe(0)
    const cniReport = JSON.parse(cni.stdout) as {healthy: boolean; problems: {severity: string; what: string; fix: string}[]}
    expect(cniReport.problems).toContainEqual({
      severity: 'warning',
      what: expect.stringMatching(expiring),
      fix: expect.stringMatching(/^ichor credentials renew /),
    })
    const stack = await ichor(['stack', 'status', '--kubeconfig', short, '--registry-endpoint', h.registry.endpoint])
    expect(stack.code, show(stack)).toBe(0)
    expect(stack.stdout).toMatch(expiring)
    expect(stack.stdout).toMatch(/fix: ichor credentials renew /)
    const doctor = await ichor(['doctor', '--kubeconfig', short, '--state-dir', h.stateDir, '--json'])
    const checks = (jsonResult(doctor) as {checks: {id: string; status: string; detail: string}[]}).checks
    expect(checks).toContainEqual(expect.objectContaining({id: 'kubeconfig-expiry', status: 'warn', detail: expect.stringMatching(expiring)}))
    // Control: the harness's own kubeconfig (a token, no certificate) gives no such warning.
    const plain = await ichor(['stack', 'status', '--kubeconfig', join(h.stateDir, 'kubeconfig'), '--registry-endpoint', h.registry.endpoint])
    expect(plain.code, show(plain)).toBe(0)
    expect(plain.stdout).not.toMatch(/client certificate/)
  }, 120_000)

  it('credentials renew: the state folder talosconfig, the kubeconfig in use and the sealed copy, each 10 days from its end, renewed with FILE.bak beside; SIGKILL before each step, the rerun converges; then nothing is due (a no-op) until --force', async () => {
    const secrets = parse(readFileSync(join(h.stateDir, 'secrets.yaml'), 'utf8')) as {certs: {os: {crt: string; key: string}}}
    const talosShort = shortCertificate(10, '/O=os:admin/CN=admin', secrets.certs.os)
    const withTalosCert = (text: string, cert: {crt: string; key: string}) => {
      const doc = parse(text) as Talosconfig & {contexts: Record<string, {crt: string}>}
      const ctx = doc.contexts[doc.context]!
      return stringify({...doc, contexts: {...doc.contexts, [doc.context]: {...ctx, crt: cert.crt, key: cert.key}}})
    }
    const talosconfigPath = join(h.stateDir, 'talosconfig')
    writeFileSync(talosconfigPath, withTalosCert(readFileSync(talosconfigPath, 'utf8'), talosShort), {mode: 0o600})
    // The simulated node checks the client certificate against the machine CA, as apid does: the short one is accepted.
    const before = await h.nodes.run(['version', '--nodes', h.controlPlanes[0]!, '--talosconfig', talosconfigPath])
    expect(before.exitCode, before.stderr).toBe(0)
    // The sealed copy in the cluster with the same short certificate, sealed again with the cluster's key.
    const kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
    const key = (await givenStateKey(h.stateKeyFile))!
    const opened = (await readTalosBundle(
      kube,
      async () => key,
      () => undefined,
    ))!.bundle
    const stored = (await readTalosBundleSecret(kube))!
    const resealed = await sealedBundleSecret({...opened, talosconfig: Buffer.from(withTalosCert(opened.talosconfig.toString('utf8'), talosShort))}, key)
    await kube.request('PUT', `/api/v1/namespaces/ichor-system/secrets/ichor-talos`, {
      body: {...resealed, metadata: {...resealed.metadata, resourceVersion: stored.metadata.resourceVersion}},
    })
    // The kubeconfig in use: a short certificate beside the harness's token.
    const kubeShort = shortCertificate(10, '/O=system:masters/CN=admin')
    const doc = parse(readFileSync(join(h.stateDir, 'kubeconfig'), 'utf8')) as Kubeconfig
    doc.users = doc.users.map((u) => ({...u, user: {...u.user, 'client-certificate-data': kubeShort.crt, 'client-key-data': kubeShort.key}}))
    const kubeconfigPath = join(mkdtempSync(join(tmpdir(), 'ichor-renew-')), 'kubeconfig')
    writeFileSync(kubeconfigPath, stringify(doc), {mode: 0o600})
    const renew = (args: string[], opts?: Parameters<typeof runIchor>[2]) =>
      runIchor(['credentials', 'renew', '--kubeconfig', kubeconfigPath, '--state-dir', h.stateDir, '--yes', '--json', ...args], env, opts)

    const dry = await renew(['--dry-run'])
    expect(dry.code, show(dry)).toBe(0)
    expect(
      jsonResult<{tasks: {id: string; status: string}[]}>(dry)
        .tasks.filter((t) => t.status === 'would-run' && t.id !== 'lease')
        .map((t) => t.id),
    ).toEqual(['renew-talosconfig', 'renew-kubeconfig', 'renew-sealed-talosconfig'])
    expect(readFileSync(kubeconfigPath, 'utf8')).toContain(kubeShort.crt)
    for (const step of ['renew-talosconfig', 'renew-kubeconfig', 'renew-sealed-talosconfig']) {
      const killed = await renew([], killTreeWhen(stepStarts(step)))
      expect(killed.signal, `${step}: ${show(killed)}`).toBe('SIGKILL')
    }
    const run = await renew([])
    expect(run.code, show(run)).toBe(0)
    const yearAway = (b64: string | undefined) =>
      new Date(new X509Certificate(Buffer.from(b64 ?? '', 'base64').toString('utf8')).validTo).getTime() - Date.now()
    const talosAfter = parse(readFileSync(talosconfigPath, 'utf8')) as Talosconfig & {contexts: Record<string, {crt: string}>}
    expect(yearAway(talosAfter.contexts[talosAfter.context]!.crt)).toBeGreaterThan(300 * 86_400_000)
    expect(statSync(talosconfigPath).mode & 0o777).toBe(0o600)
    expect(readFileSync(`${talosconfigPath}.bak`, 'utf8')).toContain(talosShort.crt)
    expect(statSync(`${talosconfigPath}.bak`).mode & 0o777).toBe(0o600)
    const after = await h.nodes.run(['version', '--nodes', h.controlPlanes[0]!, '--talosconfig', talosconfigPath])
    expect(after.exitCode, after.stderr).toBe(0)
    // The kubeconfig's user holds what the control plane handed out (the harness's token, no short certificate), the old one in .bak.
    const kubeAfter = parse(readFileSync(kubeconfigPath, 'utf8')) as Kubeconfig
    expect(kubeAfter.users[0]!.user['client-certificate-data']).toBeUndefined()
    expect(readFileSync(`${kubeconfigPath}.bak`, 'utf8')).toContain(kubeShort.crt)
    expect(((await (await connectKube({kubeconfig: kubeconfigPath})).request('GET', '/api/v1/nodes')) as {items: unknown[]}).items.length).toBe(2)
    const sealedAfter = (await readTalosBundle(
      kube,
      async () => key,
      () => undefined,
    ))!.bundle
    const sealedDoc = parse(sealedAfter.talosconfig.toString('utf8')) as Talosconfig & {contexts: Record<string, {crt: string}>}
    // A fresh certificate of its own (the runs the test killed each issued one), a year away; the secrets unchanged.
    expect(yearAway(sealedDoc.contexts[sealedDoc.context]!.crt)).toBeGreaterThan(300 * 86_400_000)
    expect(sealedAfter.secretsYaml.equals(opened.secretsYaml)).toBe(true)
    const cni = await ichor(['cni', 'status', '--kubeconfig', kubeconfigPath, '--state-dir', h.stateDir, '-o', 'json'])
    expect(cni.code, show(cni)).toBe(0)
    expect(JSON.stringify(JSON.parse(cni.stdout).problems)).not.toMatch(/client certificate/)
    // Nothing is due now: a rerun changes nothing; --force renews the talosconfig again.
    const again = await renew([])
    expect(again.code, show(again)).toBe(0)
    expect(jsonResult<{changed: boolean}>(again).changed).toBe(false)
    const forced = await renew(['--force'])
    expect(forced.code, show(forced)).toBe(0)
    expect(jsonResult<{files: {kind: string}[]}>(forced).files.map((f) => f.kind)).toEqual(['talosconfig'])
  }, 300_000)
})
