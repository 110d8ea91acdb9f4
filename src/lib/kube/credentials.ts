// TLS and authentication of requests to the API server from a kubeconfig entry, as
// kubectl does it: CA, client certificate and key (file or data), insecure-skip-tls-verify,
// tls-server-name, bearer token (inline or tokenFile), basic auth, impersonation, and
// exec credential plugins (client.authentication.k8s.io v1 and v1beta1).
//
// `auth-provider` (oidc, gcp, azure) and `proxy-url` are left to client-node, imported
// only for such a connection, so every other user never pays for loading it.
import {readFileSync} from 'node:fs'
import http from 'node:http'
import https from 'node:https'
import {createSecureContext, type SecureContext} from 'node:tls'
import {IchorError} from '../errors/errors.js'
import {describeMiss, lookPath} from '../exec/resolve.js'
import {runProcess} from '../exec/run.js'
import type {ExecPluginConfig, Kubeconfig, KubeconfigCluster} from './kubeconfig.js'

export interface RequestAuth {
  /** Puts TLS material, the agent and auth headers onto the options of one request. */
  apply(options: https.RequestOptions): Promise<void>
  /**
   * After a 401: forgets credentials that may have changed since (plugin output, token
   * file), so the next `apply` fetches them again. True when retrying can help.
   */
  invalidate(): boolean
}

/** A token file is read again at most this often, like client-go's cached file token source. */
const TOKEN_FILE_TTL_MS = 60_000

export function requestAuth(config: Kubeconfig): RequestAuth {
  const cluster = config.cluster
  const user = config.user
  if (!cluster?.server || !user) throw new IchorError(`kubeconfig context "${config.context}" has no cluster server or no user (${config.source})`)
  if (user.authProvider || cluster.proxyUrl) return clientNodeAuth(config)

  const server = new URL(cluster.server)
  const plainHttp = server.protocol === 'http:'
  let tokenFromFile: {token: string; readAt: number} | undefined
  let agent: {identity: string; agent: http.Agent} | undefined

  function bearerToken(): string | undefined {
    if (user!.tokenFile) {
      if (!tokenFromFile || Date.now() - tokenFromFile.readAt > TOKEN_FILE_TTL_MS) {
        try {
          tokenFromFile = {token: readFileSync(user!.tokenFile, 'utf8').trim(), readAt: Date.now()}
        } catch (error) {
          // client-go starts from the inline token and keeps the last one read when the file is unreadable.
          const fallback = tokenFromFile?.token ?? user!.token
          if (fallback === undefined) throw new Error(`cannot read tokenFile ${user!.tokenFile}: ${(error as Error).message}`)
          return fallback
        }
      }
      return tokenFromFile.token
    }
    return user!.token
  }

  return {
    async apply(options) {
      const headers = {...(options.headers as Record<string, string | string[] | number> | undefined)}
      let cert = bytes(user.clientCertificateData, user.clientCertificate, 'client-certificate')
      let key = bytes(user.clientKeyData, user.clientKey, 'client-key')
      // A static token wins over an exec plugin's, as in client-go's round trippers.
      let token = bearerToken()
      if (user.exec) {
        const credential = await execCredential(user.exec, cluster, user.name)
        token ??= credential.token
        if (credential.clientCertificateData) {
          cert = Buffer.from(credential.clientCertificateData)
          key = Buffer.from(credential.clientKeyData!)
        }
      }
      if (token) headers.Authorization = `Bearer ${token}`
      else if (user.username !== undefined) options.auth = `${user.username}:${user.password ?? ''}`
      if (user.impersonate) {
        const imp = user.impersonate
        if (imp.user) headers['Impersonate-User'] = imp.user
        if (imp.uid) headers['Impersonate-Uid'] = imp.uid
        if (imp.groups.length > 0) headers['Impersonate-Group'] = imp.groups
        for (const [k, v] of Object.entries(imp.extra)) headers[`Impersonate-Extra-${encodeURIComponent(k)}`] = v
      }
      options.headers = headers

      // Connections are kept open between requests (a command makes dozens): without
      // keep-alive each request was a new TCP connection, TLS handshake and secure context.
      // The agent unrefs idle sockets, so they never hold the process open.
      if (plainHttp) {
        agent ??= {identity: 'http', agent: new http.Agent({keepAlive: true})}
        options.agent = agent.agent
        return
      }
      const tls: https.AgentOptions = {}
      const ca = bytes(cluster.certificateAuthorityData, cluster.certificateAuthority, 'certificate-authority')
      if (ca) tls.ca = ca
      if (cert) tls.cert = cert
      if (key) tls.key = key
      if (cluster.insecureSkipTlsVerify) tls.rejectUnauthorized = false
      if (cluster.tlsServerName) tls.servername = cluster.tlsServerName
      Object.assign(options, tls)
      // One agent while the TLS material stays the same: its session cache makes later
      // handshakes cheap. A plugin's rotated client certificate gets a new one.
      const identity = [ca, cert, key].map((b) => b?.toString('base64') ?? '').join('|')
      if (agent?.identity !== identity) {
        // One secure context for all its connections (material that does not load fails at connect, as before).
        let secureContext: SecureContext | undefined
        try {
          secureContext = createSecureContext(tls)
        } catch {
          // left to fail at connect, with the TLS error there
        }
        agent = {identity, agent: new https.Agent({...tls, keepAlive: true, ...(secureContext ? {secureContext} : {})})}
      }
      options.agent = agent.agent
    },
    invalidate() {
      tokenFromFile = undefined
      if (user.exec) execCache.delete(execCacheKey(user.exec, cluster))
      return Boolean(user.exec || user.tokenFile)
    },
  }
}

/** Data (base64) wins over the file, as client-go's dataFromSliceOrFile. */
function bytes(data: string | undefined, file: string | undefined, field: string): Buffer | undefined {
  if (data) return Buffer.from(data, 'base64')
  if (!file) return undefined
  try {
    return readFileSync(file)
  } catch (error) {
    throw new Error(`cannot read ${field} ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`)
  }
}

// ---------------------------------------------------------------------------------------
// exec credential plugins

export interface ExecCredentialStatus {
  token?: string
  /** PEM, as the plugin prints it (not base64). */
  clientCertificateData?: string
  clientKeyData?: string
  /** Epoch ms; undefined when the plugin gave no expiry (then valid for the whole run). */
  expiresAt?: number
}

/** Per process, like client-go's cache: the same plugin and cluster run once until expiry. */
const execCache = new Map<string, Promise<ExecCredentialStatus>>()

function execCacheKey(exec: ExecPluginConfig, cluster: KubeconfigCluster): string {
  return JSON.stringify([exec, exec.provideClusterInfo ? clusterInfo(cluster) : null])
}

/** The plugin's credential, from the cache while it has not expired. */
async function execCredential(exec: ExecPluginConfig, cluster: KubeconfigCluster, userName: string): Promise<ExecCredentialStatus> {
  const key = execCacheKey(exec, cluster)
  const cached = execCache.get(key)
  if (cached) {
    const status = await cached.catch(() => undefined)
    if (status && (status.expiresAt === undefined || Date.now() < status.expiresAt)) return status
    if (execCache.get(key) !== cached) return execCredential(exec, cluster, userName) // another caller refreshed it
  }
  const running = runExecPlugin(exec, cluster, userName)
  execCache.set(key, running)
  running.catch(() => {
    if (execCache.get(key) === running) execCache.delete(key)
  })
  return running
}

/** The `spec.cluster` client-go hands to a plugin with provideClusterInfo. */
function clusterInfo(cluster: KubeconfigCluster): Record<string, unknown> {
  let caData = cluster.certificateAuthorityData
  if (!caData && cluster.certificateAuthority) {
    try {
      caData = readFileSync(cluster.certificateAuthority).toString('base64')
    } catch {
      // the request itself reports the unreadable CA
    }
  }
  return {
    server: cluster.server,
    ...(cluster.tlsServerName ? {'tls-server-name': cluster.tlsServerName} : {}),
    ...(cluster.insecureSkipTlsVerify ? {'insecure-skip-tls-verify': true} : {}),
    ...(caData ? {'certificate-authority-data': caData} : {}),
    ...(cluster.proxyUrl ? {'proxy-url': cluster.proxyUrl} : {}),
    ...(cluster.execExtension !== undefined ? {config: cluster.execExtension} : {}),
  }
}

async function runExecPlugin(exec: ExecPluginConfig, cluster: KubeconfigCluster, userName: string): Promise<ExecCredentialStatus> {
  const commandLine = [exec.command, ...exec.args].join(' ')
  const what = `exec credential plugin "${commandLine}" of kubeconfig user "${userName}"`
  const terminal = Boolean(process.stdin.isTTY)
  if (exec.interactiveMode === 'Always' && !terminal) {
    throw new IchorError(`${what} needs a terminal (interactiveMode: Always), and standard input is not one`)
  }
  const interactive = terminal && exec.interactiveMode !== 'Never'
  const info = {
    apiVersion: exec.apiVersion,
    kind: 'ExecCredential',
    spec: {interactive, ...(exec.provideClusterInfo ? {cluster: clusterInfo(cluster)} : {})},
  }
  const env = {...process.env, ...Object.fromEntries(exec.env.map((e) => [e.name, e.value])), KUBERNETES_EXEC_INFO: JSON.stringify(info)}

  // Found on disk first, with the lookup kubectl uses (Go's exec.LookPath on ichor's own
  // PATH): a missing plugin is reported without a failed spawn.
  const found = lookPath(exec.command)
  if (!found.found) {
    throw new IchorError(
      found.reason === 'not-found' && !found.path ? `${what} was not found (${exec.command})` : `${what} cannot be run ${describeMiss(found)}`,
      {
        hint: exec.installHint ?? 'install it or fix the command in the kubeconfig',
      },
    )
  }
  // An interactive plugin talks to the user on the terminal; otherwise its stderr goes into our error.
  const result = await runProcess(found.path, exec.args, {env, inheritStdinStderr: interactive, maxBuffer: 1024 * 1024}).catch(
    (error: NodeJS.ErrnoException) => {
      throw new IchorError(`${what} could not be started: ${error.code ?? error.message}`, {cause: error})
    },
  )
  if (result.overflowed) throw new IchorError(`${what} printed more than 1 MiB`)
  const {stdout, stderr} = result
  const code = result.exitCode ?? result.signal
  const lastLines = stderr.trim().split('\n').slice(-5).join('\n')
  if (code !== 0) throw new IchorError(`${what} exited with code ${code}${lastLines ? `: ${lastLines}` : ''}`)

  let credential: {
    apiVersion?: string
    kind?: string
    status?: {token?: string; clientCertificateData?: string; clientKeyData?: string; expirationTimestamp?: string}
  }
  try {
    credential = JSON.parse(stdout)
  } catch {
    // Never the output itself: it may hold the token, and the JSON parser quotes the input
    // in its message. kubectl likewise says only "decoding stdout" and the decoder's error.
    throw new IchorError(`${what} did not print an ExecCredential: decoding stdout: not valid JSON (${Buffer.byteLength(stdout)} bytes, not shown)`)
  }
  if (credential?.kind !== 'ExecCredential' || credential.apiVersion !== exec.apiVersion) {
    throw new IchorError(
      `${what} printed ${credential?.kind ?? 'no kind'} ${credential?.apiVersion ?? 'without apiVersion'}, expected ExecCredential ${exec.apiVersion}`,
    )
  }
  const status = credential.status
  if (!status) throw new IchorError(`${what} printed an ExecCredential without status`)
  const hasCert = Boolean(status.clientCertificateData)
  if (hasCert !== Boolean(status.clientKeyData)) {
    throw new IchorError(`${what} printed ${hasCert ? 'clientCertificateData without clientKeyData' : 'clientKeyData without clientCertificateData'}`)
  }
  if (!status.token && !hasCert) throw new IchorError(`${what} printed neither a token nor a client certificate and key`)
  let expiresAt: number | undefined
  if (status.expirationTimestamp) {
    expiresAt = Date.parse(status.expirationTimestamp)
    if (Number.isNaN(expiresAt)) throw new IchorError(`${what} printed an expirationTimestamp that is not a time: ${status.expirationTimestamp}`)
  }
  return {token: status.token || undefined, clientCertificateData: status.clientCertificateData, clientKeyData: status.clientKeyData, expiresAt}
}

// ---------------------------------------------------------------------------------------
// client-node, for what this module does not implement

function clientNodeAuth(config: Kubeconfig): RequestAuth {
  let kc: Promise<import('@kubernetes/client-node').KubeConfig> | undefined
  let agent: https.RequestOptions['agent']
  return {
    async apply(options) {
      kc ??= clientNodeKubeConfig(config)
      await (await kc).applyToHTTPSOptions(options)
      // client-node makes an agent per call; keep the first for its TLS session cache.
      agent ??= options.agent
      options.agent = agent
    },
    invalidate: () => false,
  }
}

/** A client-node KubeConfig holding only the selected context, loaded on first use. */
export async function clientNodeKubeConfig(config: Kubeconfig): Promise<import('@kubernetes/client-node').KubeConfig> {
  const {KubeConfig} = await import('@kubernetes/client-node')
  const kc = new KubeConfig()
  // client-node reads `token-file` where kubectl writes `tokenFile`.
  const document = {
    ...config.document,
    users: config.document.users.map((u) => ({...u, user: u.user.tokenFile ? {'token-file': u.user.tokenFile, ...u.user} : u.user})),
  }
  kc.loadFromString(JSON.stringify(document))
  return kc
}
