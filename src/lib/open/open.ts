// `ichor open argocd|kokumi|hubble`: a local port tunnelled to the UI's pod through the API
// server, as `kubectl port-forward svc/NAME LOCAL:PORT` is. Read-only: no Lease, nothing changes.
// It serves until the process is interrupted (Ctrl-C), which closes the listener and its tunnels.
import {createServer, isIP, type Server, type Socket} from 'node:net'
import {setTimeout as sleep} from 'node:timers/promises'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import {getObject, listObjects} from '../kube/objects.js'
import type {Kube} from '../kube/client.js'
import {podPortForwarder} from '../kube/portforward.js'
import {onInterrupt} from '../session/interrupt.js'
import {withSession} from '../session/session.js'
import {
  noReadyPod,
  OPEN_TARGETS,
  podPortOf,
  readyPod,
  selectorOf,
  servicePortOf,
  type OpenComponent,
  type OpenTarget,
  type Pod,
  type Service,
} from './targets.js'

export interface OpenOptions {
  component: OpenComponent
  kubeconfig?: string
  context?: string
  /** The local port; 0 picks a free one; the component's conventional one when absent. */
  port?: number
  /** The local address to listen on (127.0.0.1 unless asked). */
  address: string
  /** How long to wait for a ready pod behind the Service. */
  timeoutMs: number
  /** Called once the port listens, before serving: the command prints the result here. */
  onReady(result: OpenResult): void | Promise<void>
}

export interface OpenResult {
  component: OpenComponent
  url: string
  address: string
  port: number
  namespace: string
  service: string
  pod: string
  podPort: number
  /** Absent for a UI without a login (Hubble). The password is never here: the command that prints it is. */
  login?: {user: string; passwordCommand: string}
}

/** Resolves the pod, listens, reports, and serves until interrupted (it never resolves otherwise). */
export async function runOpen(o: OpenOptions): Promise<never> {
  const target = OPEN_TARGETS[o.component]
  return withSession({command: 'open', kubeconfig: o.kubeconfig, context: o.context}, async (session) => {
    const kube = await session.kube()
    const {pod, podPort} = await resolvePod(kube, target, o.timeoutMs)
    const forward = await podPortForwarder(kube)
    const sockets = new Set<Socket>()
    const server = createServer((socket) => {
      sockets.add(socket)
      socket.on('close', () => sockets.delete(socket))
      socket.on('error', () => socket.destroy())
      forward(socket, {namespace: target.namespace, pod, port: podPort})
    })
    const port = await listen(server, o.address, o.port ?? target.defaultPort)
    onInterrupt(
      () =>
        new Promise<void>((resolve) => {
          for (const socket of sockets) socket.destroy()
          server.close(() => resolve())
        }),
    )
    const host = o.address === '0.0.0.0' || o.address === '::' ? 'localhost' : o.address.includes(':') ? `[${o.address}]` : o.address
    await o.onReady({
      component: o.component,
      url: `${target.scheme}://${host}:${port}`,
      address: o.address,
      port,
      namespace: target.namespace,
      service: target.service,
      pod,
      podPort,
      ...(target.login ? {login: target.login} : {}),
    })
    // The listener keeps the process alive; only the interrupt handler ends it.
    return new Promise<never>(() => undefined)
  })
}

/** Service → selector → a running, ready pod → the pod's port; waits up to timeoutMs for the pod. */
export async function resolvePod(kube: Kube, target: OpenTarget, timeoutMs: number): Promise<{pod: string; podPort: number}> {
  const service = await getObject<Service>(kube, {apiVersion: 'v1', kind: 'Service', namespace: target.namespace, name: target.service})
  if (!service)
    throw new IchorError(`${target.title} is not installed: Service ${target.namespace}/${target.service} does not exist`, {hint: target.missingHint})
  const port = servicePortOf(service, target)
  const selector = selectorOf(service, target)
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const pods = await listObjects<Pod>(kube, {apiVersion: 'v1', kind: 'Pod', namespace: target.namespace}, {labelSelector: selector})
    const pod = readyPod(pods)
    if (pod) return {pod: pod.metadata.name, podPort: podPortOf(port, pod, target)}
    if (Date.now() >= deadline) throw noReadyPod(pods, target, selector)
    await sleep(Math.min(1000, Math.max(0, deadline - Date.now())))
  }
}

function listen(server: Server, address: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => {
      const where = `${address.includes(':') ? `[${address}]` : address}:${port}`
      if (error.code === 'EADDRINUSE') reject(new IchorError(`${where} is already in use`, {hint: 'pick another with --port, or --port 0 for a free one'}))
      else if (error.code === 'EACCES')
        reject(new IchorError(`may not listen on ${where}`, {hint: 'ports below 1024 need privileges: pick another with --port'}))
      else if (error.code === 'EADDRNOTAVAIL')
        reject(new IchorError(`--address ${address} is not an address of this machine`, {hint: 'the default 127.0.0.1 is'}))
      else reject(error)
    })
    server.listen({host: address, port}, () => resolve((server.address() as {port: number}).port))
  })
}

/** The human view: the URL, the login (never the password), and what is forwarded where. */
export function formatOpen(r: OpenResult): string {
  const lines = [`${OPEN_TARGETS[r.component].title}: ${r.url}`]
  if (r.login) lines.push(`  user: ${r.login.user}`, `  password: run ${r.login.passwordCommand}`)
  lines.push(`  forwarding ${r.address}:${r.port} -> pod ${r.namespace}/${r.pod} port ${r.podPort} (Service ${r.service})`)
  return lines.join('\n')
}

/** --port: 0-65535 (0: a free one), as kubectl port-forward takes a local port. */
export function parseListenPort(input: string): number {
  const port = /^\d+$/.test(input.trim()) ? Number(input.trim()) : NaN
  if (!(port >= 0 && port <= 65535)) throw new IchorError(`--port: "${input}" is not a port (accepted: 1-65535, or 0 for a free one)`, {exitCode: EXIT.usage})
  return port
}

/** --address: an IP address, or localhost (127.0.0.1), as kubectl port-forward --address. */
export function parseListenAddress(input: string): string {
  const address = input.trim() === 'localhost' ? '127.0.0.1' : input.trim()
  if (isIP(address) === 0)
    throw new IchorError(`--address: "${input}" is not an IP address (accepted: an IPv4 or IPv6 address, or localhost)`, {exitCode: EXIT.usage})
  return address
}
