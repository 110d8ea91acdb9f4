// A kubeconfig that points at a server which answers, but not as Kubernetes (issue 38 point
// 11): a web service that answers every path with JSON of another shape. The commands that read
// the cluster say which server it is and that it is no Kubernetes API server (exit 1), never a
// raw TypeError, and `doctor` fails its API check instead of calling the server an answer.
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {createServer} from 'node:http'
import type {AddressInfo} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {runCliInProcess} from '../support/run-cli-inprocess.js'

const server = createServer((_req, res) => {
  res.writeHead(200, {'Content-Type': 'application/json'})
  res.end('{"hello":"world"}')
})
let dir: string
let kubeconfig: string
let url: string

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  dir = mkdtempSync(join(tmpdir(), 'ichor-not-kube-'))
  kubeconfig = join(dir, 'kubeconfig')
  writeFileSync(
    kubeconfig,
    `apiVersion: v1
kind: Config
clusters: [{name: hello, cluster: {server: "${url}"}}]
users: [{name: u, user: {token: not-a-secret}}]
contexts: [{name: hello, context: {cluster: hello, user: u}}]
current-context: hello
`,
    {mode: 0o600},
  )
})
afterAll(async () => {
  server.closeAllConnections()
  await new Promise((resolve) => server.close(resolve))
  rmSync(dir, {recursive: true, force: true})
})

const env = () => ({...process.env, ICHOR_MIRROR: '', ICHOR_STATE_DIR: join(dir, 'state')})

describe('a server that answers JSON of another shape', () => {
  it.each([
    ['cni', 'status'],
    ['stack', 'status'],
    ['stack', 'values', 'get', 'argocd'],
    ['stack', 'password', 'kokumi'],
    ['cni', 'values', 'get'],
  ])('Given ichor %s %s, Then exit 1 naming the server as no Kubernetes API server, and no TypeError', async (...args) => {
    const r = await runCliInProcess([...args, '--kubeconfig', kubeconfig], {env: env()})
    const out = `${r.stdout}${r.stderr}`
    expect(out).not.toMatch(/TypeError|Cannot read properties/)
    expect(out).toContain(url)
    expect(out).toMatch(/does not answer as a Kubernetes API server/)
    expect(r.code, out).toBe(1)
  })

  it('Given ichor doctor, Then its API check fails naming the server, not "answers"', async () => {
    const r = await runCliInProcess(['doctor', '--json', '--kubeconfig', kubeconfig], {env: env()})
    const checks = (JSON.parse(r.stdout) as {checks: {id: string; status: string; detail: string}[]}).checks
    const api = checks.find((c) => c.id === 'kube-api')
    expect(api?.status, r.stdout).toBe('fail')
    expect(api?.detail).toContain(url)
    expect(api?.detail).toMatch(/does not answer as a Kubernetes API server/)
    expect(r.code).toBe(1)
  })
})

describe('discovery of another shape', () => {
  it('Given a server whose /version is right but whose discovery is not an APIResourceList, Then resourceFor names the server and the path', async () => {
    const {connectKube, KubeNotApiServerError} = await import('../../src/lib/kube/client.js')
    const odd = createServer((req, res) => {
      res.writeHead(200, {'Content-Type': 'application/json'})
      res.end(req.url === '/version' ? '{"major":"1","minor":"33","gitVersion":"v1.33.0"}' : '{"resources":"none"}')
    })
    await new Promise<void>((resolve) => odd.listen(0, '127.0.0.1', resolve))
    const at = `http://127.0.0.1:${(odd.address() as AddressInfo).port}`
    const file = join(dir, 'odd-kubeconfig')
    writeFileSync(
      file,
      `apiVersion: v1\nkind: Config\nclusters: [{name: o, cluster: {server: "${at}"}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: o, context: {cluster: o, user: u}}]\ncurrent-context: o\n`,
    )
    try {
      const kube = await connectKube({kubeconfig: file})
      const error = await kube.resourceFor('v1', 'Secret').catch((e: unknown) => e)
      expect(error).toBeInstanceOf(KubeNotApiServerError)
      expect((error as Error).message).toBe(`${at} (context "o") does not answer as a Kubernetes API server: GET /api/v1 gave {"resources":"none"}`)
    } finally {
      odd.closeAllConnections()
      await new Promise((resolve) => odd.close(resolve))
    }
  })
})
