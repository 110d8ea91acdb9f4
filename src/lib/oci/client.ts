// A small client for the OCI distribution API, enough to publish and read back bundles.
// No maintained Node library fits (the npm ones are Docker-Hub-era or sigstore-specific),
// and ichor only talks to Kokumi's anonymous in-cluster registry, usually over plain HTTP
// through a port-forward, so there is no auth flow here on purpose: 401/403 is an error.
//
// The registry is not trusted with this process's memory or with where bytes go: every
// body is read with a cap (a manifest 4 MiB as the distribution registry enforces, a blob
// exactly the size its descriptor gives, an error body a few KiB), a body that breaks its cap
// is never retried, and redirects are followed only where the distribution spec lets a
// registry send the client elsewhere (blob downloads, e.g. to storage); manifests and
// uploads stay on the registry's origin, and nothing is ever uploaded to another host.
import {createHash} from 'node:crypto'
import {IchorError} from '../errors/errors.js'
import {sha256Digest} from './bundle.js'
import {formatElapsed, requestSettings} from '../kube/request-settings.js'

export interface RetryPolicy {
  /** Tries in total, including the first. */
  attempts: number
  /** Delay before the second try; doubled for each later one. */
  baseDelayMs: number
  maxDelayMs: number
}

export interface OciClientOptions {
  retry?: Partial<RetryPolicy>
  /** Replaces the wait between tries (tests). */
  sleep?: (ms: number) => Promise<void>
  /**
   * Per request, the whole exchange including its body (a registry trickling bytes is cut off
   * too); 0 for none. Default: `--request-timeout` (kube/request-settings.ts). Not retried: a
   * server that did not answer in that time is reported, as kubectl reports it.
   */
  timeoutMs?: number
  /** How requests reach the endpoint (the registry tunnel's socket); the global fetch by default. */
  fetch?: typeof fetch
}

export interface ManifestDescriptor {
  digest: string
  mediaType: string
  size: number
}

export interface FetchedManifest extends ManifestDescriptor {
  bytes: Buffer
  /** The parsed JSON. */
  manifest: unknown
}

/** What the CNCF distribution registry accepts as a manifest (and the spec's floor for clients). */
export const MAX_MANIFEST_BYTES = 4 * 1024 * 1024
/** A blob read without a known size; ichor's bundles are a few hundred KB. */
const DEFAULT_MAX_BLOB_BYTES = 64 * 1024 * 1024
/** An error body is read only to quote a line of it. */
const MAX_ERROR_BODY_BYTES = 16 * 1024
const MAX_REDIRECTS = 5

// 4 tries with 250 + 500 + 1000 ms between them: about 1.75 s of waiting at most.
const DEFAULT_RETRY: RetryPolicy = {attempts: 4, baseDelayMs: 250, maxDelayMs: 1000}

const MANIFEST_ACCEPT = [
  'application/vnd.oci.image.manifest.v1+json',
  'application/vnd.oci.image.index.v1+json',
  'application/vnd.docker.distribution.manifest.v2+json',
  'application/vnd.docker.distribution.manifest.list.v2+json',
].join(', ')

// Grammars from the OCI distribution spec.
const REPOSITORY = /^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(\/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*$/
const TAG = /^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$/
const DIGEST = /^sha256:[a-f0-9]{64}$/

/** A failure worth another try: 5xx, a reset connection, undici's own idle timeouts (never the --request-timeout deadline). */
class TransientFailure extends Error {}

/** When a request (and its body) must be done: one signal over the exchange, redirects included. */
interface Deadline {
  started: number
  request: string
  signal?: AbortSignal
}

/** Which redirects a request may follow (see the header). */
type RedirectPolicy = 'blob' | 'same-origin'

export class OciClient {
  /** Normalised base URL, e.g. `http://127.0.0.1:5000`. */
  readonly endpoint: string
  private readonly origin: string
  private readonly retry: RetryPolicy
  private readonly sleep: (ms: number) => Promise<void>
  private readonly timeoutMs: number
  private readonly fetch: typeof fetch

  constructor(endpoint: string, opts: OciClientOptions = {}) {
    this.fetch = opts.fetch ?? fetch
    this.endpoint = normaliseEndpoint(endpoint)
    this.origin = new URL(this.endpoint).origin
    this.retry = {...DEFAULT_RETRY, ...opts.retry}
    if (!(this.retry.attempts >= 1)) throw new IchorError('OCI client: retry.attempts must be at least 1')
    this.sleep = opts.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)))
    this.timeoutMs = opts.timeoutMs ?? requestSettings().timeoutMs
  }

  /** Each response's deadline, so a body read that runs out of time says so too. */
  private readonly deadlines = new WeakMap<Response, Deadline>()

  /** Checks that the endpoint speaks the distribution API (`GET /v2/`). */
  async ping(): Promise<void> {
    await this.withRetry('reach the registry', async () => {
      const res = await this.send('GET', '/v2/')
      if (res.status !== 200) await this.fail(res, 'reach the registry', 'the /v2/ API')
      await drain(res)
    })
  }

  /** The manifest's descriptor, or undefined when the repository or reference does not exist. */
  async headManifest(repo: string, ref: string): Promise<ManifestDescriptor | undefined> {
    checkRepository(repo)
    checkReference(ref)
    const what = `look up ${repo}:${ref}`
    const head = await this.withRetry(what, async () => {
      const res = await this.send('HEAD', `/v2/${repo}/manifests/${ref}`, {headers: {accept: MANIFEST_ACCEPT}})
      await drain(res)
      if (res.status === 404) return undefined
      if (res.status !== 200) return this.fail(res, what, `manifest ${repo}:${ref}`)
      return {
        digest: res.headers.get('docker-content-digest') ?? undefined,
        mediaType: mediaTypeOf(res),
        size: Number(res.headers.get('content-length') ?? Number.NaN),
      }
    })
    if (!head) return undefined
    // The digest header is how a HEAD names the manifest; without it (or a size) read the bytes.
    if (!head.digest || !Number.isFinite(head.size)) {
      const {digest, mediaType, size} = await this.getManifest(repo, ref)
      return {digest, mediaType, size}
    }
    return {digest: head.digest, mediaType: head.mediaType, size: head.size}
  }

  async getManifest(repo: string, ref: string): Promise<FetchedManifest> {
    checkRepository(repo)
    checkReference(ref)
    const what = `read the manifest ${repo}:${ref}`
    const fetched = await this.withRetry(what, async () => {
      const res = await this.send('GET', `/v2/${repo}/manifests/${ref}`, {headers: {accept: MANIFEST_ACCEPT}})
      if (res.status !== 200) return this.fail(res, what, `manifest ${repo}:${ref}`)
      const bytes = await this.readCapped(res, MAX_MANIFEST_BYTES, `manifest ${repo}:${ref}`)
      return {bytes, mediaType: mediaTypeOf(res), claimed: res.headers.get('docker-content-digest')}
    })
    const digest = sha256Digest(fetched.bytes)
    const expected = DIGEST.test(ref) ? ref : fetched.claimed?.startsWith('sha256:') ? fetched.claimed : undefined
    if (expected && expected !== digest) throw digestMismatch(this.endpoint, `manifest ${repo}:${ref}`, expected, digest)
    let manifest: unknown
    try {
      manifest = JSON.parse(fetched.bytes.toString('utf8'))
    } catch {
      throw new IchorError(`registry ${this.endpoint}: manifest ${repo}:${ref} is not JSON`)
    }
    return {bytes: fetched.bytes, digest, mediaType: fetched.mediaType, size: fetched.bytes.length, manifest}
  }

  async blobExists(repo: string, digest: string): Promise<boolean> {
    checkRepository(repo)
    checkDigest(digest)
    const what = `look up the blob ${digest} in ${repo}`
    return this.withRetry(what, () => this.blobExistsOnce(repo, digest, what))
  }

  /**
   * Reads a blob, hashing it as it streams in, and checks it against the digest. With `size`
   * (from the descriptor) not one byte more is read; without it, at most DEFAULT_MAX_BLOB_BYTES.
   */
  async getBlob(repo: string, digest: string, opts: {size?: number} = {}): Promise<Buffer> {
    checkRepository(repo)
    checkDigest(digest)
    const {size} = opts
    if (size !== undefined && !(Number.isSafeInteger(size) && size >= 0))
      throw new IchorError(`OCI client: blob size must be a non-negative integer, got ${size}`)
    const what = `read the blob ${digest} from ${repo}`
    const subject = `blob ${repo}@${digest}`
    return this.withRetry(what, async () => {
      const res = await this.send('GET', `/v2/${repo}/blobs/${digest}`, {}, 'blob')
      if (res.status !== 200) return this.fail(res, what, subject)
      const hash = createHash('sha256')
      const bytes = await this.readCapped(res, size ?? DEFAULT_MAX_BLOB_BYTES, subject, (chunk) => hash.update(chunk))
      if (size !== undefined && bytes.length !== size) {
        throw new IchorError(`registry ${this.endpoint} sent ${bytes.length} bytes for ${subject}; its descriptor says ${size}`)
      }
      const actual = `sha256:${hash.digest('hex')}`
      if (actual !== digest) throw digestMismatch(this.endpoint, subject, digest, actual)
      return bytes
    })
  }

  /**
   * Uploads a blob unless the repository already has it. Monolithic (POST, then one PUT)
   * by default; with `chunkSize`, PATCHes of at most that many bytes, then the closing PUT.
   * A transient failure restarts the whole upload session: a half-written session cannot be resumed reliably.
   */
  async pushBlob(repo: string, bytes: Buffer, digest: string, opts: {chunkSize?: number} = {}): Promise<{uploaded: boolean}> {
    checkRepository(repo)
    checkDigest(digest)
    const actual = sha256Digest(bytes)
    if (actual !== digest) throw digestMismatch(this.endpoint, `blob to upload to ${repo}`, digest, actual, 'the bytes in hand')
    const {chunkSize} = opts
    if (chunkSize !== undefined && !(Number.isInteger(chunkSize) && chunkSize > 0)) {
      throw new IchorError(`OCI client: chunkSize must be a positive integer, got ${chunkSize}`)
    }
    const what = `upload the blob ${digest} to ${repo}`
    return this.withRetry(what, async () => {
      // Checked on every try: a previous try may have completed although its answer was lost.
      if (await this.blobExistsOnce(repo, digest, what)) return {uploaded: false}
      const started = await this.send('POST', `/v2/${repo}/blobs/uploads/`)
      if (started.status !== 202) return this.fail(started, what, `repository ${repo}`)
      await drain(started)
      let location = this.uploadLocation(started, what)
      let body: Buffer | undefined = bytes
      if (chunkSize !== undefined) {
        for (let offset = 0; offset < bytes.length; offset += chunkSize) {
          const chunk = bytes.subarray(offset, Math.min(offset + chunkSize, bytes.length))
          const res = await this.send('PATCH', location, {
            body: chunk,
            headers: {
              'content-type': 'application/octet-stream',
              'content-range': `${offset}-${offset + chunk.length - 1}`,
            },
          })
          if (res.status !== 202) return this.fail(res, what, `upload session for ${repo}`)
          await drain(res)
          location = this.uploadLocation(res, what)
        }
        body = undefined
      }
      const close = new URL(location)
      close.searchParams.set('digest', digest)
      const done = await this.send('PUT', close.href, {
        body: body ?? Buffer.alloc(0),
        headers: {'content-type': 'application/octet-stream'},
      })
      if (done.status !== 201) return this.fail(done, what, `blob ${repo}@${digest}`)
      await drain(done)
      return {uploaded: true}
    })
  }

  /** Stores a manifest under a tag and returns the digest the registry computed (checked against ours). */
  async putManifest(repo: string, tag: string, bytes: Buffer, mediaType: string): Promise<string> {
    checkRepository(repo)
    checkReference(tag)
    const what = `store the manifest ${repo}:${tag}`
    const claimed = await this.withRetry(what, async () => {
      const res = await this.send('PUT', `/v2/${repo}/manifests/${tag}`, {body: bytes, headers: {'content-type': mediaType}})
      if (res.status !== 201) return this.fail(res, what, `manifest ${repo}:${tag}`)
      await drain(res)
      return res.headers.get('docker-content-digest')
    })
    const digest = sha256Digest(bytes)
    if (claimed && claimed !== digest) throw digestMismatch(this.endpoint, `manifest ${repo}:${tag}`, digest, claimed, 'the registry')
    return digest
  }

  private async blobExistsOnce(repo: string, digest: string, what: string): Promise<boolean> {
    const res = await this.send('HEAD', `/v2/${repo}/blobs/${digest}`, {}, 'blob')
    await drain(res) // a HEAD answer has no body to explain an error with
    if (res.status === 200) return true
    if (res.status === 404) return false
    return this.fail(res, what, `blob ${repo}@${digest}`)
  }

  private uploadLocation(res: Response, what: string): string {
    const location = res.headers.get('location')
    if (!location) throw new IchorError(`registry ${this.endpoint} did not say where to upload (no Location header) while trying to ${what}`)
    // The Location may be relative to the endpoint.
    let url: URL
    try {
      url = new URL(location, `${this.endpoint}/`)
    } catch {
      throw new IchorError(
        `registry ${this.endpoint} gave an upload Location that is not a URL (${JSON.stringify(location.slice(0, 200))}) while trying to ${what}`,
      )
    }
    // The spec lets a registry offload uploads elsewhere; ichor sends its bundles to the registry it was given, only.
    if (url.origin !== this.origin) {
      throw new IchorError(
        `registry ${this.endpoint} told ichor to upload to another host, ${url.host} (Location header), while trying to ${what}; ichor uploads only to the registry it was given`,
      )
    }
    return url.href
  }

  /**
   * One HTTP exchange. 5xx and dropped connections become TransientFailure; other statuses are the caller's.
   * Redirects are followed here, by hand, as `policy` allows: writes never, blob reads anywhere
   * (with no credential header on a hop to another origin), other reads within the registry's origin.
   */
  private async send(
    method: string,
    pathOrUrl: string,
    init: {body?: Buffer; headers?: Record<string, string>} = {},
    policy: RedirectPolicy = 'same-origin',
  ): Promise<Response> {
    let url = pathOrUrl.startsWith('/') ? `${this.endpoint}${pathOrUrl}` : pathOrUrl
    let headers = init.headers
    const deadline: Deadline = {
      started: performance.now(),
      request: `${method} ${new URL(url).pathname}`,
      signal: this.timeoutMs > 0 ? AbortSignal.timeout(this.timeoutMs) : undefined,
    }
    const {signal} = deadline
    for (let hop = 0; ; hop++) {
      let res: Response
      try {
        // Buffer is a valid body; the DOM typings only reject its ArrayBufferLike backing store.
        // Off the registry's origin (a blob redirect) the tunnel's fetch would still dial the tunnel.
        const send = new URL(url).origin === this.origin ? this.fetch : fetch
        res = await send(url, {method, body: init.body as RequestInit['body'], headers, redirect: 'manual', signal})
      } catch (error) {
        if (signal?.aborted) throw this.timeoutError(deadline)
        throw this.connectionError(error)
      }
      this.deadlines.set(res, deadline)
      if (res.status >= 500) {
        const detail = await errorDetail(res)
        throw new TransientFailure(`HTTP ${res.status} for ${method} ${new URL(url).pathname}${detail}`)
      }
      if (![301, 302, 303, 307, 308].includes(res.status)) return res
      await drain(res)
      const location = res.headers.get('location')
      let target: URL | undefined
      try {
        target = location ? new URL(location, url) : undefined
      } catch {
        target = undefined
      }
      const path = new URL(url).pathname
      const refuse = (why: string): never => {
        throw new IchorError(
          `registry ${this.endpoint} redirected ${method} ${path} (HTTP ${res.status}) to ${target?.host ?? JSON.stringify(location)}: ${why}`,
        )
      }
      if (!target || (target.protocol !== 'http:' && target.protocol !== 'https:')) refuse('not an http(s) URL')
      if (method !== 'GET' && method !== 'HEAD') refuse('ichor does not follow redirects of uploads; the registry must accept them itself')
      if (target!.origin !== this.origin && policy !== 'blob') refuse("only blob downloads may leave the registry's host (OCI distribution spec)")
      if (hop >= MAX_REDIRECTS) refuse(`more than ${MAX_REDIRECTS} redirects`)
      if (target!.origin !== new URL(url).origin) headers = withoutCredentials(headers)
      url = target!.href
    }
  }

  /**
   * Reads a body of at most `max` bytes, refusing a larger declared Content-Length before
   * reading and stopping one chunk past the cap otherwise. Never retried: the answer is not
   * going to shrink.
   */
  private async readCapped(res: Response, max: number, subject: string, onChunk?: (chunk: Uint8Array) => void): Promise<Buffer> {
    const tooLarge = (size: string) => {
      const shown = max >= 1024 * 1024 ? `${max / 1024 / 1024} MiB` : `${max} bytes`
      return new IchorError(`registry ${this.endpoint} sent ${size} for ${subject}; at most ${shown} are read, so ichor stopped (not retried)`)
    }
    const declared = Number(res.headers.get('content-length') ?? Number.NaN)
    if (Number.isFinite(declared) && declared > max) {
      await drain(res)
      throw tooLarge(`a body of ${declared} bytes (Content-Length)`)
    }
    const reader = res.body?.getReader()
    if (!reader) return Buffer.alloc(0)
    const chunks: Uint8Array[] = []
    let total = 0
    const deadline = this.deadlines.get(res)
    for (;;) {
      let chunk: ReadableStreamReadResult<Uint8Array>
      try {
        chunk = await reader.read()
      } catch (error) {
        if (deadline?.signal?.aborted) throw this.timeoutError(deadline)
        throw error
      }
      const {done, value} = chunk
      if (done) break
      total += value.byteLength
      if (total > max) {
        await reader.cancel().catch(() => undefined)
        throw tooLarge(`more than ${max} bytes`)
      }
      onChunk?.(value)
      chunks.push(value)
    }
    return Buffer.concat(chunks, total)
  }

  /** In kubectl's words, with the time really waited (the timer fires late on a busy machine). */
  private timeoutError(deadline: Deadline): IchorError {
    return new IchorError(
      `Unable to connect to the registry ${new URL(this.endpoint).host}: request timed out after ${formatElapsed(performance.now() - deadline.started)} (${deadline.request})`,
      {hint: "check that Kokumi's registry is up (or that --registry-endpoint points at it), or give it more time with --request-timeout"},
    )
  }

  private connectionError(error: unknown): Error {
    const codes = errorCodes(error)
    if (codes.has('ECONNREFUSED') || codes.has('ENOTFOUND') || codes.has('EAI_AGAIN') || codes.has('EHOSTUNREACH') || codes.has('ENETUNREACH')) {
      const why = codes.has('ECONNREFUSED') ? 'connection refused' : [...codes].join(', ')
      return new IchorError(
        `cannot reach the OCI registry at ${this.endpoint} (${why}): is the port-forward to the registry running, or does --registry-endpoint point at it?`,
        {
          cause: error,
          hint: "Kokumi's registry is a ClusterIP Service: start a port-forward to kokumi/kokumi-registry port 5000 (ichor does this itself unless told otherwise), or pass --registry-endpoint with an address that reaches it.",
        },
      )
    }
    const reason = `${(error as Error)?.message ?? String(error)}${codes.size ? ` (${[...codes].join(', ')})` : ''}`
    // Resets, timeouts, half-closed sockets: worth another try.
    if (isDroppedConnection(error)) return new TransientFailure(reason)
    return new IchorError(`cannot talk to the OCI registry at ${this.endpoint}: ${reason}`, {cause: error})
  }

  private async withRetry<T>(what: string, op: () => Promise<T>): Promise<T> {
    let last: TransientFailure | undefined
    for (let attempt = 0; attempt < this.retry.attempts; attempt++) {
      if (attempt > 0) await this.sleep(Math.min(this.retry.baseDelayMs * 2 ** (attempt - 1), this.retry.maxDelayMs))
      try {
        return await op()
      } catch (error) {
        if (error instanceof TransientFailure) {
          last = error
          continue
        }
        // A body read that fails mid-way surfaces here, not in send().
        if (!(error instanceof IchorError) && isDroppedConnection(error)) {
          last = new TransientFailure(String((error as Error).message ?? error))
          continue
        }
        throw error
      }
    }
    const tries = this.retry.attempts
    throw new IchorError(`registry ${this.endpoint} failed to ${what} after ${tries} ${tries === 1 ? 'try' : 'tries'}: ${last?.message}`, {cause: last})
  }

  private async fail(res: Response, what: string, subject: string): Promise<never> {
    const detail = await errorDetail(res)
    if (res.status === 401 || res.status === 403) {
      throw new IchorError(
        `registry ${this.endpoint} refused to let ichor ${what} (HTTP ${res.status}${detail}): it needs credentials, which ichor does not have.`,
        {hint: "ichor publishes only to an anonymous registry such as Kokumi's in-cluster one; check that --registry-endpoint points at it."},
      )
    }
    if (res.status === 404) throw new IchorError(`registry ${this.endpoint}: ${subject} not found (HTTP 404${detail})`)
    if (/DIGEST_INVALID/.test(detail)) throw new IchorError(`registry ${this.endpoint} rejected ${subject}: digest mismatch (HTTP ${res.status}${detail})`)
    throw new IchorError(`registry ${this.endpoint} answered HTTP ${res.status} when trying to ${what}${detail}`)
  }
}

function normaliseEndpoint(endpoint: string): string {
  let url: URL
  try {
    url = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(endpoint) ? endpoint : `http://${endpoint}`)
  } catch {
    throw new IchorError(`invalid registry endpoint ${JSON.stringify(endpoint)}: expected http://HOST:PORT`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new IchorError(`invalid registry endpoint ${JSON.stringify(endpoint)}: only http:// and https:// are supported`)
  }
  if (url.search || url.hash || url.username) throw new IchorError(`invalid registry endpoint ${JSON.stringify(endpoint)}: give only scheme, host and port`)
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`
}

function checkRepository(repo: string): void {
  if (!REPOSITORY.test(repo) || repo.length > 255) {
    throw new IchorError(`invalid OCI repository name ${JSON.stringify(repo)}: lowercase letters, digits and . _ - separators, / between path parts`)
  }
}

function checkReference(ref: string): void {
  if (!TAG.test(ref) && !DIGEST.test(ref)) throw new IchorError(`invalid OCI reference ${JSON.stringify(ref)}: expected a tag or sha256:<64 hex>`)
}

function checkDigest(digest: string): void {
  if (!DIGEST.test(digest)) throw new IchorError(`invalid digest ${JSON.stringify(digest)}: expected sha256:<64 hex>`)
}

function digestMismatch(endpoint: string, subject: string, expected: string, actual: string, by = 'the bytes received'): IchorError {
  return new IchorError(`digest mismatch for ${subject} at ${endpoint}: expected ${expected}, ${by} hash to ${actual}`)
}

function mediaTypeOf(res: Response): string {
  return (res.headers.get('content-type') ?? '').split(';')[0]!.trim()
}

/** Frees the connection; a body we do not read would otherwise hold it. */
async function drain(res: Response): Promise<void> {
  try {
    await res.body?.cancel()
  } catch {
    // Nothing left to free.
  }
}

/** The headers to send on a hop to another origin: nothing that identifies the caller. */
function withoutCredentials(headers: Record<string, string> | undefined): Record<string, string> | undefined {
  if (!headers) return headers
  return Object.fromEntries(Object.entries(headers).filter(([k]) => !['authorization', 'cookie', 'proxy-authorization'].includes(k.toLowerCase())))
}

/** The first `max` bytes of a body, then the connection is let go. */
async function readPrefix(res: Response, max: number): Promise<string> {
  const reader = res.body?.getReader()
  if (!reader) return ''
  const chunks: Uint8Array[] = []
  let total = 0
  try {
    while (total < max) {
      const {done, value} = await reader.read()
      if (done) break
      chunks.push(value)
      total += value.byteLength
    }
  } finally {
    await reader.cancel().catch(() => undefined)
  }
  return Buffer.concat(chunks).subarray(0, max).toString('utf8')
}

/** `: CODE message` from an OCI error body, or a short text excerpt; at most a few KiB are read. */
async function errorDetail(res: Response): Promise<string> {
  let text = ''
  try {
    text = await readPrefix(res, MAX_ERROR_BODY_BYTES)
  } catch {
    return ''
  }
  if (!text) return ''
  try {
    const parsed = JSON.parse(text) as {errors?: {code?: string; message?: string}[]}
    const errors = parsed.errors?.map((e) => [e.code, e.message].filter(Boolean).join(' ')).filter(Boolean)
    if (errors?.length) return `: ${errors.join('; ')}`
  } catch {
    // Not JSON: fall through to the text.
  }
  return `: ${text.trim().slice(0, 200)}`
}

function errorCodes(error: unknown): Set<string> {
  const codes = new Set<string>()
  const visit = (e: unknown, depth: number) => {
    if (!e || typeof e !== 'object' || depth > 4) return
    const {code, name, cause, errors} = e as {code?: unknown; name?: unknown; cause?: unknown; errors?: unknown}
    if (typeof code === 'string') codes.add(code)
    if (name === 'TimeoutError') codes.add('TIMEOUT')
    visit(cause, depth + 1)
    if (Array.isArray(errors)) for (const inner of errors) visit(inner, depth + 1)
  }
  visit(error, 0)
  return codes
}

function isDroppedConnection(error: unknown): boolean {
  const codes = errorCodes(error)
  return (
    [
      'ECONNRESET',
      'EPIPE',
      'UND_ERR_SOCKET',
      'UND_ERR_CLOSED',
      'TIMEOUT',
      'ETIMEDOUT',
      'UND_ERR_CONNECT_TIMEOUT',
      'UND_ERR_HEADERS_TIMEOUT',
      'UND_ERR_BODY_TIMEOUT',
    ].some((c) => codes.has(c)) ||
    (error instanceof TypeError && error.message === 'terminated')
  )
}
