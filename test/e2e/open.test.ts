// `ichor open` on a restored converged cluster (1+1): the API server's pods/portforward reaches
// kwok's kubelet port-forward (test/harness/kwok.ts kubeletPortForward), and a kwok PortForward
// object sends the argocd-server pod's ports to an HTTP server of this test's, so the bytes that
// come back through the local URL crossed ichor's listener, the WebSocket tunnel, the API server
// and the kubelet API. Ctrl-C ends it with exit 0. The Hubble UI is off in ichor's Cilium values:
// refused naming the value that enables it.
import {spawn, type ChildProcess} from 'node:child_process'
import {createServer, type Server} from 'node:http'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {parse as parseYaml} from 'yaml'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {listObjects} from '../../src/lib/kube/objects.js'
import type {OpenResult} from '../../src/lib/open/open.js'
import {runIchor, type HarnessCluster} from '../harness/cluster.js'
import {convergedCluster, CONVERGED_TIMEOUT_MS} from '../harness/converged.js'
import {loadKubeConfig} from '../harness/kube.js'
import {forwardPodPort} from '../harness/kwok.js'
import {PROJECT_ROOT} from '../support/upstream.js'

let kubeconfigPath: string
let harnessEnv: NodeJS.ProcessEnv
/** Every `ichor open` started, SIGKILLed after the file if a failed assertion left it serving. */
const running: Array<() => void> = []

describe('ichor open on the harness (1+1)', () => {
  let h: HarnessCluster
  let kube: Kube
  let upstream: Server
  let upstreamPort: number
  const body = `argocd-server behind the tunnel ${process.pid}`
  const kubeconfig = () => join(h.stateDir, 'kubeconfig')
  beforeAll(async () => {
    h = await convergedCluster('1+1')
    kubeconfigPath = kubeconfig()
    harnessEnv = h.env
    kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
    upstream = createServer((req, res) => res.end(`${body} ${req.method} ${req.url}`))
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
    upstreamPort = (upstream.address() as {port: number}).port
  }, CONVERGED_TIMEOUT_MS)
  afterAll(async () => {
    for (const stop of running) stop()
    upstream?.close()
    await h?.stop()
  })

  it('open argocd --port 0 -o json: one document with the URL and the login, bytes through the API server, Ctrl-C exits 0; -o yaml and --json the same document', async () => {
    const pods = await listObjects(kube, {apiVersion: 'v1', kind: 'Pod', namespace: 'argocd'}, {labelSelector: 'app.kubernetes.io/name=argocd-server'})
    expect(pods).toHaveLength(1)
    const pod = pods[0]!.metadata.name
    await forwardPodPort(loadKubeConfig(h.cp.kubeconfigPath), {namespace: 'argocd', name: pod}, {address: '127.0.0.1', port: upstreamPort})

    const open = startOpen(['argocd', '--port', '0', '-o', 'json'])
    const result = await open.document((text) => JSON.parse(text) as OpenResult)
    expect(result).toEqual({
      component: 'argocd',
      url: expect.stringMatching(/^https:\/\/127\.0\.0\.1:\d+$/),
      address: '127.0.0.1',
      port: expect.any(Number),
      namespace: 'argocd',
      service: 'argocd-server',
      pod,
      // The chart's Service port https (443) targets the server's 8080.
      podPort: 8080,
      login: {user: 'admin', passwordCommand: 'ichor stack password argocd'},
    })
    expect(result.port).not.toBe(0)
    expect(result.url).toBe(`https://127.0.0.1:${result.port}`)
    // The test server speaks plain HTTP: the URL's scheme is Argo CD's, the bytes are the test's.
    for (const path of ['/first', '/second']) {
      const res = await fetch(`http://127.0.0.1:${result.port}${path}`)
      expect(await res.text()).toBe(`${body} GET ${path}`)
    }
    open.child.kill('SIGINT')
    expect(await open.exited, open.out.stderr).toEqual({code: 0, signal: null})
    // Nothing but the one document on stdout (-o json is the result as is, as ichor status's), and no password anywhere.
    expect(JSON.parse(open.out.stdout)).toEqual(result)
    expect(`${open.out.stdout}${open.out.stderr}`).not.toMatch(/password"?\s*[:=]\s*"?[A-Za-z0-9]{8}/)

    // -o yaml is the same document; --json the same with its schemaVersion.
    const yaml = startOpen(['argocd', '--port', '0', '-o', 'yaml'])
    const fromYaml = await yaml.document((text, stderr) => (stderr.includes('Serving until Ctrl-C') ? (parseYaml(text) as OpenResult) : undefined))
    expect(fromYaml).toEqual({...result, port: fromYaml.port, url: `https://127.0.0.1:${fromYaml.port}`})
    yaml.child.kill('SIGINT')
    expect((await yaml.exited).code, yaml.out.stderr).toBe(0)
    const json = startOpen(['argocd', '--port', '0', '--json'])
    const fromJson = await json.document((text) => JSON.parse(text) as OpenResult & {schemaVersion: number})
    expect(fromJson).toEqual({schemaVersion: 1, ...result, port: fromJson.port, url: `https://127.0.0.1:${fromJson.port}`})
    json.child.kill('SIGINT')
    expect((await json.exited).code, json.out.stderr).toBe(0)
  })

  it('open kokumi: user admin and the command that prints its password, bytes through to the pod behind kokumi-server; the human view; a port in use is exit 1', async () => {
    // Every pod in kokumi forwards to the test server: which one ichor picked is the document's `pod`.
    const kc = loadKubeConfig(h.cp.kubeconfigPath)
    for (const p of await listObjects(kube, {apiVersion: 'v1', kind: 'Pod', namespace: 'kokumi'}))
      await forwardPodPort(kc, {namespace: 'kokumi', name: p.metadata.name}, {address: '127.0.0.1', port: upstreamPort})
    const service = (await kube.request('GET', '/api/v1/namespaces/kokumi/services/kokumi-server')) as {spec: {selector: Record<string, string>}}
    const selected = await listObjects(
      kube,
      {apiVersion: 'v1', kind: 'Pod', namespace: 'kokumi'},
      {
        labelSelector: Object.entries(service.spec.selector)
          .map(([k, v]) => `${k}=${v}`)
          .join(','),
      },
    )
    const open = startOpen(['kokumi', '--port', '0', '-o', 'json'])
    const result = await open.document((text) => JSON.parse(text) as OpenResult)
    expect(result).toMatchObject({
      component: 'kokumi',
      url: `http://127.0.0.1:${result.port}`,
      namespace: 'kokumi',
      service: 'kokumi-server',
      login: {user: 'admin', passwordCommand: 'ichor stack password kokumi'},
    })
    expect(selected.map((p) => p.metadata.name)).toContain(result.pod)
    expect(await (await fetch(`${result.url}/ui`)).text()).toBe(`${body} GET /ui`)
    open.child.kill('SIGINT')
    expect((await open.exited).code, open.out.stderr).toBe(0)

    // Without -o: the URL and the login on stdout, what it does on stderr.
    const human = startOpen(['kokumi', '--port', '0'])
    const text = await human.document((stdout, stderr) => (stderr.includes('Serving until Ctrl-C') ? stdout : undefined))
    const port = /http:\/\/127\.0\.0\.1:(\d+)/.exec(text)?.[1]
    expect(text).toBe(
      [
        `Kokumi: http://127.0.0.1:${port}`,
        '  user: admin',
        '  password: run ichor stack password kokumi',
        `  forwarding 127.0.0.1:${port} -> pod kokumi/${result.pod} port ${result.podPort} (Service kokumi-server)`,
        '',
      ].join('\n'),
    )
    // The port it holds is refused to a second one, naming it and the way out.
    const taken = await runIchor(['open', 'kokumi', '--port', port!, '--kubeconfig', kubeconfig()], h.env)
    expect(taken.code, taken.stderr).toBe(1)
    expect(taken.stderr).toContain(`127.0.0.1:${port} is already in use`)
    expect(taken.stderr).toContain('--port 0')
    human.child.kill('SIGINT')
    expect((await human.exited).code, human.out.stderr).toBe(0)
  })

  it('open hubble without the Hubble UI: exit 1 naming hubble.ui.enabled and the command that sets it', async () => {
    const run = await runIchor(['open', 'hubble', '--kubeconfig', kubeconfig()], h.env)
    expect(run.code, run.stderr).toBe(1)
    expect(run.stderr).toContain('Service kube-system/hubble-ui does not exist')
    expect(run.stderr).toContain('hubble.ui.enabled=true')
    expect(run.stderr).toContain('ichor cni values set')
    expect(run.stdout).toBe('')
  })

  it('bad input is exit 2 before any connection: an unknown UI names the accepted ones, a port out of range names the range', async () => {
    const unknown = await runIchor(['open', 'grafana', '--kubeconfig', kubeconfig()], h.env)
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toMatch(/argocd, kokumi, hubble/)
    const port = await runIchor(['open', 'argocd', '--port', '99999', '--kubeconfig', kubeconfig()], h.env)
    expect(port.code).toBe(2)
    expect(port.stderr).toMatch(/--port: "99999" is not a port \(accepted: 1-65535, or 0/)
    const address = await runIchor(['open', 'argocd', '--address', 'example.invalid', '--kubeconfig', kubeconfig()], h.env)
    expect(address.code).toBe(2)
    expect(address.stderr).toContain('--address: "example.invalid" is not an IP address')
  })
})

/** `ichor open ARGS` running in the background, with what it printed so far. */
function startOpen(args: string[]) {
  const child = spawn(join(PROJECT_ROOT, 'bin', 'run.js'), ['open', ...args, '--kubeconfig', kubeconfigPath], {
    env: harnessEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const out = {stdout: '', stderr: ''}
  child.stdout!.on('data', (c: Buffer) => (out.stdout += c))
  child.stderr!.on('data', (c: Buffer) => (out.stderr += c))
  const exited = new Promise<{code: number | null; signal: NodeJS.Signals | null}>((resolve) => child.on('close', (code, signal) => resolve({code, signal})))
  running.push(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  return {
    child,
    out,
    exited,
    /** The document printed before serving, once `parse` takes it; fails with stderr if the process ends first. */
    document: <T>(parse: (stdout: string, stderr: string) => T | undefined) => firstDocument(child, out, exited, parse),
  }
}

async function firstDocument<T>(
  child: ChildProcess,
  out: {stdout: string; stderr: string},
  exited: Promise<unknown>,
  parse: (stdout: string, stderr: string) => T | undefined,
): Promise<T> {
  const deadline = Date.now() + 60_000
  let ended = false
  void exited.then(() => (ended = true))
  for (;;) {
    try {
      const doc = parse(out.stdout, out.stderr)
      if (doc !== undefined) return doc
      throw new Error('not yet')
    } catch {
      if (ended || Date.now() > deadline) throw new Error(`ichor open printed no document (exit ${child.exitCode}):\n${out.stderr}`)
      await new Promise((r) => setTimeout(r, 50))
    }
  }
}
