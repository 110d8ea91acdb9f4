// A Session over a tiny in-process API server, for unit tests of probes and plans, as Helm's
// pkg/action/action_test.go actionConfigFixture gives each action test a configuration over
// fake storage. `await sessionFixture([objects])` is one line: the server answers the reads a
// probe makes (discovery, GET of an object, LIST with a label selector) from the objects
// given, and refuses every write (405) while recording it, since a probe is read-only. It is a
// fake, not a simulator: no admission, no defaulting, no watch; what a test needs beyond GET
// and LIST belongs on the harness (test/harness/cluster.ts). Its store and reads are shared
// with planFixture (plan-fixture.ts), the same server with writes, for whole plan runs.
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {createServer, type IncomingMessage, type ServerResponse} from 'node:http'
import type {AddressInfo} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {gzipSync} from 'node:zlib'
import {onTestFinished} from 'vitest'
import type {KubeObject} from '../../src/lib/kube/objects.js'
import {openSession, type Session} from '../../src/lib/session/session.js'

export interface SessionFixture {
  session: Session
  /** The kubeconfig file that names the server, for a test that runs the built CLI against it. */
  kubeconfig: string
  /** `METHOD path?query` of every request the session made, /version included. */
  requests: string[]
  /** Requests other than GET: a probe must make none. */
  writes(): string[]
  /** The User-Agent header of every request, in order. */
  userAgents: string[]
  /** Adds or replaces an object (same apiVersion, kind, namespace and name). */
  put(object: KubeObject): void
}

export interface Resource {
  plural: string
  kind: string
  namespaced: boolean
}

// What the real API server serves for the kinds ichor's probes read (k8s.io/api v0.33).
const BUILT_IN: Record<string, Resource[]> = {
  v1: [
    {plural: 'secrets', kind: 'Secret', namespaced: true},
    {plural: 'configmaps', kind: 'ConfigMap', namespaced: true},
    {plural: 'namespaces', kind: 'Namespace', namespaced: false},
    {plural: 'nodes', kind: 'Node', namespaced: false},
    {plural: 'pods', kind: 'Pod', namespaced: true},
    {plural: 'services', kind: 'Service', namespaced: true},
  ],
  'apps/v1': [
    {plural: 'deployments', kind: 'Deployment', namespaced: true},
    {plural: 'daemonsets', kind: 'DaemonSet', namespaced: true},
    {plural: 'statefulsets', kind: 'StatefulSet', namespaced: true},
  ],
  'apiextensions.k8s.io/v1': [{plural: 'customresourcedefinitions', kind: 'CustomResourceDefinition', namespaced: false}],
  'coordination.k8s.io/v1': [{plural: 'leases', kind: 'Lease', namespaced: true}],
}

interface Crd {
  spec: {group: string; scope: string; names: {kind: string; plural: string}; versions: {name: string; served?: boolean}[]}
}

/** Where a request path points: a collection, an object, or an object's status subresource. */
export interface ApiPath {
  apiVersion: string
  resource: Resource
  namespace?: string
  name?: string
  status: boolean
  /** The collection's path (the store's keys are `<collection>/<name>`). */
  collection: string
}

/** The objects the fixture's server holds, keyed by their API path, and the kinds it serves. */
export class ObjectStore {
  readonly objects = new Map<string, KubeObject>()

  resources(): Record<string, Resource[]> {
    const out: Record<string, Resource[]> = {...BUILT_IN}
    // A custom resource is served once its CRD exists, as the API server does.
    for (const o of this.objects.values()) {
      if (o.kind !== 'CustomResourceDefinition') continue
      const {spec} = o as unknown as Crd
      for (const v of spec.versions.filter((x) => x.served !== false)) {
        const gv = `${spec.group}/${v.name}`
        out[gv] = [...(out[gv] ?? []), {plural: spec.names.plural, kind: spec.names.kind, namespaced: spec.scope === 'Namespaced'}]
      }
    }
    return out
  }

  pathOf(o: KubeObject): string {
    const resource = this.resources()[o.apiVersion]?.find((r) => r.kind === o.kind)
    if (!resource) throw new Error(`fixture: ${o.kind} ${o.apiVersion} is not served (give its CRD first)`)
    return `${collectionPath(o.apiVersion, resource, o.metadata.namespace)}/${o.metadata.name}`
  }

  /** Adds or replaces an object as given, no bookkeeping. */
  put(o: KubeObject): void {
    this.objects.set(this.pathOf(o), structuredClone(o))
  }

  /** CRDs first: the kinds they define are then served for the other objects. */
  seed(objects: KubeObject[], put: (o: KubeObject) => void = (o) => this.put(o)): void {
    const crdsFirst = [...objects].sort((a, b) => Number(b.kind === 'CustomResourceDefinition') - Number(a.kind === 'CustomResourceDefinition'))
    for (const o of crdsFirst) put(o)
  }

  /** The served resource a request path names, or undefined (discovery, /version, an unserved kind). */
  resolve(pathname: string): ApiPath | undefined {
    const m = /^\/(?:api\/(v1)|apis\/([^/]+\/[^/]+))\/(.+)$/.exec(pathname)
    if (!m) return undefined
    const apiVersion = (m[1] ?? m[2])!
    const served = this.resources()[apiVersion] ?? []
    const parts = m[3]!.split('/')
    // namespaces/<ns>/<plural>[/<name>[/status]] before <plural>[/<name>[/status]]: a Namespace is both.
    const tries: [string | undefined, string[]][] =
      parts[0] === 'namespaces' && parts.length >= 3
        ? [
            [parts[1], parts.slice(2)],
            [undefined, parts],
          ]
        : [[undefined, parts]]
    for (const [namespace, [plural, name, sub, ...rest]] of tries) {
      const resource = served.find((r) => r.plural === plural && r.namespaced === (namespace !== undefined))
      if (!resource || rest.length > 0 || (sub !== undefined && sub !== 'status')) continue
      return {apiVersion, resource, namespace, name, status: sub === 'status', collection: collectionPath(apiVersion, resource, namespace)}
    }
    return undefined
  }

  /** The objects directly below a collection path, filtered by a label selector (`a=b`, `a!=b`, `a`, `!a`). */
  list(collection: string, labelSelector: string): KubeObject[] {
    const terms = labelSelector.split(',').filter(Boolean)
    const matches = (labels: Record<string, string>) =>
      terms.every((term) => {
        const [key, value] = term.split(/!=|==|=/).map((x) => x.trim())
        if (value === undefined) return term.startsWith('!') ? !(term.slice(1) in labels) : key! in labels
        return term.includes('!=') ? labels[key!] !== value : labels[key!] === value
      })
    return [...this.objects.entries()]
      .filter(([path]) => path.startsWith(`${collection}/`) && !path.slice(collection.length + 1).includes('/'))
      .map(([, o]) => o)
      .filter((o) => matches(o.metadata.labels ?? {}))
  }
}

export type Answer = [code: number, body: unknown]

/** A request other than GET, its body parsed as JSON, for a fixture that accepts writes. */
export interface WriteRequest {
  method: string
  url: URL
  contentType: string
  body: unknown
}

/** What a server answers a write with: a fixture without one refuses every write (405). */
export type WriteHandler = (request: WriteRequest) => Answer

/** The Session, over a server holding `objects`; the server, the kubeconfig and the session go when the test ends. */
export async function sessionFixture(objects: KubeObject[] = []): Promise<SessionFixture> {
  const store = new ObjectStore()
  store.seed(objects)
  const {session, kubeconfig, requests, userAgents} = await serveApi(store)
  return {session, kubeconfig, requests, userAgents, writes: () => requests.filter((r) => !r.startsWith('GET ')), put: (o) => store.put(o)}
}

export interface ApiServer {
  session: Session
  kubeconfig: string
  requests: string[]
  userAgents: string[]
}

/**
 * Serves `store` on 127.0.0.1: discovery, GET of an object (or its status) and LIST from the
 * store; a write goes to `write`, or is refused (405) while recorded. Everything goes when the
 * test ends.
 */
export async function serveApi(store: ObjectStore, write?: WriteHandler): Promise<ApiServer> {
  const requests: string[] = []
  const userAgents: string[] = []
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    requests.push(`${req.method} ${req.url}`)
    userAgents.push(req.headers['user-agent'] ?? '')
    const url = new URL(req.url ?? '/', 'http://fixture')
    const send = ([code, body]: Answer) => {
      res.writeHead(code, {'content-type': 'application/json'})
      res.end(JSON.stringify(body))
    }
    if (req.method === 'GET') return send(read(store, url))
    if (!write) return send([405, status(405, 'MethodNotAllowed', `${req.method} is refused: a probe reads only`)])
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8')
      let body: unknown
      try {
        body = text ? JSON.parse(text) : undefined
      } catch {
        return send([415, status(415, 'UnsupportedMediaType', 'the fixture reads JSON bodies only')])
      }
      send(write({method: req.method ?? '', url, contentType: req.headers['content-type'] ?? '', body}))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const {port} = server.address() as AddressInfo

  const dir = mkdtempSync(join(tmpdir(), 'ichor-session-fixture-'))
  const kubeconfig = join(dir, 'kubeconfig')
  writeFileSync(
    kubeconfig,
    `apiVersion: v1
kind: Config
clusters: [{name: fixture, cluster: {server: "http://127.0.0.1:${port}"}}]
users: [{name: u, user: {token: not-a-secret}}]
contexts: [{name: fixture, context: {cluster: fixture, user: u}}]
current-context: fixture
`,
    {mode: 0o600},
  )
  const session = openSession({command: 'unit test', kubeconfig})
  onTestFinished(async () => {
    await session.close()
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
    rmSync(dir, {recursive: true, force: true})
  })
  return {session, kubeconfig, requests, userAgents}
}

function read(store: ObjectStore, url: URL): Answer {
  if (url.pathname === '/version') return [200, {major: '1', minor: '33', gitVersion: 'v1.33.0'}]
  const discovery = /^\/(?:api\/(v1)|apis\/([^/]+\/[^/]+))$/.exec(url.pathname)
  if (discovery) {
    const gv = discovery[1] ?? discovery[2]!
    const list = store.resources()[gv]
    if (!list) return [404, status(404, 'NotFound', 'the server could not find the requested resource')]
    return [200, {kind: 'APIResourceList', groupVersion: gv, resources: list.map((r) => ({name: r.plural, kind: r.kind, namespaced: r.namespaced}))}]
  }
  const at = store.resolve(url.pathname)
  if (!at) return [404, status(404, 'NotFound', `${url.pathname} not found`)]
  if (at.name === undefined)
    return [200, {kind: 'List', apiVersion: 'v1', metadata: {}, items: store.list(at.collection, url.searchParams.get('labelSelector') ?? '')}]
  const item = store.objects.get(`${at.collection}/${at.name}`)
  return item ? [200, item] : [404, status(404, 'NotFound', `${at.resource.plural} "${at.name}" not found`)]
}

function collectionPath(apiVersion: string, resource: Resource, namespace?: string): string {
  const root = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`
  return resource.namespaced ? `${root}/namespaces/${namespace}/${resource.plural}` : `${root}/${resource.plural}`
}

/** A metav1.Status as the API server words a failure. */
export function status(code: number, reason: string, message: string) {
  return {kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', reason, message, code}
}

export interface HelmReleaseInput {
  name: string
  namespace: string
  revision: number
  status: 'deployed' | 'failed' | 'superseded' | 'pending-install' | 'pending-upgrade'
  chart: {name: string; version: string}
  config?: Record<string, unknown>
  manifest?: string
}

/**
 * A release record as Helm v3's Secret driver stores it (helm/helm v3.18 pkg/storage/driver/
 * secrets.go newSecretsObject and util.go encodeRelease): Secret `sh.helm.release.v1.<name>.v<n>`
 * of type helm.sh/release.v1, labels owner/name/status/version, data.release = base64 of
 * gzip(JSON), which the API then serves base64-encoded once more.
 */
export function helmReleaseSecret(r: HelmReleaseInput): KubeObject {
  const record = {
    name: r.name,
    namespace: r.namespace,
    version: r.revision,
    info: {status: r.status},
    chart: {metadata: {name: r.chart.name, version: r.chart.version}},
    config: r.config ?? {},
    manifest: r.manifest ?? '',
  }
  const stored = gzipSync(Buffer.from(JSON.stringify(record))).toString('base64')
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'helm.sh/release.v1',
    metadata: {
      name: `sh.helm.release.v1.${r.name}.v${r.revision}`,
      namespace: r.namespace,
      labels: {owner: 'helm', name: r.name, status: r.status, version: String(r.revision)},
    },
    data: {release: Buffer.from(stored).toString('base64')},
  } as KubeObject
}
