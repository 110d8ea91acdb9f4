// Issue 13 point 3: helm goes where ichor goes. helm reads HELM_KUBECONTEXT,
// HELM_KUBEAPISERVER, HELM_KUBETOKEN ... from the environment and lets them override the
// kubeconfig; ichor strips them, and passes its own --kubeconfig and --kube-context.
// Real helm (ICHOR_HELM); the "clusters" are closed loopback ports, so where helm went
// shows in its connection error.
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {createServer} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, afterEach, beforeAll, describe, expect, it} from 'vitest'
import {stringify} from 'yaml'
import {helmEnv} from '../../src/lib/helm/env.js'
import {HelmReleaseError, helmStatus} from '../../src/lib/helm/release.js'
import {talosctlEnv} from '../../src/lib/talos/talosctl.js'

let work: string
let kubeconfig: string
const ports: number[] = []
const saved = {...process.env}

/** A loopback port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const port = (server.address() as {port: number}).port
  await new Promise((r) => server.close(r))
  return port
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'ichor-helm-env-'))
  for (let i = 0; i < 3; i++) ports.push(await closedPort())
  const cluster = (name: string, port: number) => ({name, cluster: {server: `https://127.0.0.1:${port}`, 'insecure-skip-tls-verify': true}})
  kubeconfig = join(work, 'kubeconfig')
  writeFileSync(
    kubeconfig,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      'current-context': 'ichor',
      clusters: [cluster('ichor', ports[0]!), cluster('other', ports[1]!)],
      users: [{name: 'u', user: {token: 'ichor-token'}}],
      contexts: [
        {name: 'ichor', context: {cluster: 'ichor', user: 'u'}},
        {name: 'other', context: {cluster: 'other', user: 'u'}},
      ],
    }),
  )
})
afterAll(() => rmSync(work, {recursive: true, force: true}))
afterEach(() => {
  for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k]
  Object.assign(process.env, saved)
})

async function whereHelmWent(opts: {kubeContext?: string} = {}): Promise<string> {
  const error = await helmStatus({kubeconfig, kubeContext: opts.kubeContext, release: 'cilium', namespace: 'kube-system'}).catch((e: unknown) => e)
  expect(error).toBeInstanceOf(HelmReleaseError)
  return (error as HelmReleaseError).helmMessage
}

describe("helm gets ichor's target, not the operator's HELM_KUBE* variables", () => {
  it('ignores HELM_KUBECONTEXT naming a context that does not exist, and HELM_KUBEAPISERVER naming another server', async () => {
    process.env.HELM_KUBECONTEXT = 'no-such-context'
    process.env.HELM_KUBEAPISERVER = `https://127.0.0.1:${ports[2]}`
    process.env.HELM_KUBETOKEN = 'operator-token'
    process.env.HELM_NAMESPACE = 'elsewhere'
    const message = await whereHelmWent()
    expect(message).toContain(`127.0.0.1:${ports[0]}`)
    expect(message).not.toMatch(/no-such-context|does not exist/)
    expect(message).not.toContain(`127.0.0.1:${ports[2]}`)
  })

  it('goes to the context ichor names with kubeContext', async () => {
    process.env.HELM_KUBECONTEXT = 'ichor'
    expect(await whereHelmWent({kubeContext: 'other'})).toContain(`127.0.0.1:${ports[1]}`)
  })
})

describe('the environments handed to helm and talosctl', () => {
  it('drop the target variables and keep the rest', () => {
    const base = {
      PATH: '/bin',
      HOME: '/home/op',
      HELM_KUBECONTEXT: 'x',
      HELM_KUBEASUSER: 'x',
      HELM_KUBEASGROUPS: 'x',
      HELM_KUBECAFILE: 'x',
      HELM_KUBEINSECURE_SKIP_TLS_VERIFY: 'true',
      HELM_KUBETLS_SERVER_NAME: 'x',
      HELM_DRIVER: 'configmap',
      KUBECONFIG: '/x',
      HELM_CACHE_HOME: '/c',
      TALOSCONFIG: '/t',
      TALOS_CONTEXT: 'x',
      TALOS_NODES: 'x',
      TALOS_ENDPOINTS: 'x',
      TALOS_HOME: '/h',
    }
    expect(helmEnv(base)).toEqual({
      PATH: '/bin',
      HOME: '/home/op',
      HELM_CACHE_HOME: '/c',
      TALOSCONFIG: '/t',
      TALOS_CONTEXT: 'x',
      TALOS_NODES: 'x',
      TALOS_ENDPOINTS: 'x',
      TALOS_HOME: '/h',
    })
    expect(Object.keys(talosctlEnv(base))).not.toContain('TALOSCONFIG')
    expect(Object.keys(talosctlEnv(base)).filter((k) => k.startsWith('TALOS'))).toEqual([])
    expect(talosctlEnv(base).HELM_KUBECONTEXT).toBe('x')
  })
})
