// `ichor kubeconfig` and `ichor talosconfig` on a restored converged 1+1 cluster, with a home
// folder of the test's own. SIMULATED: `talosctl kubeconfig` (the harness's credentials in the
// shape Talos's GenerateAdmin gives them) and the nodes that check the talosconfig. Real: the
// apiserver the merged kubeconfig reaches, read by ichor's kubectl-style loader and by
// @kubernetes/client-node's.
import {mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {CoreV1Api, KubeConfig} from '@kubernetes/client-node'
import {parse, stringify} from 'yaml'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {connectKube} from '../../src/lib/kube/client.js'
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
      fix: expect.stringMatching(/^ichor kubeconfig --force/),
    })
    const stack = await ichor(['stack', 'status', '--kubeconfig', short, '--registry-endpoint', h.registry.endpoint])
    expect(stack.code, show(stack)).toBe(0)
    expect(stack.stdout).toMatch(expiring)
    expect(stack.stdout).toMatch(/fix: ichor kubeconfig --force/)
    const doctor = await ichor(['doctor', '--kubeconfig', short, '--state-dir', h.stateDir, '--json'])
    const checks = (jsonResult(doctor) as {checks: {id: string; status: string; detail: string}[]}).checks
    expect(checks).toContainEqual(expect.objectContaining({id: 'kubeconfig-expiry', status: 'warn', detail: expect.stringMatching(expiring)}))
    // Control: the harness's own kubeconfig (a token, no certificate) gives no such warning.
    const plain = await ichor(['stack', 'status', '--kubeconfig', join(h.stateDir, 'kubeconfig'), '--registry-endpoint', h.registry.endpoint])
    expect(plain.code, show(plain)).toBe(0)
    expect(plain.stdout).not.toMatch(/client certificate/)
  }, 120_000)
})
