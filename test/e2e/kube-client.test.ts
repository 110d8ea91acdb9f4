// Connecting like kubectl, and the registry endpoint, against the real kube-apiserver.
// The port-forward itself cannot be exercised here: the harness runs no kubelet, so no
// pod ever runs and the API server has nowhere to forward to. Tested: the
// --registry-endpoint override, the "no running registry pod" error, and that the
// local listener opens and closes.
import {existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {connect} from 'node:net'
import {tmpdir} from 'node:os'
import {delimiter, dirname, join} from 'node:path'
import {afterAll, afterEach, beforeAll, describe, expect, it} from 'vitest'
import {parse, stringify} from 'yaml'
import {freePort, startControlPlane, type ControlPlane} from '../harness/apiserver.js'
import {connectKube, type Kube, KubeUnreachableError} from '../../src/lib/kube/client.js'
import {serverSideApply} from '../../src/lib/kube/apply.js'
import {KOKUMI_REGISTRY, openRegistryEndpoint} from '../../src/lib/kube/portforward.js'

let cp: ControlPlane
let kube: Kube
let dir: string
const savedEnv = {KUBECONFIG: process.env.KUBECONFIG, HOME: process.env.HOME}

beforeAll(async () => {
  cp = await startControlPlane()
  kube = await connectKube({kubeconfig: cp.kubeconfigPath})
  dir = mkdtempSync(join(tmpdir(), 'ichor-kube-client-'))
})
afterAll(async () => {
  await cp?.stop()
  rmSync(dir, {recursive: true, force: true})
})
afterEach(() => {
  for (const [k, v] of Object.entries(savedEnv)) {
    if (v === undefined) delete process.env[k]
    else process.env[k] = v
  }
})

/** The harness kubeconfig with `change` applied, written to a new file. */
function variant(name: string, change: (doc: Record<string, unknown>) => void): string {
  const doc = parse(cp.kubeconfig) as Record<string, unknown>
  change(doc)
  const file = join(dir, name)
  writeFileSync(file, stringify(doc))
  return file
}

describe('connectKube', () => {
  it('connects with --kubeconfig and reads the server version', async () => {
    expect(kube.server).toBe(cp.server)
    expect(kube.serverVersion).toMatch(/^v1\.\d+\.\d+/)
  })

  it('uses KUBECONFIG, skipping files that do not exist, like kubectl', async () => {
    process.env.KUBECONFIG = [join(dir, 'missing'), cp.kubeconfigPath].join(delimiter)
    const k = await connectKube()
    expect(k.server).toBe(cp.server)
    process.env.KUBECONFIG = join(dir, 'missing')
    await expect(connectKube()).rejects.toThrow(`none of the files in KUBECONFIG (${join(dir, 'missing')}) exists`)
  })

  it('falls back to ~/.kube/config, and says how to give one when there is none', async () => {
    delete process.env.KUBECONFIG
    const home = join(dir, 'home')
    mkdirSync(join(home, '.kube'), {recursive: true})
    process.env.HOME = home
    const error = await connectKube().catch((e: unknown) => e)
    expect((error as Error).message).toBe('no kubeconfig found')
    expect((error as {hint: string}).hint).toContain('--kubeconfig')
    writeFileSync(join(home, '.kube', 'config'), cp.kubeconfig)
    expect((await connectKube()).server).toBe(cp.server)
  })

  it('names a --kubeconfig file that does not exist', async () => {
    await expect(connectKube({kubeconfig: join(dir, 'nope.yaml')})).rejects.toThrow(`kubeconfig ${join(dir, 'nope.yaml')} (from --kubeconfig) does not exist`)
  })

  it('needs a current-context or --context, and names unknown contexts', async () => {
    const file = variant('no-current', (doc) => delete doc['current-context'])
    const error = await connectKube({kubeconfig: file}).catch((e: unknown) => e)
    expect((error as Error).message).toBe(`kubeconfig has no current-context (--kubeconfig ${file})`)
    expect((error as {hint: string}).hint).toContain('--context')

    const context = (parse(cp.kubeconfig) as {contexts: Array<{name: string}>}).contexts[0]!.name
    expect((await connectKube({kubeconfig: file, context})).context).toBe(context)

    const unknown = await connectKube({kubeconfig: cp.kubeconfigPath, context: 'prod'}).catch((e: unknown) => e)
    expect((unknown as Error).message).toContain('kubeconfig has no context "prod"')
    expect((unknown as {hint: string}).hint).toBe(`known contexts: ${context}`)
  })

  it('says which server it cannot reach', async () => {
    const port = await freePort()
    const file = variant('unreachable', (doc) => {
      for (const c of doc.clusters as Array<{cluster: {server: string}}>) c.cluster.server = `https://127.0.0.1:${port}`
    })
    const error = await connectKube({kubeconfig: file}).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(KubeUnreachableError)
    expect((error as Error).message).toMatch(
      new RegExp(`^cannot reach the Kubernetes API server https://127\\.0\\.0\\.1:${port} \\(context "[^"]+"\\): ECONNREFUSED`),
    )
  })

  it('authenticates with a tokenFile relative to the kubeconfig', async () => {
    writeFileSync(join(dir, 'admin-token'), `${cp.token}\n`)
    const file = variant('token-file', (doc) => {
      for (const u of doc.users as Array<{user: Record<string, unknown>}>) u.user = {tokenFile: 'admin-token'}
    })
    expect((await connectKube({kubeconfig: file})).serverVersion).toMatch(/^v1\./)
  })

  it('authenticates with an exec credential plugin, and runs it again after a 401 (client-go does too)', async () => {
    // The plugin's first answer is a token the API server refuses (no expiry, so it would be
    // cached for good); after the 401 it is asked again and answers the admin token.
    const plugin = join(dir, 'token-plugin.mjs')
    const runs = join(dir, 'token-plugin.runs')
    writeFileSync(
      plugin,
      `import {appendFileSync, existsSync} from 'node:fs'
const first = !existsSync(${JSON.stringify(runs)})
appendFileSync(${JSON.stringify(runs)}, 'x')
const token = first ? 'stale-token' : process.env.ADMIN_TOKEN
console.log(JSON.stringify({apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', status: {token}}))
`,
    )
    const file = variant('exec-plugin', (doc) => {
      for (const u of doc.users as Array<{user: Record<string, unknown>}>) {
        u.user = {
          exec: {
            apiVersion: 'client.authentication.k8s.io/v1',
            interactiveMode: 'Never',
            command: process.execPath,
            args: [plugin],
            env: [{name: 'ADMIN_TOKEN', value: cp.token}],
          },
        }
      }
    })
    const k = await connectKube({kubeconfig: file})
    expect(k.serverVersion).toMatch(/^v1\./)
    await k.request('GET', '/api/v1/namespaces/default')
    expect(readFileSync(runs, 'utf8')).toBe('xx')

    const failing = variant('exec-failing', (doc) => {
      for (const u of doc.users as Array<{user: Record<string, unknown>}>) {
        u.user = {
          exec: {
            apiVersion: 'client.authentication.k8s.io/v1beta1',
            command: process.execPath,
            args: ['-e', 'console.error("login required"); process.exit(1)'],
          },
        }
      }
    })
    await expect(connectKube({kubeconfig: failing})).rejects.toThrow(
      `cannot set up credentials of kubeconfig context "${k.context}": exec credential plugin "${process.execPath} -e console.error("login required"); process.exit(1)" of kubeconfig user`,
    )
  })

  it('reports refused credentials with the context and server', async () => {
    const file = variant('bad-token', (doc) => {
      for (const u of doc.users as Array<{user: Record<string, unknown>}>) u.user = {token: 'not-a-valid-token'}
    })
    await expect(connectKube({kubeconfig: file})).rejects.toThrow(/were refused or lack this permission.*\(HTTP 401/)
  })
})

describe('openRegistryEndpoint', () => {
  it('returns the --registry-endpoint override as is, opening nothing', async () => {
    const r = await openRegistryEndpoint(kube, {override: 'http://127.0.0.1:5001/'})
    expect(r.endpoint).toBe('http://127.0.0.1:5001')
    await r.close()
    expect((await openRegistryEndpoint(kube, {override: 'localhost:5000'})).endpoint).toBe('http://localhost:5000')
    await expect(openRegistryEndpoint(kube, {override: 'ftp://x'})).rejects.toThrow('--registry-endpoint ftp://x must be http:// or https://')
  })

  it('fails clearly when no registry pod runs, naming what it found', async () => {
    const none = await openRegistryEndpoint(kube).catch((e: unknown) => e)
    expect((none as Error).message).toBe('no running Kokumi registry pod (label app=registry) in namespace kokumi')
    expect((none as {hint: string}).hint).toContain('--registry-endpoint')

    // A registry pod that was never scheduled (no scheduler or kubelet in the harness).
    await serverSideApply(kube, [
      {apiVersion: 'v1', kind: 'Namespace', metadata: {name: KOKUMI_REGISTRY.namespace}},
      {apiVersion: 'v1', kind: 'ServiceAccount', metadata: {name: 'default', namespace: KOKUMI_REGISTRY.namespace}},
      {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {name: 'kokumi-registry-abc', namespace: KOKUMI_REGISTRY.namespace, labels: {app: 'registry'}},
        spec: {containers: [{name: 'registry', image: 'registry:3', ports: [{containerPort: 5000}]}]},
      },
    ])
    const pending = await openRegistryEndpoint(kube).catch((e: unknown) => e)
    expect((pending as Error).message).toBe('no running Kokumi registry pod (label app=registry) in namespace kokumi; found kokumi-registry-abc (Pending)')
  })

  it('with a Running pod, opens a Unix socket only this user can reach and removes it on close (forwarding itself needs a kubelet)', async () => {
    await kube.request('PATCH', `/api/v1/namespaces/${KOKUMI_REGISTRY.namespace}/pods/kokumi-registry-abc/status`, {
      body: {status: {phase: 'Running'}},
      contentType: 'application/merge-patch+json',
    })
    const tunnel = await openRegistryEndpoint(kube)
    // No loopback port, which every local user could use: a socket in a 0700 directory.
    expect(tunnel.endpoint).not.toMatch(/127\.0\.0\.1|localhost/)
    expect(statSync(dirname(tunnel.socketPath!)).mode & 0o777).toBe(0o700)
    // The API server cannot forward to a pod without a node: the connection is closed, not hung.
    await new Promise<void>((resolve, reject) => {
      const socket = connect(tunnel.socketPath!)
      socket.on('error', () => resolve())
      socket.on('close', () => resolve())
      socket.setTimeout(10_000, () => reject(new Error('connection through the tunnel neither answered nor closed')))
      socket.write('GET /v2/ HTTP/1.1\r\nHost: x\r\n\r\n')
    })
    await tunnel.close()
    expect(existsSync(dirname(tunnel.socketPath!))).toBe(false)
  })
})

// Issue 10: writes other than server-side apply (the Lease, status and inventory updates, JSON
// and merge patches) name a field the server does not know instead of dropping it.
describe('strict field validation on every write', () => {
  it('a PUT, a POST and a merge patch with an unknown field are refused naming it; a caller may still choose its own level', async () => {
    const path = '/api/v1/namespaces/default/configmaps'
    await kube.request('POST', path, {body: {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'strict'}, data: {a: '1'}}})
    const live = await kube.request<Record<string, unknown>>('GET', `${path}/strict`)
    const unknown = /unknown field "dataa"/
    await expect(kube.request('PUT', `${path}/strict`, {body: {...live, dataa: {b: '2'}}})).rejects.toThrow(unknown)
    await expect(kube.request('POST', path, {body: {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'strict2'}, dataa: {}}})).rejects.toThrow(unknown)
    await expect(kube.request('PATCH', `${path}/strict`, {body: {dataa: {b: '2'}}, contentType: 'application/merge-patch+json'})).rejects.toThrow(unknown)
    expect((await kube.request<{data: unknown}>('GET', `${path}/strict`)).data).toEqual({a: '1'})
    // An explicit level wins (nothing in ichor asks for less than Strict; this shows the default is only a default).
    await kube.request('PATCH', `${path}/strict`, {body: {dataa: {b: '2'}}, contentType: 'application/merge-patch+json', query: {fieldValidation: 'Ignore'}})
  })
})
