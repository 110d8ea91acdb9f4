// One cluster session per command: the kubeconfig and context it was opened with, a Kube
// client made on first use, the registry endpoint (a tunnel or --registry-endpoint), the
// Lease, and close() that frees them all on every exit path, signals included.
import {existsSync} from 'node:fs'
import {join} from 'node:path'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import type {HelmTarget} from '../helm/release.js'
import {connectKube, KubeNotApiServerError, KubeUnreachableError, type Kube} from '../kube/client.js'
import {acquireLease, breakLease, type HeldLease} from '../kube/lease.js'
import {openRegistryEndpoint, type RegistryEndpoint} from '../kube/portforward.js'
import {OciClient} from '../oci/client.js'
import {openPrivateTempDir, writePrivateFileAtomic} from '../fs/private-files.js'
import {toYaml} from '../yaml/emit.js'
import {onInterrupt} from './interrupt.js'
import {once, type Once} from '../tasks/memo.js'

export interface SessionOptions {
  /** The command, as the Lease names its holder (`init`, `cni values set`). */
  command: string
  /** --kubeconfig: named by the operator, so it must be readable and its server must answer. */
  kubeconfig?: string
  /** --context: a context of that kubeconfig instead of its current-context. */
  context?: string
  /**
   * A kubeconfig ichor keeps itself (init's state directory), used when none was named:
   * until it exists and answers, the cluster simply is not there yet.
   */
  ownKubeconfig?: string
  /** --registry-endpoint: reach Kokumi's registry here instead of through a tunnel. */
  registryEndpoint?: string
  /** init --dry-run --output-dir: a plan is built on it, nothing may be contacted (the client is refused). */
  offline?: boolean
}

export class Session {
  /** Connected on first use; a failed connection is tried again by the next call. */
  private readonly client: Once<Kube> = once(() => {
    if (this.options.offline) return Promise.reject(new Error('the offline dry run contacts no cluster'))
    return connectKube({kubeconfig: this.kubeconfigPath, context: this.options.context}).catch((error: unknown) => {
      throw this.named ? namedClusterError(this.describe(), error) : error
    })
  })
  private readonly registryEndpoint: Once<RegistryEndpoint> = once(() =>
    this.kube().then((kube) => openRegistryEndpoint(kube, {override: this.options.registryEndpoint})),
  )
  private held?: HeldLease
  private readonly removeInterruptHandler: () => void
  private closed = false
  private helmKubeconfig?: {path: string; remove(): void}

  constructor(private readonly options: SessionOptions) {
    this.removeInterruptHandler = onInterrupt(() => this.close())
  }

  /** The kubeconfig file in use (helm gets the same), undefined for kubectl's default lookup. */
  get kubeconfigPath(): string | undefined {
    return this.options.kubeconfig ?? this.options.ownKubeconfig
  }

  get context(): string | undefined {
    return this.options.context
  }

  /** Did the operator name the cluster (then it must answer), or is it ichor's own kubeconfig? */
  private get named(): boolean {
    return this.options.kubeconfig !== undefined || this.options.ownKubeconfig === undefined
  }

  /** The client, connected (the server answered /version) on first use. */
  kube(): Promise<Kube> {
    return this.client()
  }

  /**
   * Whether the cluster answers. A cluster the operator named that does not is an error
   * (exit 1 when it does not answer, 2 when its kubeconfig cannot be used), never "no cluster yet"; ichor's own kubeconfig may not exist yet.
   */
  async clusterAnswers(): Promise<boolean> {
    if (!this.named && !existsSync(this.options.ownKubeconfig!)) return false
    try {
      await this.kube()
      return true
    } catch (error) {
      if (this.named) throw error
      return false
    }
  }

  /** The exact kubeconfig file and context helm must use: the ones this session talks to. */
  async helmTarget(): Promise<HelmTarget> {
    const kube = await this.kube()
    const files = this.kubeconfigPath ? [this.kubeconfigPath] : kube.kubeconfig.files
    if (files.length === 1) return {kubeconfig: files[0]!, kubeContext: kube.context}
    // helm reads one file: a KUBECONFIG list is handed on as the selected context alone, in
    // one self-contained document (kubectl config view --minify --flatten), private to this
    // session and removed with it. It holds credentials: 0600 in a 0700 folder.
    if (!this.helmKubeconfig) {
      const temp = openPrivateTempDir('ichor-helm-kubeconfig-')
      const path = join(temp.dir, 'kubeconfig')
      writePrivateFileAtomic(path, toYaml(kube.kubeconfig.document, {sortKeys: false}))
      this.helmKubeconfig = {path, remove: temp.remove}
    }
    return {kubeconfig: this.helmKubeconfig.path, kubeContext: kube.context}
  }

  /** Forget the client, e.g. once bootstrap wrote the kubeconfig the next call must read. */
  reconnect(): void {
    this.client.forget()
  }

  /** An OCI client for Kokumi's registry; the tunnel stays open until closeRegistry() or close(). */
  async registry(): Promise<OciClient> {
    const endpoint = await this.registryEndpoint()
    return new OciClient(endpoint.endpoint, {fetch: endpoint.fetch})
  }

  /** Whether a tunnel (or the --registry-endpoint client) is open or opening. */
  get registryOpen(): boolean {
    return this.registryEndpoint.held()
  }

  /** Opens the registry tunnel: a step's enter hook does, so that its probe only reads through it. */
  async openRegistry(): Promise<void> {
    await this.registryEndpoint()
  }

  async closeRegistry(): Promise<void> {
    await this.registryEndpoint.forget()?.then(
      (e) => e.close(),
      () => undefined,
    )
  }

  get lease(): HeldLease | undefined {
    return this.held
  }

  /** Takes the ichor-system Lease (once per session); --break-lock deletes a stale one first. */
  async takeLease(options: {breakLock?: boolean} = {}): Promise<HeldLease> {
    if (this.held && !this.held.lost) return this.held
    const kube = await this.kube()
    if (options.breakLock) await breakLease(kube)
    this.held = await acquireLease(kube, {command: this.options.command})
    return this.held
  }

  /** Before each change: the Lease, when held, must still be this command's (exit 3 otherwise). */
  async guard(): Promise<void> {
    await this.held?.verify()
  }

  /** Frees the tunnel and the Lease. Idempotent; never throws. */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.removeInterruptHandler()
    await this.closeRegistry()
    await this.held?.release()
    this.helmKubeconfig?.remove()
  }

  private describe(): string {
    const source = this.options.kubeconfig
      ? `--kubeconfig ${this.options.kubeconfig}`
      : process.env.KUBECONFIG
        ? `KUBECONFIG=${process.env.KUBECONFIG}`
        : '~/.kube/config'
    return this.options.context ? `${source} --context ${this.options.context}` : source
  }
}

function namedClusterError(source: string, error: unknown): IchorError {
  if (error instanceof KubeUnreachableError) return unreachableError(source, error)
  // Something answers there, but not Kubernetes: not bad input either (exit 1).
  if (error instanceof KubeNotApiServerError) return new IchorError(`${error.message} (${source})`, {hint: error.hint, cause: error})
  const message = error instanceof Error ? error.message : String(error)
  return new IchorError(`the cluster of ${source} cannot be used: ${message}`, {
    exitCode: EXIT.usage,
    hint: error instanceof IchorError && error.hint ? error.hint : 'check the kubeconfig and context, and that the API server answers (kubectl version)',
    cause: error,
  })
}

/**
 * A cluster that does not answer is not bad input: exit 1, in kubectl's words (k8s.io/kubectl
 * v0.36.3 pkg/cmd/util/helpers.go, standardErrorMessage), naming where the server came from.
 */
function unreachableError(source: string, error: KubeUnreachableError): IchorError {
  let host = error.server ?? 'the API server'
  try {
    host = new URL(host).host
  } catch {
    // keep the text as given
  }
  const where = `${source}${error.context ? `, context "${error.context}"` : ''}`
  const cause = error.cause instanceof Error ? error.cause.message : error.message
  const message =
    error.errno === 'ECONNREFUSED'
      ? `The connection to the server ${host} was refused - did you specify the right host or port? (${where})`
      : `Unable to connect to the server ${host}: ${cause} (${where})`
  return new IchorError(message, {
    exitCode: EXIT.failed,
    hint: error.hint ?? 'check that the cluster is up and that the kubeconfig points at it (kubectl version)',
    cause: error,
  })
}

export function openSession(options: SessionOptions): Session {
  return new Session(options)
}

/** A read-only command's session: the named cluster must answer; closed on every path. */
export async function withSession<T>(options: SessionOptions, fn: (session: Session) => Promise<T>): Promise<T> {
  const session = openSession(options)
  try {
    await session.clusterAnswers()
    return await fn(session)
  } finally {
    await session.close()
  }
}
