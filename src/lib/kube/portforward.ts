// Reaching Kokumi's in-cluster registry from the operator's machine. The registry
// Service is ClusterIP, so by default each local connection is tunnelled to the
// registry pod through the API server's port-forward; `--registry-endpoint` replaces
// all of it with a route the user (or a test) already has.
//
// The tunnel carries the operator's credentials to an anonymous, writable registry, so only
// this process may use it: it listens on a Unix socket in a fresh 0700 directory (never a
// loopback port, which every local user can reach), and the OCI client reaches it through a
// fetch bound to that socket. The plan closes it as soon as publishing is done.
//
// The WebSocket tunnel is client-node's PortForward, imported only here, when a tunnel is
// actually opened: every other run of the CLI never loads client-node.
import {chmodSync, mkdtempSync, rmSync} from 'node:fs'
import {createServer, type Server, type Socket} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {IchorError} from '../errors/errors.js'
import type {Kube} from './client.js'
import {clientNodeKubeConfig} from './credentials.js'
import {requestSettings} from './request-settings.js'
import {type KubeObject, listObjects} from './objects.js'

/** From Kokumi's install.yaml: Deployment `kokumi-registry` in `kokumi`, pods labelled `app: registry`, port 5000. */
export const KOKUMI_REGISTRY = {namespace: 'kokumi', labelSelector: 'app=registry', port: 5000} as const

export interface RegistryEndpoint {
  /** Base URL, e.g. http://127.0.0.1:41234, or the tunnel's name when `fetch` goes through its socket. */
  endpoint: string
  /** The fetch that reaches `endpoint` (the tunnel's socket); the global fetch when absent. */
  fetch?: typeof fetch
  /** The tunnel's Unix socket, in a directory only this user can enter. */
  socketPath?: string
  close(): Promise<void>
}

/** The name the tunnel's requests carry; the socket, not this host, decides where they go. */
const TUNNEL_ENDPOINT = 'http://kokumi-registry.tunnel'

export interface RegistryEndpointOptions {
  /** The `--registry-endpoint` flag: use this URL and open no tunnel. */
  override?: string
  namespace?: string
  labelSelector?: string
  port?: number
}

type Pod = KubeObject & {
  status?: {phase?: string; conditions?: Array<{type: string; status: string}>}
  metadata: KubeObject['metadata'] & {deletionTimestamp?: string}
}

export async function openRegistryEndpoint(kube: Kube, options: RegistryEndpointOptions = {}): Promise<RegistryEndpoint> {
  if (options.override !== undefined) return {endpoint: normalizeOverride(options.override), close: async () => {}}

  const namespace = options.namespace ?? KOKUMI_REGISTRY.namespace
  const labelSelector = options.labelSelector ?? KOKUMI_REGISTRY.labelSelector
  const port = options.port ?? KOKUMI_REGISTRY.port
  const pod = await findRunningPod(kube, namespace, labelSelector)
  const forward = await podPortForwarder(kube)
  return serveLocalTunnel((socket) => forward(socket, {namespace, pod, port}))
}

/** One pod's port, as the API server's pods/portforward subresource names it. */
export interface PodPort {
  namespace: string
  pod: string
  port: number
}

/**
 * Tunnels one local connection to a pod's port through the API server (client-node's
 * PortForward over a WebSocket, as kubectl port-forward does): the registry tunnel and
 * `ichor open` share it. A tunnel that cannot open closes the connection.
 */
export async function podPortForwarder(kube: Kube): Promise<(socket: Socket, target: PodPort) => void> {
  const forwarder = new (await import('@kubernetes/client-node')).PortForward(await tunnelKubeConfig(kube), true)
  return (socket, {namespace, pod, port}) => {
    forwarder
      .portForward(namespace, pod, [port], socket, null, socket)
      .then((ws) => {
        const close = (): void => {
          if (typeof ws !== 'function') ws.close()
        }
        socket.on('close', close)
        if (typeof ws !== 'function') ws.on('close', () => socket.end())
      })
      .catch(() => socket.destroy())
  }
}

/**
 * A listener only this process can reach: a Unix socket in a new directory of mode 0700
 * (other local users cannot even resolve the path), each connection handed to `forward`.
 * Returns the endpoint with a fetch bound to the socket; close() removes the directory.
 */
export async function serveLocalTunnel(forward: (socket: Socket) => void): Promise<RegistryEndpoint> {
  const dir = mkdtempSync(join(tmpdir(), 'ichor-tunnel-'))
  chmodSync(dir, 0o700)
  const socketPath = join(dir, 'registry.sock')
  const sockets = new Set<Socket>()
  const server = createServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => socket.destroy())
    forward(socket)
  })
  try {
    await listen(server, socketPath)
  } catch (error) {
    rmSync(dir, {recursive: true, force: true})
    throw error
  }
  // A forgotten close() must not keep the CLI from exiting; open connections still do.
  server.unref()
  // undici's own fetch with a dispatcher that dials the socket (Node's global fetch cannot).
  const undici = await import('undici')
  const agent = new undici.Agent({connect: {socketPath}})
  const viaSocket = ((input: string | URL, init?: RequestInit) => undici.fetch(input, {...(init as object), dispatcher: agent})) as unknown as typeof fetch
  return {
    endpoint: TUNNEL_ENDPOINT,
    fetch: viaSocket,
    socketPath,
    close: async () => {
      for (const socket of sockets) socket.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      await agent.destroy().catch(() => undefined)
      rmSync(dir, {recursive: true, force: true})
    },
  }
}

/**
 * client-node's KubeConfig for the tunnel: the same context, with the connection's own
 * credentials (our exec plugin cache, token file, TLS) put onto the WebSocket's options.
 */
export async function tunnelKubeConfig(kube: Kube): Promise<import('@kubernetes/client-node').KubeConfig> {
  const kc = await clientNodeKubeConfig(kube.kubeconfig)
  const {timeoutMs} = requestSettings()
  kc.applyToHTTPSOptions = async (options) => {
    await kube.authorize(options as import('node:https').RequestOptions)
    // --request-timeout bounds the WebSocket upgrade too: an API server that accepts and never
    // answers must not keep a tunnel connection pending forever. ws 8.23 lib/websocket.js turns
    // handshakeTimeout into the upgrade request's socket timeout (idle, not total); the OCI
    // request through the tunnel has the total deadline.
    if (timeoutMs > 0) (options as {handshakeTimeout?: number}).handshakeTimeout = timeoutMs
  }
  return kc
}

function normalizeOverride(value: string): string {
  let url: URL
  try {
    url = new URL(value.includes('://') ? value : `http://${value}`)
  } catch {
    throw new IchorError(`--registry-endpoint ${value} is not a URL`, {hint: 'give it as http://HOST:PORT'})
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new IchorError(`--registry-endpoint ${value} must be http:// or https://`)
  }
  return `${url.protocol}//${url.host}${url.pathname.replace(/\/+$/, '')}`
}

async function findRunningPod(kube: Kube, namespace: string, labelSelector: string): Promise<string> {
  const pods = await listObjects<Pod>(kube, {apiVersion: 'v1', kind: 'Pod', namespace}, {labelSelector})
  const ready = (p: Pod): boolean => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false
  const running = pods.filter((p) => p.status?.phase === 'Running' && !p.metadata.deletionTimestamp).sort((a, b) => Number(ready(b)) - Number(ready(a)))
  const pod = running[0]
  if (!pod) {
    const seen = pods.map((p) => `${p.metadata.name} (${p.status?.phase ?? 'no phase'})`).join(', ')
    throw new IchorError(`no running Kokumi registry pod (label ${labelSelector}) in namespace ${namespace}${seen ? `; found ${seen}` : ''}`, {
      hint: 'wait for Kokumi to be installed and its registry to start, or pass --registry-endpoint URL if you have your own route to it',
    })
  }
  return pod.metadata.name
}

function listen(server: Server, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(path, () => {
      server.off('error', reject)
      resolve()
    })
  })
}
