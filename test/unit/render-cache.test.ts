import {chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterEach, beforeEach, describe, expect, it} from 'vitest'
import {parseAllDocuments} from 'yaml'
import {findHelm} from '../../src/lib/helm/binary.js'
import {helmCacheIdentity, holdsSecretData, renderCache} from '../../src/lib/helm/render-cache.js'
import {helmTemplate} from '../../src/lib/helm/template.js'
import {UPSTREAM} from '../support/upstream.js'

describe('helm template render cache', () => {
  const saved = {cache: process.env.ICHOR_RENDER_CACHE, xdg: process.env.XDG_CACHE_HOME}
  let dir: string
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'ichor-cache-'))
    process.env.XDG_CACHE_HOME = dir
    delete process.env.ICHOR_RENDER_CACHE
  })
  afterEach(() => {
    process.env.ICHOR_RENDER_CACHE = saved.cache
    process.env.XDG_CACHE_HOME = saved.xdg
  })

  // hubble.tls.auto.method=cronJob (ichor's default): the chart's own default, helm,
  // generates a CA in the render, and such a render is never cached (below).
  const render = (values: Record<string, unknown>, releaseName = 'cilium') =>
    helmTemplate({chartPath: UPSTREAM.ciliumChart, releaseName, namespace: 'kube-system', values: {hubble: {tls: {auto: {method: 'cronJob'}}}, ...values}})
  const renders = () => join(dir, 'ichor', 'renders')
  const modeOf = (path: string) => statSync(path).mode & 0o777
  const secretData = (text: string, name: string) =>
    parseAllDocuments(text)
      .map((d) => d.toJS())
      .find((o) => o?.kind === 'Secret' && o.metadata?.name === name)?.data as Record<string, string>

  it('stores a render and serves the same inputs from it; other values, release or chart args miss', async () => {
    const first = await render({operator: {replicas: 1}})
    const files = readdirSync(join(dir, 'ichor', 'renders'))
    expect(files).toHaveLength(1)
    // Mark the cached entry: a hit returns the marked text, proving helm did not run again.
    writeFileSync(join(dir, 'ichor', 'renders', files[0]!), `# from cache\n${first}`)
    expect(await render({operator: {replicas: 1}})).toMatch(/^# from cache\n/)
    expect(await render({operator: {replicas: 2}})).not.toMatch(/^# from cache/)
    expect(await render({operator: {replicas: 1}}, 'other')).not.toMatch(/^# from cache/)
    expect(readdirSync(join(dir, 'ichor', 'renders'))).toHaveLength(3)
  })

  it('never caches a failed render, and can be turned off', async () => {
    await expect(render({cluster: {id: 5}})).rejects.toThrow(/cluster name is invalid/)
    process.env.ICHOR_RENDER_CACHE = 'off'
    await render({})
    expect(() => readdirSync(join(dir, 'ichor', 'renders'))).toThrow()
  })

  it('Given two clusters rendered with hubble.tls.auto.method=helm, Then each gets its own CA and no private key is under the cache folder (issue 12 point 20)', async () => {
    const values = {hubble: {tls: {auto: {method: 'helm'}}}}
    const first = await helmTemplate({chartPath: UPSTREAM.ciliumChart, releaseName: 'cilium', namespace: 'kube-system', values})
    const second = await helmTemplate({chartPath: UPSTREAM.ciliumChart, releaseName: 'cilium', namespace: 'kube-system', values})
    const [ca1, ca2] = [secretData(first, 'cilium-ca'), secretData(second, 'cilium-ca')]
    expect(ca1['ca.key']).toBeTruthy()
    expect(ca1['ca.crt']).not.toBe(ca2['ca.crt'])
    expect(ca1['ca.key']).not.toBe(ca2['ca.key'])
    expect(secretData(first, 'hubble-server-certs')['tls.key']).not.toBe(secretData(second, 'hubble-server-certs')['tls.key'])
    await render({}) // a render without key material is still cached beside them
    const files = readdirSync(renders())
    expect(files).toHaveLength(1)
    for (const f of files) {
      const text = readFileSync(join(renders(), f), 'utf8')
      expect(text).not.toMatch(/PRIVATE KEY|LS0tLS1CRUdJTi/) // LS0tLS1CRUdJTi: base64 of "-----BEGIN"
      for (const key of [ca1['ca.key'], ca2['ca.key']]) expect(text.includes(key!)).toBe(false)
      expect(modeOf(join(renders(), f))).toBe(0o600)
    }
    expect(modeOf(renders())).toBe(0o700)
    expect(modeOf(join(dir, 'ichor'))).toBe(0o700)
  })

  it("keeps caching a render whose Secrets are empty shells (Argo CD's argocd-secret)", async () => {
    const argocd = () => helmTemplate({chartPath: UPSTREAM.argocdChart, releaseName: 'argocd', namespace: 'argocd', values: {}})
    const text = await argocd()
    expect(text).toMatch(/kind: Secret/)
    expect(readdirSync(renders())).toHaveLength(1)
    expect(await argocd()).toBe(text)
  })

  it('Given a cache an older ichor left 0755 with a 0644 entry holding a generated CA, Then the entry is not served but removed, and the folder closed', async () => {
    const values = {hubble: {tls: {auto: {method: 'helm'}}}}
    const old = await helmTemplate({chartPath: UPSTREAM.ciliumChart, releaseName: 'cilium', namespace: 'kube-system', values})
    const args = ['template', 'cilium', UPSTREAM.ciliumChart, '--namespace', 'kube-system', '--values', '-']
    const entry = renderCache(helmCacheIdentity((await findHelm()).path), UPSTREAM.ciliumChart, args, JSON.stringify(values))!
    mkdirSync(renders(), {recursive: true, mode: 0o755})
    chmodSync(renders(), 0o755)
    writeFileSync(entry.file, old, {mode: 0o644})
    writeFileSync(join(renders(), 'other.yaml'), 'kind: ConfigMap\n', {mode: 0o644})
    const fresh = await helmTemplate({chartPath: UPSTREAM.ciliumChart, releaseName: 'cilium', namespace: 'kube-system', values})
    expect(secretData(fresh, 'cilium-ca')['ca.crt']).not.toBe(secretData(old, 'cilium-ca')['ca.crt'])
    expect(readdirSync(renders())).toEqual(['other.yaml'])
    expect(modeOf(renders())).toBe(0o700)
    expect(modeOf(join(renders(), 'other.yaml'))).toBe(0o600)
  })
})

describe('holdsSecretData', () => {
  it('finds Secret data or stringData at any depth and PEM private keys anywhere; empty Secrets and other kinds pass', () => {
    expect(holdsSecretData('kind: Secret\nmetadata: {name: a}\ndata:\n  k: dg==\n')).toBe(true)
    expect(holdsSecretData('---\nkind: ConfigMap\n---\n"kind": "Secret"\nstringData: {p: x}\n')).toBe(true)
    expect(holdsSecretData('kind: List\nitems:\n- kind: Secret\n  data: {k: dg==}\n')).toBe(true)
    expect(holdsSecretData('kind: KubeInlineManifestConfig\nmanifest: |\n  kind: Secret\n  data: {k: dg==}\n')).toBe(true)
    expect(holdsSecretData('kind: ConfigMap\ndata:\n  key: "-----BEGIN RSA PRIVATE KEY-----"\n')).toBe(true)
    expect(holdsSecretData('kind: Secret\ndata: {k: [\n')).toBe(true) // unparsable counts
    expect(holdsSecretData('kind: Secret\nmetadata: {name: argocd-secret}\ntype: Opaque\n---\nkind: Secret\nstringData:\n')).toBe(false)
    expect(holdsSecretData('kind: ConfigMap\ndata: {secret: x}\n')).toBe(false)
  })
})
