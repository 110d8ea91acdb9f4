// helm reads one kubeconfig file; an operator's KUBECONFIG may list several (kubectl merges
// them, first wins). The session hands helm the selected context alone, self-contained, in a
// private file that lives as long as the session. A plain HTTP server stands in for the API
// server (the session checks it answers).
import {createServer, type Server} from 'node:http'
import {existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync} from 'node:fs'
import type {AddressInfo} from 'node:net'
import {delimiter, dirname, join} from 'node:path'
import {tmpdir} from 'node:os'
import {parse} from 'yaml'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {openSession} from '../../src/lib/session/session.js'

let server: Server
let dir: string

beforeAll(async () => {
  server = createServer((req, res) => {
    res.setHeader('Content-Type', 'application/json')
    res.end(JSON.stringify({gitVersion: 'v1.36.0'}))
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  dir = mkdtempSync(join(tmpdir(), 'ichor-helm-target-'))
})
afterAll(async () => {
  await new Promise((r) => server.close(r))
  rmSync(dir, {recursive: true, force: true})
})

describe('the kubeconfig helm gets', () => {
  it('given KUBECONFIG with two files, then helm gets one private file holding the selected context alone, removed when the session closes', async () => {
    const {port} = server.address() as AddressInfo
    // The first file names the current context; its cluster and user are in the second, with a
    // CA given as a path relative to that file (kubectl resolves it against the file's folder).
    writeFileSync(join(dir, 'ca.crt'), 'not a real CA\n')
    const first = join(dir, 'first.yaml')
    const second = join(dir, 'second.yaml')
    writeFileSync(
      first,
      'apiVersion: v1\nkind: Config\ncurrent-context: lab\ncontexts: [{name: lab, context: {cluster: lab, user: admin, namespace: kube-system}}]\n',
    )
    writeFileSync(
      second,
      `apiVersion: v1
kind: Config
clusters:
- {name: lab, cluster: {server: "http://127.0.0.1:${port}", certificate-authority: ca.crt}}
- {name: other, cluster: {server: "https://192.0.2.1:6443"}}
users:
- {name: admin, user: {token: lab-token}}
- {name: someone, user: {token: other-token}}
contexts: [{name: other, context: {cluster: other, user: someone}}]
`,
    )
    const saved = process.env.KUBECONFIG
    process.env.KUBECONFIG = [first, second].join(delimiter)
    const session = openSession({command: 'test'})
    try {
      const target = await session.helmTarget()
      expect(target.kubeContext).toBe('lab')
      expect(target.kubeconfig).not.toBe(first)
      expect(statSync(target.kubeconfig).mode & 0o777).toBe(0o600)
      expect(statSync(dirname(target.kubeconfig)).mode & 0o777).toBe(0o700)
      const doc = parse(readFileSync(target.kubeconfig, 'utf8'))
      expect(doc['current-context']).toBe('lab')
      expect(doc.clusters).toEqual([
        {name: 'lab', cluster: expect.objectContaining({server: `http://127.0.0.1:${port}`, 'certificate-authority': join(dir, 'ca.crt')})},
      ])
      expect(doc.users).toEqual([{name: 'admin', user: expect.objectContaining({token: 'lab-token'})}])
      expect(JSON.stringify(doc)).not.toContain('other-token')
      expect(await session.helmTarget()).toEqual(target) // one file per session
      await session.close()
      expect(existsSync(dirname(target.kubeconfig))).toBe(false)
    } finally {
      await session.close()
      if (saved === undefined) delete process.env.KUBECONFIG
      else process.env.KUBECONFIG = saved
    }
  })

  it('given --kubeconfig FILE, then helm gets that file as it is', async () => {
    const {port} = server.address() as AddressInfo
    const file = join(dir, 'one.yaml')
    writeFileSync(
      file,
      `apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: c, cluster: {server: "http://127.0.0.1:${port}"}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n`,
    )
    const session = openSession({command: 'test', kubeconfig: file})
    try {
      expect(await session.helmTarget()).toEqual({kubeconfig: file, kubeContext: 'c'})
    } finally {
      await session.close()
    }
  })
})
