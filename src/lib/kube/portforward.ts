// Reaching Kokumi's in-cluster registry from the operator's machine. The registry
// Service is ClusterIP, so by default each local TCP connection is tunnelled to the
// registry pod through the API server's port-forward; `--registry-endpoint` replaces
// all of it with a route the user (or a test) already has.
//
// The WebSocket tunnel is client-node's PortForward, imported only here, when a tunnel is
// actually opened: every other run of the CLI never loads client-node.
import {createServer, type Server, type Socket} from 'node:net'
import {IchorError} from '../errors/errors.js'
import type {Kube} from './client.js'
import {clientNodeKubeConfig} from './credentials.js'
import {type KubeObject, listObjects} from './objects.js'

/** From Kokumi's install.yaml: Deployment `kokumi-registry` in `kokumi`, pods labelled `app: registry`, port 5000. */
export const KOKUMI_REGISTRY = {namespace: 'kokumi', labelSelector: 'app=registry', port: 5000} as const

export interface RegistryEndpoint {
  /** Base URL, e.g. http://127.0.0.1:41234 */
  endpoint: string
  close(): Promise<void>
}

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

  const forwarder = new (await import('@kubernetes/client-node')).PortForward(await tunnelKubeConfig(kube), true)
  const sockets = new Set<Socket>()
  const server = createServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => socket.destroy())
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
  })
  await listen(server)
  // A forgotten close() must not keep the CLI from exiting; open connections still do.
  server.unref()
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('port-forward listener has no TCP address')
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      }),
  }
}

/**
 * client-node's KubeConfig for the tunnel: the same context, with the connection's own
 * credentials (our exec plugin cache, token file, TLS) put onto the WebSocket's options.
 */
async function tunnelKubeConfig(kube: Kube): Promise<import('@kubernetes/client-node').KubeConfig> {
  const kc = await clientNodeKubeConfig(kube.kubeconfig)
  kc.applyToHTTPSOptions = (options) => kube.authorize(options as import('node:https').RequestOptions)
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
  const running = pods
    .filter((p) => p.status?.phase === 'Running' && !p.metadata.deletionTimestamp)
    .sort((a, b) => Number(ready(b)) - Number(ready(a)))
  const pod = running[0]
  if (!pod) {
    const seen = pods.map((p) => `${p.metadata.name} (${p.status?.phase ?? 'no phase'})`).join(', ')
    throw new IchorError(
      `no running Kokumi registry pod (label ${labelSelector}) in namespace ${namespace}${seen ? `; found ${seen}` : ''}`,
      {hint: 'wait for Kokumi to be installed and its registry to start, or pass --registry-endpoint URL if you have your own route to it'},
    )
  }
  return pod.metadata.name
}

function listen(server: Server): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject)
      resolve()
    })
  })
}
