// The Kube client keeps its connections open between requests: a day-2 command makes dozens
// of API calls, and a new connection (with TLS, a handshake and a secure context) for each
// one was a large part of its run time. A plain HTTP server stands in for the API server
// and counts the connections it accepts.
import {createServer, type Server} from 'node:http'
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import type {AddressInfo} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {connectKube} from '../../src/lib/kube/client.js'

let server: Server
let connections = 0
let dir: string

beforeAll(async () => {
  server = createServer((req, res) => {
    res.setHeader('Content-Type', 'application/json')
    res.end(req.url === '/version' ? JSON.stringify({gitVersion: 'v1.36.0'}) : JSON.stringify({kind: 'ConfigMap', apiVersion: 'v1', metadata: {name: 'x'}}))
  })
  server.on('connection', () => connections++)
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  dir = mkdtempSync(join(tmpdir(), 'ichor-kube-connections-'))
})
afterAll(async () => {
  await new Promise((r) => server.close(r))
  rmSync(dir, {recursive: true, force: true})
})

describe('Kube client connections', () => {
  it('Given a client, When it makes ten requests one after another, Then they share one connection', async () => {
    const {port} = server.address() as AddressInfo
    const kubeconfig = join(dir, 'kubeconfig')
    writeFileSync(
      kubeconfig,
      `apiVersion: v1
kind: Config
current-context: c
clusters: [{name: c, cluster: {server: "http://127.0.0.1:${port}"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
`,
      {mode: 0o600},
    )
    const kube = await connectKube({kubeconfig})
    for (let i = 0; i < 10; i++) await kube.request('GET', '/api/v1/namespaces/default/configmaps/x')
    expect(connections).toBe(1)
  })
})
