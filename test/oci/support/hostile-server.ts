// A test fixture, not a registry simulator: a loopback HTTP server whose every answer is
// written by the test, to play a registry that misbehaves (streams forever, lies about
// Content-Length, redirects elsewhere). It is bounded: an endless body stops at `maxStreamBytes`
// or as soon as the client lets go, and the server listens on loopback only.
import {createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse} from 'node:http'
import type {AddressInfo} from 'node:net'

export interface HostileRequest {
  method: string
  path: string
  headers: IncomingHttpHeaders
}

export interface HostileServer {
  /** `http://<host>:<port>` */
  endpoint: string
  /** host:port, as a client names it */
  host: string
  seen: HostileRequest[]
  /** Bytes written by `streamForever` so far, over all requests. */
  streamed: number
  handle: (req: HostileRequest, res: ServerResponse) => void
  stop(): Promise<void>
}

/** Never more than this from one endless body, whatever the client does. */
const MAX_STREAM_BYTES = 256 * 1024 * 1024

export async function startHostileServer(host = '127.0.0.1'): Promise<HostileServer> {
  const server = createServer((req: IncomingMessage, res) => {
    req.resume()
    const seen: HostileRequest = {method: req.method ?? '', path: req.url ?? '', headers: req.headers}
    hostile.seen.push(seen)
    req.on('end', () => hostile.handle(seen, res))
  })
  const hostile: HostileServer = {
    endpoint: '',
    host: '',
    seen: [],
    streamed: 0,
    handle: (_req, res) => {
      res.writeHead(404)
      res.end()
    },
    stop: () =>
      new Promise((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
  await new Promise<void>((resolve) => server.listen(0, host, resolve))
  const {port} = server.address() as AddressInfo
  hostile.host = `${host}:${port}`
  hostile.endpoint = `http://${hostile.host}`
  return hostile
}

/** Writes 64 KiB chunks until the client goes away (or the fixture's own bound), honouring backpressure. */
export function streamForever(server: HostileServer, res: ServerResponse): void {
  const chunk = Buffer.alloc(64 * 1024, 0x61)
  let written = 0
  const pump = () => {
    while (!res.destroyed && written < MAX_STREAM_BYTES) {
      written += chunk.length
      server.streamed += chunk.length
      if (!res.write(chunk)) {
        res.once('drain', pump)
        return
      }
    }
    if (!res.destroyed) res.end()
  }
  res.on('close', () => res.removeAllListeners('drain'))
  pump()
}
