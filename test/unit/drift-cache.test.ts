import {chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, utimesSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterEach, beforeEach, describe, expect, it} from 'vitest'
import {driftCache, driftCacheDir, indexedObject, objectHash} from '../../src/lib/stack/drift-cache.js'
import type {KubeObject} from '../../src/lib/kube/objects.js'

describe('drift verdict cache', () => {
  const saved = {off: process.env.ICHOR_DRIFT_CACHE, xdg: process.env.XDG_CACHE_HOME}
  let dir: string
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'ichor-drift-cache-'))
    process.env.XDG_CACHE_HOME = dir
    delete process.env.ICHOR_DRIFT_CACHE
  })
  afterEach(() => {
    for (const [k, v] of [
      ['ICHOR_DRIFT_CACHE', saved.off],
      ['XDG_CACHE_HOME', saved.xdg],
    ] as const) {
      if (v === undefined) delete process.env[k]
      else process.env[k] = v
    }
  })

  const server = 'https://192.0.2.10:6443'
  const digest = `sha256:${'ab'.repeat(32)}`
  const cm = (data: Record<string, string>): KubeObject =>
    ({apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'argocd-cm', namespace: 'argocd'}, data}) as KubeObject

  it('a verdict holds only for the same live version, the same bundle object and the same server basis (version, admission, CRD), and only while it is checked', () => {
    const hash = objectHash(cm({a: '1'}))
    const basis = 'server-v1.36.3/crd-uid/17'
    const first = driftCache(server, 'argocd')!
    expect(first.unchanged('uid-1', '100', hash, basis)).toBe(false)
    first.recordUnchanged('uid-1', '100', hash, basis)
    first.recordUnchanged('uid-2', '7', hash, basis)
    first.save()

    const second = driftCache(server, 'argocd')!
    expect(second.unchanged('uid-1', '100', hash, basis)).toBe(true)
    expect(second.unchanged('uid-1', '101', hash, basis)).toBe(false) // the object was written since
    expect(second.unchanged('uid-1', '100', objectHash(cm({a: '2'})), basis)).toBe(false) // another bundle object
    expect(second.unchanged('uid-3', '100', hash, basis)).toBe(false)
    // The server changed under the same object: another version, admission or CRD (drift.ts verdictBasis).
    expect(second.unchanged('uid-1', '100', hash, 'server-v1.36.3/crd-uid/18')).toBe(false)
    second.save() // uid-2 was not checked in this run: its verdict falls away

    const third = driftCache(server, 'argocd')!
    expect(third.unchanged('uid-1', '100', hash, basis)).toBe(true)
    expect(third.unchanged('uid-2', '7', hash, basis)).toBe(false)
    // Another cluster or component keeps its own verdicts.
    expect(driftCache('https://192.0.2.99:6443', 'argocd')!.unchanged('uid-1', '100', hash, basis)).toBe(false)
    expect(driftCache(server, 'kokumi')!.unchanged('uid-1', '100', hash, basis)).toBe(false)
  })

  it('indexes a bundle by digest with references and hashes only, no content', () => {
    const secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {name: 'argocd-secret', namespace: 'argocd'},
      data: {'admin.password': 'c2VjcmV0'},
    } as KubeObject
    const objects = [cm({password: 'not-kept'}), {apiVersion: 'apps/v1', kind: 'Deployment', metadata: {name: 'argocd-server'}} as KubeObject, secret]
    const index = objects.map(indexedObject)
    const cache = driftCache(server, 'argocd')!
    expect(cache.bundleIndex(digest)).toBeUndefined()
    cache.writeBundleIndex(digest, index)
    expect(driftCache(server, 'argocd')!.bundleIndex(digest)).toEqual([
      {apiVersion: 'v1', kind: 'ConfigMap', name: 'argocd-cm', namespace: 'argocd', hash: objectHash(objects[0]!)},
      {apiVersion: 'apps/v1', kind: 'Deployment', name: 'argocd-server', hash: objectHash(objects[1]!)},
      {apiVersion: 'v1', kind: 'Secret', name: 'argocd-secret', namespace: 'argocd', hash: ''},
    ])
    const files = readdirSync(driftCacheDir())
    expect(files).toEqual([`bundle-v1-${'ab'.repeat(32)}.json`])
    expect(readFileSync(join(driftCacheDir(), files[0]!), 'utf8')).not.toContain('not-kept')
    expect(readFileSync(join(driftCacheDir(), files[0]!), 'utf8')).not.toContain(objectHash(secret))
    // Not a digest: never a file name.
    cache.writeBundleIndex('../../etc/passwd', index)
    expect(cache.bundleIndex('../../etc/passwd')).toBeUndefined()
    expect(readdirSync(driftCacheDir())).toHaveLength(1)
  })

  it('keeps its folder 0700 and its files 0600, closing a folder left open', () => {
    mkdirSync(join(dir, 'ichor', 'drift'), {recursive: true})
    chmodSync(join(dir, 'ichor', 'drift'), 0o755)
    const cache = driftCache(server, 'argocd')!
    cache.recordUnchanged('uid-1', '1', 'h', 'b')
    cache.save()
    cache.writeBundleIndex(digest, [])
    expect(statSync(driftCacheDir()).mode & 0o777).toBe(0o700)
    for (const f of readdirSync(driftCacheDir())) expect(statSync(join(driftCacheDir(), f)).mode & 0o777).toBe(0o600)
  })

  it('a damaged file is a miss, not an error; ICHOR_DRIFT_CACHE=off turns it off', () => {
    mkdirSync(driftCacheDir(), {recursive: true, mode: 0o700})
    writeFileSync(join(driftCacheDir(), `bundle-v1-${'ab'.repeat(32)}.json`), '{"objects": [{"kind": 1}]')
    expect(driftCache(server, 'argocd')!.bundleIndex(digest)).toBeUndefined()
    writeFileSync(
      join(driftCacheDir(), `bundle-v1-${'ab'.repeat(32)}.json`),
      JSON.stringify({objects: [{apiVersion: 'v1', kind: 'ConfigMap', name: 'x', hash: 7}]}),
    )
    expect(driftCache(server, 'argocd')!.bundleIndex(digest)).toBeUndefined()
    process.env.ICHOR_DRIFT_CACHE = 'off'
    expect(driftCache(server, 'argocd')).toBeUndefined()
  })

  it('keeps the verdicts of the newest clusters only', () => {
    const listing = () => (readdirSync(dir).length ? readdirSync(driftCacheDir()).filter((f) => f.startsWith('verdicts-')) : [])
    for (let i = 0; i < 40; i++) {
      const before = new Set(listing())
      const cache = driftCache(`https://127.0.0.1:${40000 + i}`, 'argocd')!
      cache.recordUnchanged('uid', '1', 'h', 'b')
      cache.save()
      const added = listing().filter((f) => !before.has(f))
      expect(added).toHaveLength(1)
      const past = Date.now() / 1000 - 1000 + i // older clusters first
      utimesSync(join(driftCacheDir(), added[0]!), past, past)
    }
    expect(listing().length).toBeLessThanOrEqual(32)
    expect(driftCache('https://127.0.0.1:40039', 'argocd')!.unchanged('uid', '1', 'h', 'b')).toBe(true)
    expect(driftCache('https://127.0.0.1:40000', 'argocd')!.unchanged('uid', '1', 'h', 'b')).toBe(false)
  })

  it('keeps the newest bundle indexes only', () => {
    const cache = driftCache(server, 'argocd')!
    for (let i = 0; i < 40; i++) {
      const d = `sha256:${i.toString(16).padStart(2, '0').repeat(32)}`
      cache.writeBundleIndex(d, [])
      const past = Date.now() / 1000 - 1000 + i // older first
      utimesSync(join(driftCacheDir(), `bundle-v1-${d.slice(7)}.json`), past, past)
    }
    cache.writeBundleIndex(digest, [])
    const kept = readdirSync(driftCacheDir()).filter((f) => f.startsWith('bundle-'))
    expect(kept).toHaveLength(32)
    expect(kept).toContain(`bundle-v1-${'ab'.repeat(32)}.json`)
    expect(kept).not.toContain(`bundle-v1-${'00'.repeat(32)}.json`)
  })
})
