// --request-timeout reaches Kokumi's registry too (issue 23 point 3): against the real
// kube-apiserver holding an IchorInstallation that records a published bundle, `stack status`
// with --registry-endpoint at a registry that accepts and answers one byte a second ends after
// the timeout (not after 4 tries of 60 s each), exit 1, naming the registry and the time waited.
// The registry here is a raw TCP server in the test: the trickle is the point, not OCI.
import {spawn} from 'node:child_process'
import {createServer, type Server, type Socket} from 'node:net'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {startControlPlane, type ControlPlane} from '../harness/apiserver.js'
import {connectKube} from '../../src/lib/kube/client.js'
import {writeInstallationSpec, writeInstallationStatus} from '../../src/lib/state/installation.js'
import {BIN} from '../support/run-cli.js'

const TIMEOUT_S = 4
/** From the first request going out to the exit: 3× the timeout (node's start-up before it is not counted). */
const BOUND_MS = 3 * TIMEOUT_S * 1000

let cp: ControlPlane
let registry: Server
let registryPort = 0
/** The request lines the registry read, for the message of a failure. */
const requestLines: string[] = []
const sockets = new Set<Socket>()

beforeAll(async () => {
  cp = await startControlPlane({controllers: false})
  const kube = await connectKube({kubeconfig: cp.kubeconfigPath})
  await writeInstallationSpec(kube, {
    talos: {
      clusterName: 'x',
      endpoint: 'https://192.0.2.10:6443',
      talosVersion: 'v1.14.1',
      kubernetesVersion: '1.36.3',
      controlPlanes: ['192.0.2.10'],
      workers: [],
    },
    cni: {kubeProxy: 'replaced', tunnel: 'vxlan', cilium: {values: {}}},
    stack: {promotion: 'Automatic', argocd: {values: {}}, kokumi: {values: {}}},
  } as never)
  const published = {publishedTag: 'r1', digest: `sha256:${'1'.repeat(64)}`, orderReady: true, applicationSync: 'Synced', applicationHealth: 'Healthy'}
  await writeInstallationStatus(kube, {cni: {}, stack: {argocd: published, kokumi: published}})
  // Accepts, then sends its status line one byte a second: headers never complete in time.
  registry = createServer((socket) => {
    sockets.add(socket)
    socket.on('error', () => undefined)
    socket.on('data', (d) => requestLines.push(String(d).split('\r\n')[0]!))
    const answer = Buffer.from('HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n')
    let i = 0
    const timer = setInterval(() => (i < answer.length ? socket.write(answer.subarray(i, ++i)) : clearInterval(timer)), 1000)
    socket.on('close', () => {
      clearInterval(timer)
      sockets.delete(socket)
    })
  })
  await new Promise<void>((resolve) => registry.listen(0, '127.0.0.1', resolve))
  registryPort = (registry.address() as {port: number}).port
})

afterAll(async () => {
  for (const s of sockets) s.destroy()
  await new Promise((resolve) => registry?.close(resolve))
  await cp?.stop()
})

/** Runs the CLI with -v, timing from the "connecting to" line (the first request) to its exit. */
function fromFirstRequest(args: string[]): Promise<{code: number | null; stdout: string; stderr: string; ms: number}> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args, '-v'], {env: {...process.env, ICHOR_MIRROR: ''}, stdio: ['ignore', 'pipe', 'pipe']})
    let stdout = ''
    let stderr = ''
    let connecting: number | undefined
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk
      if (connecting === undefined && stderr.includes('connecting to ')) connecting = Date.now()
    })
    child.on('error', reject)
    child.on('close', (code) => resolve({code, stdout, stderr, ms: connecting === undefined ? Number.NaN : Date.now() - connecting}))
  })
}

describe('a registry that answers one byte a second', () => {
  it(`ichor stack status --registry-endpoint … --request-timeout ${TIMEOUT_S}s: exit 1 after the timeout, once per request, naming the registry and the time waited`, async () => {
    const before = requestLines.length
    const r = await fromFirstRequest([
      'stack',
      'status',
      '--kubeconfig',
      cp.kubeconfigPath,
      '--registry-endpoint',
      `http://127.0.0.1:${registryPort}`,
      '--request-timeout',
      `${TIMEOUT_S}s`,
    ])
    const why = `${r.ms} ms from the first request\n${r.stdout}\n${r.stderr}`
    expect(r.code, why).toBe(1)
    expect(r.ms, why).toBeLessThan(BOUND_MS)
    const m = new RegExp(
      `Unable to connect to the registry 127\\.0\\.0\\.1:${registryPort}: request timed out after (\\d+\\.\\d)s \\(HEAD /v2/ichor/(argocd|kokumi)/manifests/r1\\)`,
    ).exec(r.stderr)
    expect(m, why).not.toBeNull()
    expect(Number(m![1])).toBeGreaterThanOrEqual(TIMEOUT_S)
    expect(Number(m![1]) * 1000).toBeLessThan(BOUND_MS)
    // One request per component, none retried.
    expect(requestLines.length - before, `${why}\n${requestLines.join('\n')}`).toBeLessThanOrEqual(2)
  })
})
