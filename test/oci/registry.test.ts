// Against the real CNCF distribution registry (Debian `docker-registry`), started here on a
// free loopback port. Failure paths go through a small fault-injecting proxy in front of it.
import {readFileSync} from 'node:fs'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {untarSync} from '../../src/lib/chart/archive.js'
import {IchorError} from '../../src/lib/errors/errors.js'
import {FLUX_CONFIG_MEDIA_TYPE, FLUX_CONTENT_MEDIA_TYPE, OCI_MANIFEST_MEDIA_TYPE, unpackAnnotations} from '../../src/lib/oci/artifact.js'
import {buildBundle, bundleTag, sha256Digest} from '../../src/lib/oci/bundle.js'
import {OciClient} from '../../src/lib/oci/client.js'
import {publishBundle} from '../../src/lib/oci/publish.js'
import {freeLoopbackPort, startRegistry, type RunningRegistry} from '../harness/registry.js'
import {UPSTREAM} from '../support/upstream.js'
import {startFaultProxy, type FaultProxy} from './support/fault-proxy.js'

// The real Kokumi install manifest stands in for a rendered component.
const rendered = readFileSync(UPSTREAM.kokumiManifest)
const files = [
  {path: 'manifest.yaml', content: rendered},
  {path: 'policies/kokumi.yaml', content: 'kind: CiliumNetworkPolicy\n'},
]
const bundle = buildBundle(files)
const tag = bundleTag('0.14.0', rendered)
const annotations = {source: 'https://github.com/kokumi-dev/kokumi', version: '0.14.0'}

/** Records the waits instead of sleeping, so retry tests are instant and can check the backoff. */
function recordingSleep() {
  const waits: number[] = []
  return {waits, sleep: async (ms: number) => void waits.push(ms)}
}

let registry: RunningRegistry
let client: OciClient

beforeAll(async () => {
  registry = await startRegistry()
  client = new OciClient(registry.endpoint)
})
afterAll(async () => {
  await registry?.stop()
})

async function withProxy<T>(fn: (proxy: FaultProxy) => Promise<T>): Promise<T> {
  const proxy = await startFaultProxy(registry.endpoint)
  try {
    return await fn(proxy)
  } finally {
    await proxy.stop()
  }
}

describe('publishBundle against the real registry', () => {
  it('pushes a bundle that reads back as the same manifest, config and layer, and unpacks to the same files', async () => {
    const result = await publishBundle(client, {repository: 'ichor/kokumi', tag, ...bundle, annotations})
    expect(result).toMatchObject({repository: 'ichor/kokumi', tag, layerDigest: bundle.layerDigest, pushed: true, uploadedBlobs: 2})

    const head = await client.headManifest('ichor/kokumi', tag)
    expect(head).toEqual({digest: result.manifestDigest, mediaType: OCI_MANIFEST_MEDIA_TYPE, size: expect.any(Number)})

    const pulled = await client.getManifest('ichor/kokumi', tag)
    expect(pulled.digest).toBe(result.manifestDigest)
    const manifest = pulled.manifest as {
      config: {mediaType: string; digest: string}
      layers: {mediaType: string; digest: string; size: number}[]
      annotations: Record<string, string>
    }
    expect(manifest.config.mediaType).toBe(FLUX_CONFIG_MEDIA_TYPE)
    expect(manifest.layers).toEqual([
      {mediaType: FLUX_CONTENT_MEDIA_TYPE, digest: bundle.layerDigest, size: bundle.size, annotations: unpackAnnotations(bundle.layer)},
    ])
    expect(manifest.annotations['org.opencontainers.image.version']).toBe('0.14.0')
    expect((await client.getBlob('ichor/kokumi', manifest.config.digest)).toString()).toBe('{}')

    const layer = await client.getBlob('ichor/kokumi', bundle.layerDigest)
    expect(layer.equals(bundle.layer)).toBe(true)
    const unpacked = untarSync(layer, 'pulled layer')
    expect([...unpacked.keys()].sort()).toEqual(['manifest.yaml', 'policies/kokumi.yaml'])
    expect(unpacked.get('manifest.yaml')!.equals(rendered)).toBe(true)

    // The manifest can also be read by its digest.
    expect((await client.getManifest('ichor/kokumi', result.manifestDigest)).bytes.equals(pulled.bytes)).toBe(true)
  })

  it('uploads nothing the second time and reports the same digest', async () => {
    const first = await publishBundle(client, {repository: 'ichor/twice', tag, ...bundle, annotations})
    const second = await publishBundle(client, {repository: 'ichor/twice', tag, ...bundle, annotations})
    expect(first).toMatchObject({pushed: true, uploadedBlobs: 2})
    expect(second).toEqual({...first, pushed: false, uploadedBlobs: 0})
  })

  it('under a new tag with the same layer, pushes only the manifest', async () => {
    await publishBundle(client, {repository: 'ichor/retag', tag, ...bundle, annotations})
    const moved = await publishBundle(client, {repository: 'ichor/retag', tag: 'other-tag', ...bundle, annotations})
    expect(moved).toMatchObject({pushed: true, uploadedBlobs: 0, tag: 'other-tag'})
    expect((await client.headManifest('ichor/retag', 'other-tag'))?.digest).toBe(moved.manifestDigest)
  })

  it('uploads in PATCH chunks when a chunk size is given, and the registry assembles the same blob', async () => {
    await withProxy(async (proxy) => {
      const chunkSize = 4096
      const viaProxy = new OciClient(proxy.endpoint)
      const result = await publishBundle(viaProxy, {repository: 'ichor/chunked', tag, ...bundle, annotations, chunkSize})
      expect(result).toMatchObject({pushed: true, uploadedBlobs: 2})
      const patches = proxy.seen.filter((r) => r.method === 'PATCH')
      // config (2 bytes) in one chunk, the layer in ceil(size / chunkSize)
      expect(patches).toHaveLength(1 + Math.ceil(bundle.size / chunkSize))
      expect(patches.every((p) => p.bodyBytes <= chunkSize)).toBe(true)
      expect(patches.at(-1)!.contentRange).toBe(`${Math.floor((bundle.size - 1) / chunkSize) * chunkSize}-${bundle.size - 1}`)
      const closing = proxy.seen.filter((r) => r.method === 'PUT' && r.path.includes('/blobs/uploads/'))
      expect(closing.map((r) => r.bodyBytes)).toEqual([0, 0])
    })
    expect((await client.getBlob('ichor/chunked', bundle.layerDigest)).equals(bundle.layer)).toBe(true)
  })
})

describe('OciClient errors', () => {
  it('names the endpoint and suggests the port-forward or --registry-endpoint when the connection is refused, without retrying', async () => {
    const closed = `http://127.0.0.1:${await freeLoopbackPort()}`
    const {waits, sleep} = recordingSleep()
    const error = await new OciClient(closed, {sleep}).headManifest('ichor/kokumi', tag).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(IchorError)
    expect((error as IchorError).message).toContain(`cannot reach the OCI registry at ${closed} (connection refused)`)
    expect((error as IchorError).message).toMatch(/port-forward.*--registry-endpoint/)
    expect((error as IchorError).hint).toMatch(/--registry-endpoint/)
    expect(waits).toEqual([])
  })

  it('answers undefined for an unknown repository or tag on HEAD, and a 404 error on GET', async () => {
    expect(await client.headManifest('ichor/never-pushed', tag)).toBeUndefined()
    expect(await client.blobExists('ichor/never-pushed', bundle.layerDigest)).toBe(false)
    await expect(client.getManifest('ichor/never-pushed', 'nope')).rejects.toThrow(
      new RegExp(`registry ${registry.endpoint}: manifest ichor/never-pushed:nope not found \\(HTTP 404: (NAME|MANIFEST)_UNKNOWN`),
    )
    await expect(client.getBlob('ichor/never-pushed', sha256Digest('x'))).rejects.toThrow(/not found \(HTTP 404/)
  })

  it('refuses to upload bytes that do not match the given digest, before talking to the registry', async () => {
    await withProxy(async (proxy) => {
      const viaProxy = new OciClient(proxy.endpoint)
      await expect(viaProxy.pushBlob('ichor/mismatch', bundle.layer, sha256Digest('something else'))).rejects.toThrow(/digest mismatch/)
      expect(proxy.seen).toEqual([])
    })
  })

  it('reports a digest mismatch when the bytes received are not the blob asked for', async () => {
    await publishBundle(client, {repository: 'ichor/corrupt', tag, ...bundle, annotations})
    await withProxy(async (proxy) => {
      proxy.decide = (req) => (req.method === 'GET' ? {kind: 'corrupt'} : {kind: 'forward'})
      const viaProxy = new OciClient(proxy.endpoint)
      await expect(viaProxy.getBlob('ichor/corrupt', bundle.layerDigest)).rejects.toThrow(
        new RegExp(`digest mismatch for blob ichor/corrupt@${bundle.layerDigest} at ${proxy.endpoint}: expected ${bundle.layerDigest}`),
      )
      await expect(viaProxy.getManifest('ichor/corrupt', tag)).rejects.toThrow(/digest mismatch for manifest ichor\/corrupt/)
    })
  })

  it("reports the registry's own digest check as a digest mismatch when the uploaded bytes arrive altered", async () => {
    await withProxy(async (proxy) => {
      proxy.decide = (req) => (req.method === 'PUT' ? {kind: 'corruptRequest'} : {kind: 'forward'})
      await expect(new OciClient(proxy.endpoint).pushBlob('ichor/altered', bundle.layer, bundle.layerDigest)).rejects.toThrow(
        new RegExp(`registry ${proxy.endpoint} rejected blob ichor/altered@${bundle.layerDigest}: digest mismatch \\(HTTP 400: DIGEST_INVALID`),
      )
    })
    expect(await client.blobExists('ichor/altered', bundle.layerDigest)).toBe(false)
  })

  it('retries 503 twice with exponential backoff, then succeeds through the real registry', async () => {
    await withProxy(async (proxy) => {
      proxy.decide = (_req, i) => (i < 2 ? {kind: 'answer', status: 503, body: '{"errors":[{"code":"UNAVAILABLE","message":"try later"}]}'} : {kind: 'forward'})
      const {waits, sleep} = recordingSleep()
      const result = await publishBundle(new OciClient(proxy.endpoint, {sleep}), {repository: 'ichor/flaky', tag, ...bundle, annotations})
      expect(result).toMatchObject({pushed: true, uploadedBlobs: 2})
      expect(waits).toEqual([250, 500])
      expect(proxy.seen.slice(0, 3).map((r) => r.method)).toEqual(['HEAD', 'HEAD', 'HEAD'])
    })
    expect((await client.headManifest('ichor/flaky', tag))?.digest).toBeDefined()
  })

  it('retries a dropped connection', async () => {
    await withProxy(async (proxy) => {
      proxy.decide = (_req, i) => (i === 0 ? {kind: 'reset'} : {kind: 'forward'})
      const {waits, sleep} = recordingSleep()
      expect(await new OciClient(proxy.endpoint, {sleep}).headManifest('ichor/kokumi', tag)).toBeDefined()
      expect(waits).toEqual([250])
    })
  })

  it('gives up after 4 tries of 5xx with a clear error, within the bounded backoff', async () => {
    await withProxy(async (proxy) => {
      proxy.decide = () => ({kind: 'answer', status: 502})
      const {waits, sleep} = recordingSleep()
      await expect(new OciClient(proxy.endpoint, {sleep}).headManifest('ichor/kokumi', tag)).rejects.toThrow(
        new RegExp(`registry ${proxy.endpoint} failed to look up ichor/kokumi:${tag} after 4 tries: HTTP 502`),
      )
      expect(waits).toEqual([250, 500, 1000])
      expect(proxy.seen).toHaveLength(4)
    })
  })

  it('explains 401/403 as a registry that needs credentials ichor does not have', async () => {
    await withProxy(async (proxy) => {
      for (const status of [401, 403]) {
        proxy.decide = () => ({kind: 'answer', status, body: '{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}'})
        // A push starts with a HEAD (no body to quote); a GET carries the registry's own error text.
        const push = await new OciClient(proxy.endpoint).pushBlob('ichor/auth', bundle.layer, bundle.layerDigest).catch((e: unknown) => e)
        expect(push).toBeInstanceOf(IchorError)
        expect((push as IchorError).message).toContain(
          `registry ${proxy.endpoint} refused to let ichor upload the blob ${bundle.layerDigest} to ichor/auth (HTTP ${status})`,
        )
        expect((push as IchorError).message).toContain('needs credentials, which ichor does not have')
        await expect(new OciClient(proxy.endpoint).getManifest('ichor/auth', tag)).rejects.toThrow(
          `(HTTP ${status}: UNAUTHORIZED authentication required): it needs credentials, which ichor does not have`,
        )
      }
    })
  })

  it('refuses names that are not OCI repository names or references before any request', async () => {
    await expect(client.headManifest('Ichor/Upper', tag)).rejects.toThrow(/invalid OCI repository name/)
    await expect(client.headManifest('ichor/kokumi', 'bad tag')).rejects.toThrow(/invalid OCI reference/)
    await expect(client.blobExists('ichor/kokumi', 'sha256:abc')).rejects.toThrow(/invalid digest/)
    expect(() => new OciClient('ftp://x')).toThrow(/only http/)
    expect(new OciClient('127.0.0.1:5000/').endpoint).toBe('http://127.0.0.1:5000')
  })
})

describe('the registry harness', () => {
  it('stops the registry it started, and fails loudly naming the apt package when the binary is missing', async () => {
    const second = await startRegistry()
    expect(second.endpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
    await new OciClient(second.endpoint).ping()
    await second.stop()
    await expect(new OciClient(second.endpoint).ping()).rejects.toThrow(/connection refused/)

    const saved = process.env.ICHOR_REGISTRY_BIN
    process.env.ICHOR_REGISTRY_BIN = '/nonexistent/docker-registry'
    try {
      await expect(startRegistry()).rejects.toThrow(/apt-get install -y docker-registry/)
    } finally {
      if (saved === undefined) delete process.env.ICHOR_REGISTRY_BIN
      else process.env.ICHOR_REGISTRY_BIN = saved
    }
  })
})
