// A test fixture, not a registry simulator: a loopback HTTP proxy in front of the real
// registry that records each request and, when told to, answers in its place (503, 401),
// drops the connection, or corrupts the body it relays (either way). It lets the tests drive the
// client's retry and error paths while every successful exchange is the real registry's.
import {createServer, request, type IncomingMessage, type Server} from 'node:http'
import type {AddressInfo} from 'node:net'

export type Fault = {kind: 'forward'} | {kind: 'answer'; status: number; body?: string} | {kind: 'reset'} | {kind: 'corrupt'} | {kind: 'corruptRequest'}

export interface SeenRequest {
  method: string
  path: string
  bodyBytes: number
  contentRange?: string
}

export interface FaultProxy {
  endpoint: string
  seen: SeenRequest[]
  /** Decides what to do with the n-th request (0-based); forwards by default. */
  decide: (req: SeenRequest, index: number) => Fault
  stop(): Promise<void>
}

export async function startFaultProxy(upstream: string): Promise<FaultProxy> {
  const target = new URL(upstream)
  const proxy: FaultProxy = {endpoint: '', seen: [], decide: () => ({kind: 'forward'}), stop: async () => {}}
  const server: Server = createServer(async (req, res) => {
    const body = await readAll(req)
    const seen: SeenRequest = {
      method: req.method ?? '',
      path: req.url ?? '',
      bodyBytes: body.length,
      contentRange: req.headers['content-range'] as string | undefined,
    }
    const fault = proxy.decide(seen, proxy.seen.length)
    proxy.seen.push(seen)
    if (fault.kind === 'reset') {
      req.socket.destroy()
      return
    }
    if (fault.kind === 'answer') {
      res.writeHead(fault.status, {'content-type': 'application/json'})
      res.end(fault.body ?? '')
      return
    }
    if (fault.kind === 'corruptRequest' && body.length > 0) body[body.length - 1] ^= 0xff
    // The Host header is passed through, so the registry's Location headers point back at this proxy.
    const upstreamReq = request({host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers}, async (up) => {
      const data = await readAll(up)
      if (fault.kind === 'corrupt' && data.length > 0) data[data.length - 1] ^= 0xff
      res.writeHead(up.statusCode ?? 502, up.headers)
      res.end(data)
    })
    upstreamReq.on('error', () => res.destroy())
    upstreamReq.end(body)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const {port} = server.address() as AddressInfo
  proxy.endpoint = `http://127.0.0.1:${port}`
  proxy.stop = () =>
    new Promise((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    })
  return proxy
}

function readAll(stream: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    stream.on('data', (c: Buffer) => chunks.push(c))
    stream.on('end', () => resolve(Buffer.concat(chunks)))
    stream.on('error', reject)
  })
}
