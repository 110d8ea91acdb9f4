// Part of the Talos node SIMULATOR (talosctl-simulator.mjs): the few Kubernetes API calls a
// simulated node makes (its kubelet's Node, Talos's manifest inventory, reads and prunes), as
// plain JSON over HTTPS. The simulator is a process per talosctl call; importing
// @kubernetes/client-node cost each call that touched the API 0.7 s of CPU, this file nothing.
// Objects go and come back as the API server's JSON, unchanged (no typed models in between).
import {request} from 'node:https'
import {readFileSync} from 'node:fs'
import {parse} from 'yaml'

/** An answer other than 2xx: `code` is the HTTP status (404, 409, ...), `body` the Status. */
export class KubeError extends Error {
  constructor(method, path, code, body) {
    super(`${method} ${path}: ${code} ${body?.message ?? ''}`.trim())
    this.code = code
    this.body = body
  }
}

/** The current context of a kubeconfig file: server, CA and a bearer token or client certificate. */
function loadKubeconfig(path) {
  const config = parse(readFileSync(path, 'utf8'))
  const context = config.contexts.find((c) => c.name === config['current-context']).context
  const cluster = config.clusters.find((c) => c.name === context.cluster).cluster
  const user = config.users.find((u) => u.name === context.user)?.user ?? {}
  const pem = (data, file) => (data ? Buffer.from(data, 'base64') : file ? readFileSync(file) : undefined)
  return {
    server: cluster.server.replace(/\/+$/, ''),
    tls: {
      ca: pem(cluster['certificate-authority-data'], cluster['certificate-authority']),
      rejectUnauthorized: !cluster['insecure-skip-tls-verify'],
      cert: pem(user['client-certificate-data'], user['client-certificate']),
      key: pem(user['client-key-data'], user['client-key']),
    },
    headers: user.token ? {Authorization: `Bearer ${user.token}`} : {},
  }
}

/** A client of the kubeconfig's current context: `request(method, path, {body, query})` answers the parsed JSON. */
export function kubeRest(kubeconfigPath) {
  const {server, tls, headers} = loadKubeconfig(kubeconfigPath)
  const discovery = new Map()

  function call(method, path, {body, query} = {}) {
    const url = new URL(server + path)
    for (const [k, v] of Object.entries(query ?? {})) url.searchParams.set(k, v)
    const payload = body === undefined ? undefined : JSON.stringify(body)
    return new Promise((resolve, reject) => {
      const req = request(
        url,
        // Content-Length always: Node frames no DELETE body on its own (no chunked encoding for
        // DELETE), and the API server would read an unframed body as the next request.
        {
          method,
          ...tls,
          timeout: 30_000,
          headers: {
            ...headers,
            Accept: 'application/json',
            ...(payload ? {'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(payload)} : {}),
          },
        },
        (res) => {
          let text = ''
          res.setEncoding('utf8')
          res.on('data', (chunk) => (text += chunk))
          res.on('end', () => {
            let parsed
            try {
              parsed = text ? JSON.parse(text) : undefined
            } catch {
              parsed = {message: text}
            }
            if (res.statusCode >= 200 && res.statusCode < 300) resolve(parsed)
            else reject(new KubeError(method, path, res.statusCode, parsed))
          })
        },
      )
      req.on('timeout', () => req.destroy(new Error(`${method} ${path}: timed out`)))
      req.on('error', reject)
      req.end(payload)
    })
  }

  /** The kind's resource as served (`{name, namespaced}`), or undefined when the server has no such kind. */
  async function resource(apiVersion, kind) {
    const root = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`
    if (!discovery.has(root)) {
      try {
        discovery.set(root, (await call('GET', root)).resources ?? [])
      } catch (e) {
        if (e?.code !== 404) throw e
        discovery.set(root, [])
      }
    }
    return discovery.get(root).find((r) => r.kind === kind && !r.name.includes('/'))
  }

  /** The REST path of an object (kind discovered, namespace only for namespaced kinds). */
  async function pathOf(obj) {
    const res = await resource(obj.apiVersion, obj.kind)
    if (!res) throw new KubeError('GET', `${obj.apiVersion}/${obj.kind}`, 404, {message: `the server has no kind ${obj.kind} in ${obj.apiVersion}`})
    const root = obj.apiVersion.includes('/') ? `/apis/${obj.apiVersion}` : `/api/${obj.apiVersion}`
    const ns = res.namespaced ? `/namespaces/${obj.metadata.namespace || 'default'}` : ''
    return `${root}${ns}/${res.name}/${encodeURIComponent(obj.metadata.name)}`
  }

  return {
    request: call,
    resource,
    read: async (obj) => call('GET', await pathOf(obj)),
    delete: async (obj, propagationPolicy) => call('DELETE', await pathOf(obj), {body: {kind: 'DeleteOptions', apiVersion: 'v1', propagationPolicy}}),
  }
}
