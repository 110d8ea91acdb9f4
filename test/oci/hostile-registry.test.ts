// The OCI client against a registry that misbehaves on purpose (a small loopback server whose
// answers each test writes): bodies that never end or lie about their length, and redirects
// to other hosts. The client must stay bounded in memory, not retry what broke a limit, and
// go elsewhere only where the distribution spec allows (blob downloads).
import {afterEach, beforeEach, describe, expect, it} from 'vitest'
import {sha256Digest} from '../../src/lib/oci/bundle.js'
import {OciClient} from '../../src/lib/oci/client.js'
import {startHostileServer, streamForever, type HostileServer} from './support/hostile-server.js'

const MANIFEST = Buffer.from(JSON.stringify({schemaVersion: 2, mediaType: 'application/vnd.oci.image.manifest.v1+json', layers: []}))
const BLOB = Buffer.from('the blob the descriptor names\n')
const BLOB_DIGEST = sha256Digest(BLOB)
const noSleep = {sleep: async () => {}}

let registry: HostileServer
/** Another host: 127.0.0.2 is loopback too, but not the registry's origin. */
let elsewhere: HostileServer

beforeEach(async () => {
  registry = await startHostileServer('127.0.0.1')
  elsewhere = await startHostileServer('127.0.0.2')
})
afterEach(async () => {
  await registry.stop()
  await elsewhere.stop()
})

function redirect(res: import('node:http').ServerResponse, to: string, status = 307) {
  res.writeHead(status, {location: to})
  res.end()
}

describe('bodies are read with a cap', () => {
  it('a manifest that streams forever is cut at 4 MiB and not retried', async () => {
    registry.handle = (_req, res) => {
      res.writeHead(200, {'content-type': 'application/vnd.oci.image.manifest.v1+json'})
      streamForever(registry, res)
    }
    const client = new OciClient(registry.endpoint, noSleep)
    await expect(client.getManifest('ichor/x', 't')).rejects.toThrow(
      `registry ${registry.endpoint} sent more than 4194304 bytes for manifest ichor/x:t; at most 4 MiB are read, so ichor stopped (not retried)`,
    )
    expect(registry.seen).toHaveLength(1)
    // The client let go: the server did not get to write its fixture bound of 256 MiB.
    expect(registry.streamed).toBeLessThan(64 * 1024 * 1024)
  })

  it('a manifest announced as 10 GB is refused from its Content-Length, before reading', async () => {
    registry.handle = (_req, res) => {
      res.writeHead(200, {'content-type': 'application/vnd.oci.image.manifest.v1+json', 'content-length': String(10 * 1024 ** 3)})
      res.write('{')
    }
    await expect(new OciClient(registry.endpoint, noSleep).getManifest('ichor/x', 't')).rejects.toThrow(
      /sent a body of 10737418240 bytes \(Content-Length\) for manifest ichor\/x:t/,
    )
    expect(registry.seen).toHaveLength(1)
  })

  it('a blob is read no further than the size its descriptor gives, whatever the registry sends', async () => {
    registry.handle = (_req, res) => {
      res.writeHead(200)
      streamForever(registry, res)
    }
    await expect(new OciClient(registry.endpoint, noSleep).getBlob('ichor/x', BLOB_DIGEST, {size: BLOB.length})).rejects.toThrow(
      `sent more than ${BLOB.length} bytes for blob ichor/x@${BLOB_DIGEST}`,
    )
    expect(registry.seen).toHaveLength(1)
  })

  it('a blob whose Content-Length disagrees with its descriptor is refused before reading', async () => {
    registry.handle = (_req, res) => {
      res.writeHead(200, {'content-length': String(BLOB.length + 1)})
      res.end(Buffer.concat([BLOB, Buffer.from('!')]))
    }
    await expect(new OciClient(registry.endpoint, noSleep).getBlob('ichor/x', BLOB_DIGEST, {size: BLOB.length})).rejects.toThrow(
      `sent a body of ${BLOB.length + 1} bytes (Content-Length) for blob ichor/x@${BLOB_DIGEST}`,
    )
  })

  it('a blob shorter than its descriptor says is refused', async () => {
    registry.handle = (_req, res) => {
      res.writeHead(200)
      res.end(BLOB)
    }
    await expect(new OciClient(registry.endpoint, noSleep).getBlob('ichor/x', BLOB_DIGEST, {size: BLOB.length + 5})).rejects.toThrow(
      `sent ${BLOB.length} bytes for blob ichor/x@${BLOB_DIGEST}; its descriptor says ${BLOB.length + 5}`,
    )
  })

  it('a blob streams in and is checked against its digest', async () => {
    registry.handle = (_req, res) => {
      res.writeHead(200)
      res.end(BLOB)
    }
    expect((await new OciClient(registry.endpoint, noSleep).getBlob('ichor/x', BLOB_DIGEST, {size: BLOB.length})).equals(BLOB)).toBe(true)
    await expect(new OciClient(registry.endpoint, noSleep).getBlob('ichor/x', sha256Digest('other'))).rejects.toThrow(/digest mismatch for blob/)
  })

  it('an endless error body is quoted from its first bytes only', async () => {
    registry.handle = (_req, res) => {
      res.writeHead(404)
      streamForever(registry, res)
    }
    const error = (await new OciClient(registry.endpoint, noSleep).getManifest('ichor/x', 't').catch((e: unknown) => e)) as Error
    expect(error.message).toMatch(/manifest ichor\/x:t not found \(HTTP 404: a{200}\)$/)
    expect(registry.streamed).toBeLessThan(64 * 1024 * 1024)
  })

  it('an endless 5xx body is read boundedly on each of the tries', async () => {
    registry.handle = (_req, res) => {
      res.writeHead(503)
      streamForever(registry, res)
    }
    await expect(new OciClient(registry.endpoint, {...noSleep, retry: {attempts: 3}}).getManifest('ichor/x', 't')).rejects.toThrow(
      /after 3 tries: HTTP 503 for GET \/v2\/ichor\/x\/manifests\/t: a{200}$/,
    )
    expect(registry.seen).toHaveLength(3)
    expect(registry.streamed).toBeLessThan(3 * 64 * 1024 * 1024)
  })
})

describe('redirects', () => {
  it('a manifest read redirected to another host is refused naming that host; nothing reaches it', async () => {
    registry.handle = (req, res) => redirect(res, `${elsewhere.endpoint}${req.path}`)
    await expect(new OciClient(registry.endpoint, noSleep).getManifest('ichor/x', 't')).rejects.toThrow(
      `registry ${registry.endpoint} redirected GET /v2/ichor/x/manifests/t (HTTP 307) to ${elsewhere.host}: only blob downloads may leave the registry's host (OCI distribution spec)`,
    )
    await expect(new OciClient(registry.endpoint, noSleep).headManifest('ichor/x', 't')).rejects.toThrow(
      `redirected HEAD /v2/ichor/x/manifests/t (HTTP 307) to ${elsewhere.host}`,
    )
    expect(elsewhere.seen).toEqual([])
  })

  it('a manifest read redirected within the registry is followed', async () => {
    registry.handle = (req, res) => {
      if (req.path.endsWith('/t')) return redirect(res, '/v2/ichor/x/manifests/moved', 301)
      res.writeHead(200, {'content-type': 'application/vnd.oci.image.manifest.v1+json'})
      res.end(MANIFEST)
    }
    expect((await new OciClient(registry.endpoint, noSleep).getManifest('ichor/x', 't')).digest).toBe(sha256Digest(MANIFEST))
  })

  it('a blob download may be redirected to storage on another host, with no credential header sent there', async () => {
    registry.handle = (req, res) => redirect(res, `${elsewhere.endpoint}/storage${req.path}?sig=x`)
    elsewhere.handle = (_req, res) => {
      res.writeHead(200, {'content-length': String(BLOB.length)})
      res.end(BLOB)
    }
    const client = new OciClient(registry.endpoint, noSleep)
    expect((await client.getBlob('ichor/x', BLOB_DIGEST, {size: BLOB.length})).equals(BLOB)).toBe(true)
    expect(await client.blobExists('ichor/x', BLOB_DIGEST)).toBe(true)
    expect(elsewhere.seen.map((r) => `${r.method} ${r.path}`)).toEqual([
      `GET /storage/v2/ichor/x/blobs/${BLOB_DIGEST}?sig=x`,
      `HEAD /storage/v2/ichor/x/blobs/${BLOB_DIGEST}?sig=x`,
    ])
    expect(elsewhere.seen.every((r) => r.headers.authorization === undefined && r.headers.cookie === undefined)).toBe(true)
  })

  it('a redirect loop stops after 5 hops', async () => {
    registry.handle = (req, res) => redirect(res, req.path)
    await expect(new OciClient(registry.endpoint, noSleep).getBlob('ichor/x', BLOB_DIGEST)).rejects.toThrow(
      /redirected GET .* \(HTTP 307\) to 127\.0\.0\.1:\d+: more than 5 redirects/,
    )
    expect(registry.seen).toHaveLength(6)
  })

  it('an upload Location on another host is refused naming it; the blob is sent nowhere', async () => {
    registry.handle = (req, res) => {
      if (req.method === 'POST') {
        res.writeHead(202, {location: `${elsewhere.endpoint}/v2/ichor/x/blobs/uploads/uuid-1`})
        return res.end()
      }
      res.writeHead(404)
      res.end()
    }
    await expect(new OciClient(registry.endpoint, noSleep).pushBlob('ichor/x', BLOB, BLOB_DIGEST)).rejects.toThrow(
      `registry ${registry.endpoint} told ichor to upload to another host, ${elsewhere.host} (Location header), while trying to upload the blob ${BLOB_DIGEST} to ichor/x; ichor uploads only to the registry it was given`,
    )
    expect(elsewhere.seen).toEqual([])
    expect(registry.seen.map((r) => r.method)).toEqual(['HEAD', 'POST'])
  })

  it('a redirected upload (PUT) is a clear error naming the host, not an internal one', async () => {
    registry.handle = (req, res) => {
      if (req.method === 'PUT') return redirect(res, `${elsewhere.endpoint}${req.path}`)
      res.writeHead(404)
      res.end()
    }
    await expect(new OciClient(registry.endpoint, noSleep).putManifest('ichor/x', 't', MANIFEST, 'application/vnd.oci.image.manifest.v1+json')).rejects.toThrow(
      `registry ${registry.endpoint} redirected PUT /v2/ichor/x/manifests/t (HTTP 307) to ${elsewhere.host}: ichor does not follow redirects of uploads; the registry must accept them itself`,
    )
    expect(elsewhere.seen).toEqual([])
  })
})
