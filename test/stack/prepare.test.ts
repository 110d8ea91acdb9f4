// The stack as published: Argo CD values through the values engine, bundles and Orders, Secrets apart.
import {describe, expect, it} from 'vitest'
import {ValidationError} from '../../src/lib/errors/errors.js'
import {argocdEffectiveValues, generateStackSecrets, prepareStack, stackSecretsWith} from '../../src/lib/stack/prepare.js'
import {bcryptVerify} from '../../src/lib/stack/bcrypt.js'
import {UPSTREAM} from '../support/upstream.js'

function issuesOf(fn: () => unknown) {
  try {
    fn()
  } catch (error) {
    if (error instanceof ValidationError) return error.issues
    throw error
  }
  throw new Error('expected a ValidationError')
}

describe('Argo CD values through the values engine', () => {
  it('keeps ichor defaults under user values and the owned keys over both', () => {
    const v = argocdEffectiveValues(UPSTREAM.argocdChart, {server: {replicas: 2}, dex: {enabled: true}})
    expect(v).toMatchObject({server: {replicas: 2}, dex: {enabled: true}, notifications: {enabled: false}, global: {networkPolicy: {create: false}}})
  })
  it('refuses owned keys with their reason, unknown keys with a suggestion, and schema-free typos', () => {
    const issues = issuesOf(() =>
      argocdEffectiveValues(UPSTREAM.argocdChart, {
        configs: {repositories: {x: {url: 'https://example.com'}}},
        global: {networkPolicy: {create: true}},
        sevrer: {replicas: 1},
      }),
    )
    expect(issues).toEqual(
      expect.arrayContaining([
        {path: 'configs.repositories', message: expect.stringMatching(/owned by ichor.*Kokumi/)},
        {path: 'global.networkPolicy.create', message: expect.stringMatching(/owned by ichor/)},
        {path: 'sevrer', message: expect.stringMatching(/did you mean server\?/)},
      ]),
    )
  })
  it("accepts any key of a map the chart's templates walk whole (configs.cm and configs.params become argocd-cm and argocd-cmd-params-cm), still not a typo beside them", () => {
    expect(() =>
      argocdEffectiveValues(UPSTREAM.argocdChart, {
        configs: {cm: {'dex.config': 'connectors: []', url: 'https://argocd.example.com'}, params: {'server.insecure': true}},
      }),
    ).not.toThrow()
    expect(issuesOf(() => argocdEffectiveValues(UPSTREAM.argocdChart, {configs: {cmm: {url: 'https://argocd.example.com'}}}))).toEqual([
      {path: 'configs.cmm', message: expect.stringMatching(/did you mean configs.cm\b/)},
    ])
  })
  it('accepts a free-form map (podAnnotations) and a known nested key', () => {
    expect(() => argocdEffectiveValues(UPSTREAM.argocdChart, {global: {podAnnotations: {'example.com/x': 'y'}}, controller: {replicas: 1}})).not.toThrow()
  })
})

describe('prepareStack', () => {
  it('gives each component a bundle, a tag from its rendered bytes and an Order naming them; Secrets apart', async () => {
    const generated = generateStackSecrets()
    const stack = await prepareStack({argocdChartPath: UPSTREAM.argocdChart, kokumiManifestPath: UPSTREAM.kokumiManifest, generated})
    for (const c of Object.values(stack.components)) {
      expect(c.bundle.tag.startsWith(`${c.rendered.version}-`)).toBe(true)
      expect(c.order.spec).toEqual({source: {oci: `oci://${c.bundle.repository}`, version: c.bundle.tag}, promotion: {mode: 'Automatic'}})
      expect(c.rendered.manifest).not.toContain(generated.kokumiAdminPassword)
      expect(c.rendered.manifest).not.toContain(generated.argocdRedisPassword)
    }
    expect(stack.secretRefs.map((r) => `${r.namespace}/${r.name}`)).toEqual([
      'argocd/argocd-redis',
      'argocd/argocd-secret',
      'argocd/ichor-kokumi-registry',
      'ichor-system/ichor-argocd-redis',
      'ichor-system/ichor-kokumi-admin',
      'kokumi/kokumi-server-auth',
    ])
  })
  it("rebuilds the Secrets from the cluster's generated values, not the render's", async () => {
    const stack = await prepareStack({argocdChartPath: UPSTREAM.argocdChart, kokumiManifestPath: UPSTREAM.kokumiManifest, generated: generateStackSecrets()})
    const held = generateStackSecrets()
    const secrets = stackSecretsWith(stack, held, 4)
    const auth = secrets.find((s) => s.metadata.name === 'kokumi-server-auth') as unknown as {stringData: Record<string, string>}
    expect(bcryptVerify(held.kokumiAdminPassword, auth.stringData['password-hash']!)).toBe(true)
    expect(auth.stringData['signing-key']).toBe(held.kokumiSigningKey)
    const redis = secrets.find((s) => s.metadata.name === 'argocd-redis') as unknown as {stringData: {auth: string}}
    expect(redis.stringData.auth).toBe(held.argocdRedisPassword)
    for (const s of secrets) {
      if (s.metadata.namespace !== 'ichor-system') expect(s.metadata.annotations).toMatchObject({'argocd.argoproj.io/sync-options': 'Prune=false'})
    }
  })
})
