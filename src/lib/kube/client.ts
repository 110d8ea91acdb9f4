// Connection to the Kubernetes API with the operator's kubeconfig, resolved like kubectl
// (--kubeconfig, then KUBECONFIG, then ~/.kube/config; see kubeconfig.ts).
//
// Every call goes through `kube.request`, which sends and returns raw JSON. client-node's
// typed serializer drops keys it has no model field for, such as
// `x-kubernetes-preserve-unknown-fields` in a CRD schema, so it must not sit between a
// manifest and the API server; and not importing client-node saves the CLI about half a
// second and 70 MB on every run (it is loaded only for auth providers and port-forwards).
import http from 'node:http'
import https from 'node:https'
import {IchorError} from '../errors/errors.js'
import {requestAuth} from './credentials.js'
import {describeKubeconfigSource, type Kubeconfig, type KubeconfigOptions, loadKubeconfig} from './kubeconfig.js'
import {announceConnecting, RequestTimeoutError, requestSettings} from './request-settings.js'

export interface ConnectOptions extends KubeconfigOptions {
  /** Ask the server for its version before returning, so an unreachable server fails here. Default true. */
  probe?: boolean
  /** Per request (connect, headers and body), 0 for none. Default: `--request-timeout` (request-settings.ts), 30 s. */
  requestTimeoutMs?: number
}

export interface ApiResource {
  /** Plural resource name used in URLs (`deployments`). */
  plural: string
  namespaced: boolean
  kind: string
}

export interface RawResponse<T> {
  status: number
  headers: http.IncomingHttpHeaders
  body: T
}

/** The methods that carry an object (or a patch of one) the API server decodes. */
const WRITES = new Set(['POST', 'PUT', 'PATCH'])

export interface RequestOptions {
  body?: unknown
  /** Defaults to application/json when a body is given. */
  contentType?: string
  query?: Record<string, string | number | boolean | undefined>
  /** Defaults to application/json (a PartialObjectMetadata media type asks for metadata only). */
  accept?: string
}

export interface Kube {
  /** The kubeconfig context in use, its cluster and user entries. */
  kubeconfig: Kubeconfig
  /** Name of the context in use. */
  context: string
  /** The API server URL, for messages. */
  server: string
  /** `gitVersion` from /version when the connection was probed. */
  serverVersion?: string
  /** Puts this connection's TLS material and auth headers onto request options (e.g. for a WebSocket). */
  authorize(options: https.RequestOptions): Promise<void>
  /** One JSON request; a non-2xx answer throws KubeApiError, a transport failure IchorError. */
  request<T = unknown>(method: string, path: string, options?: RequestOptions): Promise<T>
  /** Like `request`, also returning status and headers. */
  requestRaw<T = unknown>(method: string, path: string, options?: RequestOptions): Promise<RawResponse<T>>
  /** Discovery: the resource serving `kind` in `apiVersion`; undefined when the server does not serve it. */
  resourceFor(apiVersion: string, kind: string): Promise<ApiResource | undefined>
}

/** The `Status` object the API server returns with an error. */
export interface KubeStatus {
  kind?: 'Status'
  status?: string
  message?: string
  reason?: string
  code?: number
  details?: {
    name?: string
    group?: string
    kind?: string
    causes?: Array<{reason?: string; message?: string; field?: string}>
    retryAfterSeconds?: number
  }
}

/** A non-2xx answer of the API server. `code` is the HTTP status; `reason` e.g. NotFound, AlreadyExists, Conflict. */
export class KubeApiError extends IchorError {
  readonly code: number
  readonly reason: string
  readonly status: KubeStatus
  constructor(method: string, path: string, code: number, status: KubeStatus) {
    super(`${method} ${path}: ${status.message ?? 'no message'} (HTTP ${code}${status.reason ? ` ${status.reason}` : ''})`)
    this.name = 'KubeApiError'
    this.code = code
    this.reason = status.reason ?? ''
    this.status = status
  }
}

/** The API server could not be reached (connection refused, DNS, TLS, timeout). */
export class KubeUnreachableError extends IchorError {
  /** The server URL and context tried, and Node's error code (`ECONNREFUSED`) when there is one. */
  readonly server?: string
  readonly context?: string
  readonly errno?: string
  constructor(message: string, options: {hint?: string; cause?: unknown; server?: string; context?: string; errno?: string}) {
    super(message, options)
    this.name = 'KubeUnreachableError'
    this.server = options.server
    this.context = options.context
    this.errno = options.errno
  }
}

/**
 * The server answered, but not as a Kubernetes API server: a web service of another kind behind
 * the kubeconfig's URL. Refused where ichor first reads the API (/version, discovery), so no
 * command reads fields of an answer that does not have them.
 */
export class KubeNotApiServerError extends IchorError {
  readonly server: string
  readonly context: string
  constructor(server: string, context: string, path: string, body: unknown) {
    const shown = (typeof body === 'string' ? body : (JSON.stringify(body) ?? String(body))).replace(/\s+/g, ' ').trim()
    super(
      `${server} (context "${context}") does not answer as a Kubernetes API server: GET ${path} gave ${shown ? (shown.length > 80 ? `${shown.slice(0, 80)}…` : shown) : 'an empty answer'}`,
      {hint: "check that the kubeconfig points at the cluster's API server (kubectl version)"},
    )
    this.name = 'KubeNotApiServerError'
    this.server = server
    this.context = context
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

export function isNotFound(err: unknown): boolean {
  return err instanceof KubeApiError && err.code === 404
}

export function isAlreadyExists(err: unknown): boolean {
  return err instanceof KubeApiError && err.code === 409 && err.reason === 'AlreadyExists'
}

/** 409 of an update whose resourceVersion is stale (optimistic concurrency lost). */
export function isConflict(err: unknown): boolean {
  return err instanceof KubeApiError && err.code === 409 && err.reason === 'Conflict'
}

/**
 * Sent with every request, as kubectl sends `kubectl/VERSION (OS/ARCH)`: the API server's audit
 * log and its request metrics then name ichor (Node's http sends no User-Agent at all).
 */
export const USER_AGENT = `ichor (${process.platform}/${process.arch}) node/${process.version}`

export async function connectKube(options: ConnectOptions = {}): Promise<Kube> {
  const config = loadKubeconfig(options)
  if (!config.cluster?.server) {
    throw new IchorError(`kubeconfig context "${config.context}" names no cluster with a server URL (${describeKubeconfigSource(options)})`)
  }
  if (!config.user) {
    throw new IchorError(`kubeconfig context "${config.context}" names no user (${describeKubeconfigSource(options)})`)
  }
  const kube = makeKube(config, options.requestTimeoutMs ?? requestSettings().timeoutMs)
  if (options.probe ?? true) {
    const done = announceConnecting(kube.server, kube.context)
    try {
      // version.Info of k8s.io/apimachinery: every API server sends gitVersion.
      const version = await kube.request<unknown>('GET', '/version')
      if (!isObject(version) || typeof version.gitVersion !== 'string') throw new KubeNotApiServerError(kube.server, kube.context, '/version', version)
      kube.serverVersion = version.gitVersion
    } finally {
      done()
    }
  }
  return kube
}

function makeKube(config: Kubeconfig, timeoutMs: number): Kube {
  const {context} = config
  const server = config.cluster!.server!
  const discovery = new Map<string, Promise<ApiResource[] | undefined>>()
  const base = new URL(server)
  const auth = requestAuth(config)

  async function authorize(options: https.RequestOptions): Promise<void> {
    try {
      await auth.apply(options)
    } catch (error) {
      // Certificates that cannot be read, a failing exec credential plugin, ...
      throw new IchorError(`cannot set up credentials of kubeconfig context "${context}": ${(error as Error).message}`, {
        hint: (error as IchorError).hint,
        cause: error,
      })
    }
  }

  /**
   * The API server answers 429 while it is busy or (re)initializing storage for a CRD
   * just created, with a Retry-After: wait as it says (bounded) and ask again.
   * A 401 with credentials that can be fetched again (exec plugin, token file) is asked
   * again once with fresh ones, as client-go does.
   */
  async function requestRaw<T>(method: string, path: string, options: RequestOptions = {}): Promise<RawResponse<T>> {
    let refreshed = false
    for (let attempt = 1; ; attempt++) {
      try {
        return await requestOnce<T>(method, path, options)
      } catch (error) {
        if (error instanceof KubeApiError && error.code === 401 && !refreshed && auth.invalidate()) {
          refreshed = true
          continue
        }
        if (!(error instanceof KubeApiError) || error.code !== 429 || attempt >= 8) throw error
        const after = Number(error.status.details?.retryAfterSeconds ?? 1)
        await new Promise((r) => setTimeout(r, Math.min(Math.max(after, 0.2), 5) * 1000))
      }
    }
  }

  async function requestOnce<T>(method: string, path: string, options: RequestOptions = {}): Promise<RawResponse<T>> {
    const url = new URL(base.pathname.replace(/\/$/, '') + path, base)
    for (const [k, v] of Object.entries(options.query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v))
    // Every write names a field the server does not know as an error instead of dropping it.
    if (options.body !== undefined && WRITES.has(method) && !url.searchParams.has('fieldValidation')) url.searchParams.set('fieldValidation', 'Strict')
    const payload = options.body === undefined ? undefined : Buffer.from(JSON.stringify(options.body))
    const reqOptions: https.RequestOptions = {
      method,
      headers: {
        'User-Agent': USER_AGENT,
        Accept: options.accept ?? 'application/json',
        ...(payload ? {'Content-Type': options.contentType ?? 'application/json', 'Content-Length': payload.length} : {}),
      },
    }
    await authorize(reqOptions)
    const transport = url.protocol === 'http:' ? http : https
    const {status, headers, text} = await new Promise<{status: number; headers: http.IncomingHttpHeaders; text: string}>((resolve, reject) => {
      const started = performance.now()
      // A deadline on the whole exchange, as kubectl's --request-timeout (client-go sets
      // http.Client.Timeout, which covers reading the body too): a socket idle timeout would let
      // a server that trickles bytes hold the command forever.
      const timer = timeoutMs > 0 ? setTimeout(() => req.destroy(new RequestTimeoutError(performance.now() - started)), timeoutMs) : undefined
      const req = transport.request(url, reqOptions, (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () => {
          clearTimeout(timer)
          resolve({status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8')})
        })
        res.on('error', reject)
      })
      req.on('error', (error) => {
        clearTimeout(timer)
        reject(error)
      })
      req.end(payload)
    }).catch((error: NodeJS.ErrnoException) => {
      const timedOut = error instanceof RequestTimeoutError
      throw new KubeUnreachableError(
        `cannot reach the Kubernetes API server ${server} (context "${context}"): ${timedOut ? error.message : `${error.code ?? error.message}${error.code ? ` (${error.message})` : ''}`}`,
        {
          hint: timedOut
            ? 'check that the cluster is up and that the kubeconfig points at it, or give a slow API server more time with --request-timeout'
            : 'check that the cluster is up and that the kubeconfig points at it',
          cause: error,
          server: String(server),
          context,
          errno: error.code,
        },
      )
    })
    let body: unknown = text
    if (text && (headers['content-type'] ?? '').includes('json')) {
      try {
        body = JSON.parse(text)
      } catch {
        // keep the text; the status code decides
      }
    }
    if (status < 200 || status > 299) {
      const statusBody: KubeStatus = typeof body === 'object' && body !== null ? (body as KubeStatus) : {message: text.trim() || undefined}
      if (status === 401 || status === 403) {
        throw new KubeApiError(method, path, status, {
          ...statusBody,
          message: `${statusBody.message ?? 'access denied'} — the credentials of context "${context}" on ${server} were refused or lack this permission`,
        })
      }
      throw new KubeApiError(method, path, status, statusBody)
    }
    return {status, headers, body: body as T}
  }

  async function groupResources(apiVersion: string, refresh: boolean): Promise<ApiResource[] | undefined> {
    if (refresh) discovery.delete(apiVersion)
    let entry = discovery.get(apiVersion)
    if (!entry) {
      const path = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`
      entry = requestRaw<unknown>('GET', path)
        .then((r) => {
          // An APIResourceList (k8s.io/apimachinery meta/v1): resources, each with name, kind and namespaced.
          const list = isObject(r.body) ? r.body.resources : undefined
          if (!Array.isArray(list) || !list.every((res) => isObject(res) && typeof res.name === 'string' && typeof res.kind === 'string'))
            throw new KubeNotApiServerError(server, context, path, r.body)
          return (list as Array<{name: string; namespaced?: unknown; kind: string}>)
            .filter((res) => !res.name.includes('/')) // subresources such as deployments/status
            .map((res) => ({plural: res.name, namespaced: res.namespaced === true, kind: res.kind}))
        })
        .catch((error) => {
          if (isNotFound(error)) return undefined
          throw error
        })
      discovery.set(apiVersion, entry)
      // A failed or empty lookup is not cached: the group may appear when a CRD is established.
      entry.then(
        (r) => r ?? discovery.delete(apiVersion),
        () => discovery.delete(apiVersion),
      )
    }
    return entry
  }

  const kube: Kube = {
    kubeconfig: config,
    context,
    server,
    authorize,
    request: async (method, path, options) => (await requestRaw(method, path, options)).body as never,
    requestRaw,
    async resourceFor(apiVersion, kind) {
      let found = (await groupResources(apiVersion, false))?.find((r) => r.kind === kind)
      // A kind missing from a cached list may belong to a CRD created since: ask again once.
      if (!found) found = (await groupResources(apiVersion, true))?.find((r) => r.kind === kind)
      return found
    },
  }
  return kube
}
