import {formatPath} from '../../src/lib/values/path.js'
import {execFileSync} from 'node:child_process'
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {ValidationError} from '../../src/lib/errors/errors.js'
import {ARGOCD_DEFAULT_VALUES, ARGOCD_HEALTH_CHECKS, ARGOCD_OWNED_KEYS, healthCheckKey, renderArgoCd, type RenderedArgoCd} from '../../src/lib/stack/argocd.js'
import {findObject} from '../../src/lib/stack/objects.js'
import {UPSTREAM} from '../support/upstream.js'

const redisPassword = 'redis-generated-password-0123456789'

describe('renderArgoCd with the real chart', () => {
  let rendered: RenderedArgoCd
  beforeAll(async () => {
    rendered = await renderArgoCd({chartPath: UPSTREAM.argocdChart, values: ARGOCD_DEFAULT_VALUES, redisPassword, kubeVersion: '1.34.0'})
  })

  it('reports the chart version', () => {
    expect(rendered.version).toBe('10.1.1')
    expect(rendered.appVersion).toBe('v3.4.4')
  })

  it('drops every ApplicationSet controller object and keeps the ApplicationSet CRD', () => {
    expect(rendered.objects.filter((o) => /applicationset-controller/.test(o.metadata.name))).toEqual([])
    expect(rendered.dropped).toEqual(
      expect.arrayContaining([
        'Deployment argocd/argocd-applicationset-controller',
        'Service argocd/argocd-applicationset-controller',
        'ServiceAccount argocd/argocd-applicationset-controller',
        'Role argocd/argocd-applicationset-controller',
        'RoleBinding argocd/argocd-applicationset-controller',
      ]),
    )
    expect(findObject(rendered.objects, 'CustomResourceDefinition', 'applicationsets.argoproj.io')).toBeDefined()
    expect(findObject(rendered.objects, 'CustomResourceDefinition', 'applications.argoproj.io')).toBeDefined()
    expect(findObject(rendered.objects, 'CustomResourceDefinition', 'appprojects.argoproj.io')).toBeDefined()
  })

  it('keeps no hook, no NetworkPolicy, no dex, notifications or redis-ha object', () => {
    expect(rendered.objects.filter((o) => o.metadata.annotations?.['helm.sh/hook'])).toEqual([])
    expect(rendered.objects.filter((o) => o.kind === 'NetworkPolicy')).toEqual([])
    expect(rendered.objects.filter((o) => /dex|notifications|redis-ha|redis-secret-init/.test(o.metadata.name))).toEqual([])
    expect(
      rendered.objects
        .map((o) => `${o.kind} ${o.metadata.name}`)
        .filter((s) => /^(Deployment|StatefulSet) /.test(s))
        .sort(),
    ).toEqual(['Deployment argocd-redis', 'Deployment argocd-repo-server', 'Deployment argocd-server', 'StatefulSet argocd-application-controller'])
  })

  it('drops the hooks and chart NetworkPolicies even when the values turn them on', async () => {
    const loud = await renderArgoCd({
      chartPath: UPSTREAM.argocdChart,
      values: {...ARGOCD_DEFAULT_VALUES, redisSecretInit: {enabled: true}, global: {networkPolicy: {create: true}}},
      redisPassword,
    })
    expect(loud.dropped).toEqual(expect.arrayContaining(['Job argocd/argocd-redis-secret-init', 'NetworkPolicy argocd/argocd-server']))
    expect(loud.objects.filter((o) => o.kind === 'NetworkPolicy' || o.metadata.annotations?.['helm.sh/hook'])).toEqual([])
  })

  it('emits Secret argocd-redis with key auth, the key the redis Deployment reads', () => {
    const secret = findObject(rendered.objects, 'Secret', 'argocd-redis')!
    expect(secret.metadata.namespace).toBe('argocd')
    expect(secret.stringData).toEqual({auth: redisPassword})
    const redis = findObject(rendered.objects, 'Deployment', 'argocd-redis')!
    const env = JSON.stringify((redis.spec as any).template.spec.containers[0].env)
    expect(env).toContain('"secretKeyRef":{"name":"argocd-redis","key":"auth"}')
  })

  it('adds the Lua health checks for Order, Preparation and Serving to argocd-cm, keeping the chart keys', () => {
    const data = findObject(rendered.objects, 'ConfigMap', 'argocd-cm')!.data as Record<string, string>
    for (const kind of ['Order', 'Preparation', 'Serving']) {
      expect(data[`resource.customizations.health.delivery.kokumi.dev_${kind}`]).toContain('condition.type == "Ready"')
    }
    expect(data['resource.exclusions']).toBeDefined()
  })

  it('refuses values that make the chart render an object Ichor owns', async () => {
    const values = {
      ...ARGOCD_DEFAULT_VALUES,
      extraObjects: [{apiVersion: 'argoproj.io/v1alpha1', kind: 'AppProject', metadata: {name: 'default', namespace: 'argocd'}, spec: {}}],
    }
    await expect(renderArgoCd({chartPath: UPSTREAM.argocdChart, values, redisPassword})).rejects.toThrow(/AppProject default, which Ichor owns/)
  })

  it('refuses a short redis password', async () => {
    await expect(renderArgoCd({chartPath: UPSTREAM.argocdChart, values: ARGOCD_DEFAULT_VALUES, redisPassword: 'short'})).rejects.toBeInstanceOf(ValidationError)
  })
})

describe('Argo CD owned keys and defaults', () => {
  it('name the repository credentials, repositories, health checks and NetworkPolicies, each with a reason', () => {
    const paths = ARGOCD_OWNED_KEYS.map((k) => formatPath(k.path))
    expect(paths).toEqual([
      'configs.credentialTemplates',
      'configs.repositories',
      'configs.cm["resource.customizations.health.delivery.kokumi.dev_Order"]',
      'configs.cm["resource.customizations.health.delivery.kokumi.dev_Preparation"]',
      'configs.cm["resource.customizations.health.delivery.kokumi.dev_Serving"]',
      'global.networkPolicy.create',
    ])
    for (const k of ARGOCD_OWNED_KEYS) expect(k.reason.length).toBeGreaterThan(20)
  })

  it('use keys the real chart has (checked against its values.yaml)', async () => {
    const {readChartArchive} = await import('../../src/lib/chart/archive.js')
    const {parse} = await import('yaml')
    const chartValues = parse(readChartArchive(UPSTREAM.argocdChart).files.get('values.yaml')!.toString('utf8'))
    const has = (path: readonly string[]) => path.reduce<any>((node, seg) => (node && seg in node ? node[seg] : undefined), chartValues) !== undefined
    expect(has(['global', 'networkPolicy', 'create'])).toBe(true)
    expect(has(['crds', 'keep'])).toBe(true)
    expect(has(['dex', 'enabled'])).toBe(true)
    expect(has(['notifications', 'enabled'])).toBe(true)
    expect(has(['redis-ha', 'enabled'])).toBe(true)
    expect(has(['redisSecretInit', 'enabled'])).toBe(true)
    expect(has(['configs', 'credentialTemplates'])).toBe(true)
    expect(has(['configs', 'repositories'])).toBe(true)
  })
})

describe('the Kokumi health Lua (run with a real Lua interpreter)', () => {
  // Argo CD runs health scripts with gopher-lua (Lua 5.1); these scripts use nothing beyond 5.1.
  const lua = process.env.ICHOR_LUA ?? 'lua5.4'
  let dir: string
  beforeAll(() => {
    try {
      execFileSync(lua, ['-v'], {stdio: 'pipe'})
    } catch {
      throw new Error(`${lua} not found: install it (apt-get install -y lua5.4) or set ICHOR_LUA`)
    }
    dir = mkdtempSync(join(tmpdir(), 'ichor-lua-'))
  })
  afterAll(() => rmSync(dir, {recursive: true, force: true}))

  // A Lua table literal from JSON-like data.
  const toLua = (v: unknown): string => {
    if (v === null || v === undefined) return 'nil'
    if (typeof v === 'string') return JSON.stringify(v)
    if (typeof v === 'number' || typeof v === 'boolean') return String(v)
    if (Array.isArray(v)) return `{${v.map(toLua).join(', ')}}`
    return `{${Object.entries(v as Record<string, unknown>)
      .map(([k, x]) => `[${JSON.stringify(k)}] = ${toLua(x)}`)
      .join(', ')}}`
  }
  const health = (kind: string, obj: unknown): {status: string; message: string} => {
    const file = join(dir, `${kind}.lua`)
    writeFileSync(
      file,
      `local obj = ${toLua(obj)}\nlocal function check()\n${ARGOCD_HEALTH_CHECKS[healthCheckKey(kind)]}\nend\nlocal hs = check()\nprint(hs.status .. "|" .. tostring(hs.message))\n`,
    )
    const [status, message] = execFileSync(lua, [file], {encoding: 'utf8'}).trim().split('|')
    return {status: status!, message: message!}
  }

  it.each(['Order', 'Preparation', 'Serving'])('%s: Progressing, Healthy, Degraded from the Ready condition', (kind) => {
    expect(health(kind, {metadata: {generation: 1}}).status).toBe('Progressing')
    expect(health(kind, {metadata: {generation: 2}, status: {observedGeneration: 1, conditions: [{type: 'Ready', status: 'True'}]}}).status).toBe('Progressing')
    expect(
      health(kind, {
        metadata: {generation: 1},
        status: {observedGeneration: 1, conditions: [{type: 'Ready', status: 'True', reason: 'Served', message: 'ok'}]},
      }),
    ).toEqual({status: 'Healthy', message: 'ok'})
    expect(
      health(kind, {
        metadata: {generation: 1},
        status: {
          conditions: [
            {type: 'Other', status: 'True'},
            {type: 'Ready', status: 'False', reason: 'PullFailed', message: ''},
          ],
        },
      }),
    ).toEqual({status: 'Degraded', message: 'PullFailed'})
    expect(health(kind, {metadata: {generation: 1}, status: {conditions: [{type: 'Ready', status: 'Unknown', reason: 'Rendering'}]}}).status).toBe(
      'Progressing',
    )
  })
})
