import {mkdtempSync, readdirSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterEach, beforeEach, describe, expect, it} from 'vitest'
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

  const render = (values: unknown, releaseName = 'cilium') => helmTemplate({chartPath: UPSTREAM.ciliumChart, releaseName, namespace: 'kube-system', values})

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
})
