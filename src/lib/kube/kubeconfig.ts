// Reading the operator's kubeconfig the way kubectl does, without client-node (whose
// import alone costs about half a second and 70 MB): file choice (--kubeconfig, then the
// KUBECONFIG list merged first-wins, then ~/.kube/config), context choice, and the
// cluster and user entries that context names. Relative file paths resolve against the
// directory of the file that holds them, as kubectl's loader does; in-memory content
// resolves them against the working directory.
//
// Only reading happens here; src/lib/kube/credentials.ts turns the entries into TLS
// options and an Authorization header.
import {existsSync, readFileSync} from 'node:fs'
import {delimiter, dirname, isAbsolute, join, resolve, sep} from 'node:path'
import {parse} from 'yaml'
import {IchorError} from '../errors/errors.js'
import {homeDir} from '../fs/home.js'

export interface KubeconfigOptions {
  /** Path of the kubeconfig file (the `--kubeconfig` flag); wins over KUBECONFIG. */
  kubeconfig?: string
  /** Kubeconfig content, for callers that hold it in memory (e.g. fresh from talosctl). */
  kubeconfigYaml?: string
  /** Context to use instead of the kubeconfig's current-context (the `--context` flag). */
  context?: string
}

export interface KubeconfigCluster {
  name: string
  server?: string
  /** Absolute path of the CA bundle (`certificate-authority`). */
  certificateAuthority?: string
  /** Base64 PEM (`certificate-authority-data`); wins over the file, as in client-go. */
  certificateAuthorityData?: string
  insecureSkipTlsVerify: boolean
  tlsServerName?: string
  proxyUrl?: string
  /** The `client.authentication.k8s.io/exec` extension, handed to exec plugins that ask for cluster info. */
  execExtension?: unknown
}

export interface ExecPluginConfig {
  /** client.authentication.k8s.io/v1 or v1beta1. */
  apiVersion: string
  /** Absolute when the kubeconfig gave a path; a bare name is looked up on PATH. */
  command: string
  args: string[]
  env: Array<{name: string; value: string}>
  installHint?: string
  provideClusterInfo: boolean
  interactiveMode: 'Never' | 'IfAvailable' | 'Always'
}

export interface KubeconfigUser {
  name: string
  clientCertificate?: string
  clientCertificateData?: string
  clientKey?: string
  clientKeyData?: string
  token?: string
  /** Absolute path (`tokenFile`). */
  tokenFile?: string
  username?: string
  password?: string
  /** `as`, `as-uid`, `as-groups`, `as-user-extra`: sent as Impersonate-* headers. */
  impersonate?: {user?: string; uid?: string; groups: string[]; extra: Record<string, string[]>}
  exec?: ExecPluginConfig
  /** `auth-provider` (oidc, gcp, azure): handled by client-node, loaded only for such users. */
  authProvider?: {name: string; config?: Record<string, string>}
}

/** The kubeconfig as far as one connection needs it: the selected context and its entries. */
export interface Kubeconfig {
  /** Where it was read from, for messages (`--kubeconfig FILE`, `KUBECONFIG=...`, a path). */
  source: string
  /** The file(s) read, first wins; empty for in-memory content. */
  files: string[]
  context: string
  /** The context's default namespace, if any. */
  namespace?: string
  /** Names as the context gives them (the entries may be missing). */
  clusterName: string
  userName: string
  cluster?: KubeconfigCluster
  user?: KubeconfigUser
  /**
   * The selected context as one self-contained kubeconfig document (paths absolute),
   * for handing the same connection to client-node (auth providers, port-forward).
   */
  document: KubeconfigDocument
}

export interface KubeconfigDocument {
  apiVersion: 'v1'
  kind: 'Config'
  'current-context': string
  clusters: Array<{name: string; cluster: Record<string, unknown>}>
  users: Array<{name: string; user: Record<string, unknown>}>
  contexts: Array<{name: string; context: Record<string, unknown>}>
}

type Raw = Record<string, unknown>

/** One file's (or the merged) named entries; paths already absolute. */
interface Entries {
  currentContext?: string
  clusters: Map<string, Raw>
  users: Map<string, Raw>
  contexts: Map<string, Raw>
}

const NO_CONFIG_HINT = 'pass --kubeconfig FILE, set KUBECONFIG, or create ~/.kube/config (ichor init writes one into its state directory)'

/** Loads the kubeconfig the way kubectl chooses it and selects the context. */
export function loadKubeconfig(options: KubeconfigOptions = {}): Kubeconfig {
  const source = describeKubeconfigSource(options)
  let entries: Entries
  let files: string[] = []
  try {
    if (options.kubeconfigYaml !== undefined) {
      entries = readEntries(options.kubeconfigYaml, process.cwd())
    } else {
      if (options.kubeconfig) {
        if (!existsSync(options.kubeconfig)) {
          throw new IchorError(`kubeconfig ${options.kubeconfig} (from --kubeconfig) does not exist`, {hint: NO_CONFIG_HINT})
        }
        files = [options.kubeconfig]
      } else if (process.env.KUBECONFIG) {
        // kubectl skips missing files in KUBECONFIG and lets the first file that sets a
        // name (or current-context) win.
        files = [...new Set(process.env.KUBECONFIG.split(delimiter).filter((f) => f && existsSync(f)))]
        if (files.length === 0) {
          throw new IchorError(`none of the files in KUBECONFIG (${process.env.KUBECONFIG}) exists`, {hint: NO_CONFIG_HINT})
        }
      } else {
        const file = join(homeDir(), '.kube', 'config')
        if (!existsSync(file)) throw new IchorError('no kubeconfig found', {hint: NO_CONFIG_HINT})
        files = [file]
      }
      entries = files.map((file) => readEntries(readFileSync(file, 'utf8'), dirname(resolve(file)), file)).reduce(mergeFirstWins)
    }
  } catch (error) {
    if (error instanceof IchorError) throw error
    throw new IchorError(`cannot read kubeconfig (${source}): ${(error as Error).message}`, {cause: error})
  }

  let context: string
  if (options.context) {
    if (!entries.contexts.has(options.context)) {
      const known = [...entries.contexts.keys()]
      throw new IchorError(`kubeconfig has no context "${options.context}" (${source})`, {
        hint: known.length > 0 ? `known contexts: ${known.join(', ')}` : 'the kubeconfig defines no context',
      })
    }
    context = options.context
  } else if (!entries.currentContext) {
    throw new IchorError(`kubeconfig has no current-context (${source})`, {
      hint: 'pass --context NAME, or set one with `kubectl config use-context NAME`',
    })
  } else if (!entries.contexts.has(entries.currentContext)) {
    throw new IchorError(`kubeconfig's current-context "${entries.currentContext}" is not defined in it (${source})`)
  } else {
    context = entries.currentContext
  }

  const ctx = entries.contexts.get(context)!
  const clusterName = str(ctx.cluster) ?? ''
  const userName = str(ctx.user) ?? ''
  const rawCluster = entries.clusters.get(clusterName)
  const rawUser = entries.users.get(userName)
  try {
    return {
      source,
      files,
      context,
      namespace: str(ctx.namespace),
      clusterName,
      userName,
      cluster: rawCluster && clusterOf(clusterName, rawCluster),
      user: rawUser && userOf(userName, rawUser),
      document: {
        apiVersion: 'v1',
        kind: 'Config',
        'current-context': context,
        clusters: rawCluster ? [{name: clusterName, cluster: rawCluster}] : [],
        users: rawUser ? [{name: userName, user: rawUser}] : [],
        contexts: [{name: context, context: ctx}],
      },
    }
  } catch (error) {
    throw new IchorError(`cannot read kubeconfig (${source}): ${(error as Error).message}`, {cause: error})
  }
}

export function describeKubeconfigSource(options: KubeconfigOptions): string {
  if (options.kubeconfigYaml !== undefined) return 'kubeconfig given in memory'
  if (options.kubeconfig) return `--kubeconfig ${options.kubeconfig}`
  if (process.env.KUBECONFIG) return `KUBECONFIG=${process.env.KUBECONFIG}`
  return join(homeDir(), '.kube', 'config')
}

function readEntries(text: string, baseDir: string, file?: string): Entries {
  const doc = (parse(text) ?? {}) as Raw
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new Error(`${file ?? 'the kubeconfig'} is not a kubeconfig (a YAML mapping)`)
  const named = (key: 'clusters' | 'users' | 'contexts', resolvePaths: (entry: Raw) => Raw): Map<string, Raw> => {
    const out = new Map<string, Raw>()
    const list = doc[key] ?? []
    if (!Array.isArray(list)) throw new Error(`${key} is not a list`)
    list.forEach((item: unknown, i) => {
      const name = str((item as Raw | null)?.name)
      if (!name) throw new Error(`${key}[${i}].name missing`)
      const body = (item as Raw)[key.slice(0, -1)] ?? {}
      if (typeof body !== 'object' || Array.isArray(body)) throw new Error(`${key}[${i}].${key.slice(0, -1)} is not a mapping`)
      // Within one file the first entry of a name wins, as across files.
      if (!out.has(name)) out.set(name, resolvePaths({...(body as Raw)}))
    })
    return out
  }
  const abs = (p: unknown): unknown => (typeof p === 'string' && p !== '' && !isAbsolute(p) ? join(baseDir, p) : p)
  return {
    currentContext: str(doc['current-context']),
    clusters: named('clusters', (c) => {
      if (c['certificate-authority'] !== undefined) c['certificate-authority'] = abs(c['certificate-authority'])
      return c
    }),
    users: named('users', (u) => {
      for (const key of ['client-certificate', 'client-key', 'tokenFile']) if (u[key] !== undefined) u[key] = abs(u[key])
      // kubectl resolves an exec command only when it is a path, not a name looked up on PATH.
      const exec = u.exec as Raw | null | undefined
      if (exec && typeof exec.command === 'string' && exec.command.includes(sep)) u.exec = {...exec, command: abs(exec.command)}
      return u
    }),
    contexts: named('contexts', (c) => c),
  }
}

function mergeFirstWins(into: Entries, from: Entries): Entries {
  into.currentContext ||= from.currentContext
  for (const key of ['clusters', 'users', 'contexts'] as const) {
    for (const [name, entry] of from[key]) if (!into[key].has(name)) into[key].set(name, entry)
  }
  return into
}

function clusterOf(name: string, c: Raw): KubeconfigCluster {
  const extensions = Array.isArray(c.extensions) ? (c.extensions as Raw[]) : []
  const insecureSkipTlsVerify = bool(c['insecure-skip-tls-verify'], `clusters "${name}": insecure-skip-tls-verify`)
  const certificateAuthority = str(c['certificate-authority'])
  const certificateAuthorityData = str(c['certificate-authority-data'])
  // client-go's TLS config refuses this pair with these words, and so kubectl does: a CA
  // the operator gave must never be silently ignored.
  if (insecureSkipTlsVerify && (certificateAuthority || certificateAuthorityData)) {
    throw new Error(
      `clusters "${name}": specifying a root certificates file with the insecure flag is not allowed (remove insecure-skip-tls-verify, or certificate-authority${certificateAuthorityData ? '-data' : ''})`,
    )
  }
  return {
    name,
    server: str(c.server),
    certificateAuthority,
    certificateAuthorityData,
    insecureSkipTlsVerify,
    tlsServerName: str(c['tls-server-name']),
    proxyUrl: str(c['proxy-url']),
    execExtension: extensions.find((e) => e?.name === 'client.authentication.k8s.io/exec')?.extension,
  }
}

function userOf(name: string, u: Raw): KubeconfigUser {
  const groups = Array.isArray(u['as-groups']) ? (u['as-groups'] as unknown[]).map(String) : []
  const extra = Object.fromEntries(
    Object.entries((u['as-user-extra'] as Record<string, unknown> | undefined) ?? {}).map(([k, v]) => [k, Array.isArray(v) ? v.map(String) : [String(v)]]),
  )
  const impersonating = str(u.as) !== undefined || str(u['as-uid']) !== undefined || groups.length > 0 || Object.keys(extra).length > 0
  const authProvider = u['auth-provider'] as {name?: unknown; config?: Record<string, string>} | null | undefined
  return {
    name,
    clientCertificate: str(u['client-certificate']),
    clientCertificateData: str(u['client-certificate-data']),
    clientKey: str(u['client-key']),
    clientKeyData: str(u['client-key-data']),
    token: str(u.token),
    tokenFile: str(u.tokenFile),
    username: str(u.username),
    password: str(u.password),
    impersonate: impersonating ? {user: str(u.as), uid: str(u['as-uid']), groups, extra} : undefined,
    exec: u.exec ? execOf(name, u.exec as Raw) : undefined,
    authProvider: authProvider ? {name: String(authProvider.name ?? ''), config: authProvider.config ?? undefined} : undefined,
  }
}

const EXEC_API_VERSIONS = ['client.authentication.k8s.io/v1', 'client.authentication.k8s.io/v1beta1']

function execOf(user: string, e: Raw): ExecPluginConfig {
  const command = str(e.command)
  if (!command) throw new Error(`users "${user}": exec has no command`)
  const apiVersion = str(e.apiVersion) ?? ''
  if (!EXEC_API_VERSIONS.includes(apiVersion)) {
    throw new Error(`users "${user}": exec apiVersion "${apiVersion}" is not supported (use ${EXEC_API_VERSIONS.join(' or ')})`)
  }
  const mode = str(e.interactiveMode) ?? 'IfAvailable'
  if (mode !== 'Never' && mode !== 'IfAvailable' && mode !== 'Always') {
    throw new Error(`users "${user}": exec interactiveMode "${mode}" is not one of Never, IfAvailable, Always`)
  }
  // client-go requires interactiveMode from v1 on; v1beta1 defaults to IfAvailable.
  if (apiVersion.endsWith('/v1') && e.interactiveMode === undefined) {
    throw new Error(`users "${user}": exec interactiveMode must be set for ${apiVersion}`)
  }
  return {
    apiVersion,
    command,
    args: Array.isArray(e.args) ? (e.args as unknown[]).map(String) : [],
    env: Array.isArray(e.env) ? (e.env as Raw[]).map((v) => ({name: String(v?.name ?? ''), value: String(v?.value ?? '')})) : [],
    installHint: str(e.installHint),
    provideClusterInfo: bool(e.provideClusterInfo, `users "${user}": exec provideClusterInfo`),
    interactiveMode: mode,
  }
}

function str(v: unknown): string | undefined {
  if (v === undefined || v === null || v === '') return undefined
  return typeof v === 'string' ? v : String(v)
}

/**
 * A YAML boolean. kubectl decodes the kubeconfig into typed Go fields and refuses any
 * other type, the string "true" included ("ReadBool: expect t or f"); so does ichor,
 * rather than guess what a quoted value meant.
 */
function bool(v: unknown, field: string): boolean {
  if (v === undefined || v === null) return false
  if (typeof v === 'boolean') return v
  throw new Error(
    `${field} must be a boolean (true or false without quotes), got ${typeof v === 'string' ? `the string ${JSON.stringify(v)}` : JSON.stringify(v)}`,
  )
}
