// The API server as an operator's laptop reaches it: not before `talosctl bootstrap`. On Talos,
// kube-apiserver is a static pod that the kubelet starts only once etcd runs, i.e. after the
// bootstrap call (siderolabs/talos internal/app/machined/pkg/controllers/k8s/
// control_plane_static_pod.go, v1.14.0-rc.1), and it then needs some seconds to serve. The harness
// apiserver runs from the start (the simulator applies Talos's manifests through it directly),
// so the kubeconfig `talosctl kubeconfig` hands out points at this TCP proxy instead: it does
// not listen at all until the simulator's `bootstrapped` marker exists (connection refused, as
// from a node whose apiserver is not up), then `delayMs` later forwards bytes to the real
// apiserver (TLS end to end: the serving certificate names 127.0.0.1, as the proxy's address).
import {existsSync, readFileSync, writeFileSync} from 'node:fs'
import {createConnection, createServer, type AddressInfo, type Server, type Socket} from 'node:net'
import {join} from 'node:path'
import {parse, stringify} from 'yaml'

export interface ApiProxy {
  /** https://127.0.0.1:<port>, refused until bootstrap. */
  server: string
  /** The harness kubeconfig with its server replaced by the proxy's (TALOS_SIM_CLIENT_KUBECONFIG). */
  kubeconfigPath: string
  /** Whether it forwards yet. */
  listening(): boolean
  /** The control plane is gone (a total loss): refused again until the next bootstrap. */
  close(): Promise<void>
  stop(): Promise<void>
}

export interface ApiProxyOptions {
  /** The harness apiserver's kubeconfig (its `server` is the target). */
  kubeconfigPath: string
  /** The simulator's state dir: the proxy opens once `<simState>/bootstrapped` exists. */
  simState: string
  /** Where to write the proxy's kubeconfig. */
  outDir: string
  /** After the marker appears, how long the apiserver takes to serve (default 3000 ms: the simulated bootstrap itself takes 1-3 s here). */
  delayMs?: number
}

async function freePort(): Promise<number> {
  const probe = createServer()
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve))
  const {port} = probe.address() as AddressInfo
  await new Promise<void>((resolve) => probe.close(() => resolve()))
  return port
}

export async function startApiProxy(opts: ApiProxyOptions): Promise<ApiProxy> {
  const kubeconfig = parse(readFileSync(opts.kubeconfigPath, 'utf8')) as {clusters: Array<{cluster: {server: string}}>}
  const target = new URL(kubeconfig.clusters[0]!.cluster.server)
  const port = await freePort()
  const server = `https://127.0.0.1:${port}`
  for (const c of kubeconfig.clusters) c.cluster.server = server
  const kubeconfigPath = join(opts.outDir, 'kubeconfig-via-proxy')
  writeFileSync(kubeconfigPath, stringify(kubeconfig), {mode: 0o600})

  const sockets = new Set<Socket>()
  const track = (s: Socket) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
  }
  const proxy: Server = createServer((client) => {
    track(client)
    const upstream = createConnection({host: target.hostname, port: Number(target.port)})
    track(upstream)
    client.pipe(upstream).pipe(client)
    client.on('error', () => upstream.destroy())
    upstream.on('error', () => client.destroy())
  })
  let open = false
  let stopped = false
  let timer: NodeJS.Timeout | undefined
  const watch = setInterval(() => {
    if (open || timer || !existsSync(join(opts.simState, 'bootstrapped'))) return
    timer = setTimeout(() => {
      if (stopped) return
      proxy.listen(port, '127.0.0.1')
      open = true
    }, opts.delayMs ?? 3000)
  }, 50)
  return {
    server,
    kubeconfigPath,
    listening: () => open,
    async close() {
      if (timer) clearTimeout(timer)
      timer = undefined
      for (const s of sockets) s.destroy()
      if (open) await new Promise<void>((resolve) => proxy.close(() => resolve()))
      open = false
    },
    async stop() {
      stopped = true
      clearInterval(watch)
      if (timer) clearTimeout(timer)
      for (const s of sockets) s.destroy()
      if (open) await new Promise<void>((resolve) => proxy.close(() => resolve()))
    },
  }
}
