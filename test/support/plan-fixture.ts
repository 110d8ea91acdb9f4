// A Session over an in-process API server that keeps what it is sent, so a whole plan runs
// through the real runPlan in milliseconds, as Helm's pkg/action/action_test.go
// actionConfigFixture keeps releases in memory. `await planFixture([objects])` is one line; it
// shares its store, discovery and reads with sessionFixture (session-fixture.ts) and adds writes:
// POST (409 AlreadyExists; 404 when the namespace is missing), PUT (409 Conflict on a stale
// resourceVersion), PATCH, DELETE, the status subresource, and uid / resourceVersion /
// generation bookkeeping (a write that changes nothing keeps the resourceVersion, as the API
// server does). Leases are ordinary objects here, so the runner takes and frees its Lease.
//
// It is a fake, not a simulator, and deliberately small:
// - no controllers: nothing rolls out, renders or syncs unless a test says so with `onWrite`
//   (a stand-in for one controller, in the test that needs it); CRDs are Established at once;
// - merge-patch+json is RFC 7386; strategic-merge-patch+json is taken as the same (no patch
//   directives, lists replaced);
// - server-side apply (apply-patch+yaml, sent as JSON) merges the applied fields into the stored
//   object and records the field manager in managedFields. It does not track which manager owns
//   which field, so it never reports a conflict (force is ignored) and never removes a field a
//   manager stopped applying;
// - no admission, defaulting, validation (fieldValidation is ignored), finalizers, cascading
//   deletion, create-on-update, watch or JSON patch.
// What needs any of those belongs on the harness (test/harness/cluster.ts), as does a real
// SIGKILL: a plan stopped here closes its session, which frees the Lease a killed process leaves.
import {randomUUID} from 'node:crypto'
import {Writable} from 'node:stream'
import type {KubeObject} from '../../src/lib/kube/objects.js'
import {runPlan, type Plan, type PlanRunDeps, type PlanRunOptions} from '../../src/lib/plans/run.js'
import {openSession, type Session} from '../../src/lib/session/session.js'
import type {OutputMode} from '../../src/lib/tasks/types.js'
import {ObjectStore, serveApi, status, type Answer, type ApiPath, type WriteRequest} from './session-fixture.js'

type Obj = KubeObject & {status?: unknown; [field: string]: unknown}

/** What a plan's run function (`runStackPromotePlan(o)`) takes to run against the fixture. */
export interface FixtureRunOptions {
  kubeconfig: string
  output: OutputMode
  stream: NodeJS.WritableStream
  dryRun: boolean
  yes: boolean
  json: boolean
  timeoutMs: number
}

export interface PlanFixture {
  /** A session on the fixture for a test's own reads (probes); a plan run opens its own. */
  session: Session
  kubeconfig: string
  /** `METHOD path?query` of every request, /version included. */
  requests: string[]
  /** Requests other than GET. */
  writes(): string[]
  /** The object stored under that name, or undefined. */
  get(apiVersion: string, kind: string, name: string, namespace?: string): Obj | undefined
  /** Creates or replaces an object with bookkeeping, as a controller or a person outside the plan would. */
  put(object: KubeObject): void
  /** Called with the stored object after every write the server accepts: a test's stand-in for a controller. */
  onWrite(react: (object: Obj) => void): void
  /** Every object but the Lease, without uid, resourceVersion, creationTimestamp and managedFields, by path: what a rerun must reproduce. */
  dump(): Record<string, Obj>
  /**
   * Options for a plan's run function: this cluster, JSON events, --yes. With `stopAt`, the run
   * stops as that step starts (its JSON "checking" event throws), the way a kill between two steps
   * leaves the cluster; the runner still closes the session, so the Lease is freed.
   */
  options(o?: {stopAt?: string; yes?: boolean; dryRun?: boolean}): FixtureRunOptions
  /** Runs a Plan through the real runPlan, each run on a fresh session on this cluster. */
  run<P, R>(plan: Plan<P, R>, o?: Partial<PlanRunOptions> & {stopAt?: string}, deps?: Omit<PlanRunDeps, 'open'>): Promise<R>
}

/** Writes other than the runner's own: its Lease, and the namespace it creates for it on a fresh cluster. */
export function withoutLease(writes: string[]): string[] {
  return writes.filter((w) => !/\/leases(\/|\?|$)|^POST \/api\/v1\/namespaces\?/.test(w))
}

/** The error a run stopped by `stopAt` ends with. */
export class StoppedAt extends Error {
  constructor(readonly step: string) {
    super(`stopped as step ${step} started`)
    this.name = 'StoppedAt'
  }
}

export async function planFixture(objects: KubeObject[] = []): Promise<PlanFixture> {
  const store = new ObjectStore()
  const reactors: ((o: Obj) => void)[] = []
  let version = 0

  /** Stores `next` over `before` with the API server's bookkeeping; unchanged content keeps its resourceVersion. */
  const commit = (path: string, next: Obj, before: Obj | undefined, dryRun = false, react = true): Obj => {
    const meta = next.metadata
    const stored: Obj = {
      ...next,
      metadata: {
        ...meta,
        uid: before?.metadata.uid ?? randomUUID(),
        creationTimestamp: before?.metadata.creationTimestamp ?? new Date().toISOString(),
        generation: before ? (before.metadata.generation ?? 1) + (specOf(before) === specOf(next) ? 0 : 1) : 1,
        resourceVersion: before?.metadata.resourceVersion ?? '',
      },
    }
    // apiextensions-apiserver accepts the names of a new CRD at once: Established without a wait.
    if (stored.kind === 'CustomResourceDefinition')
      stored.status = {
        conditions: [
          {type: 'NamesAccepted', status: 'True'},
          {type: 'Established', status: 'True'},
        ],
      }
    if (before && JSON.stringify(stored) === JSON.stringify(before)) return before
    stored.metadata.resourceVersion = String(++version)
    if (dryRun) return stored
    store.objects.set(path, stored)
    if (react) for (const reactor of reactors) reactor(structuredClone(stored))
    return stored
  }

  const write = ({method, url, contentType, body}: WriteRequest): Answer => {
    const at = store.resolve(url.pathname)
    if (!at) return [404, status(404, 'NotFound', `${url.pathname} is not served`)]
    const dryRun = url.searchParams.has('dryRun')
    const path = `${at.collection}/${at.name ?? (body as Obj | undefined)?.metadata?.name}`
    const before = store.objects.get(path) as Obj | undefined
    const notFound = (): Answer => [404, status(404, 'NotFound', `${at.resource.plural} "${at.name}" not found`)]
    const create = (o: Obj): Answer => {
      if (at.namespace && !store.objects.get(`/api/v1/namespaces/${at.namespace}`))
        return [404, status(404, 'NotFound', `namespaces "${at.namespace}" not found`)]
      return [201, commit(path, {...o, metadata: {...o.metadata, namespace: at.namespace}}, undefined, dryRun)]
    }
    switch (method) {
      case 'POST': {
        if (at.name !== undefined) return [405, status(405, 'MethodNotAllowed', 'POST to an object')]
        if (before) return [409, {...status(409, 'AlreadyExists', `${at.resource.plural} "${(body as Obj).metadata.name}" already exists`)}]
        return create(body as Obj)
      }
      case 'PUT': {
        if (!before) return notFound()
        const next = body as Obj
        const asked = next.metadata.resourceVersion
        if (asked && asked !== before.metadata.resourceVersion)
          return [409, status(409, 'Conflict', `Operation cannot be fulfilled on ${at.resource.plural} "${at.name}": the object has been modified`)]
        return [200, commit(path, onlyStatusOrNot(at, before, next), before, dryRun)]
      }
      case 'PATCH': {
        const manager = url.searchParams.get('fieldManager') ?? 'unknown'
        if (contentType.startsWith('application/apply-patch+yaml')) {
          const applied = withManager(body as Obj, manager, before)
          if (!before) return at.status ? notFound() : create(applied)
          return [200, commit(path, onlyStatusOrNot(at, before, mergeFields(before, applied) as Obj), before, dryRun)]
        }
        if (!contentType.startsWith('application/merge-patch+json') && !contentType.startsWith('application/strategic-merge-patch+json'))
          return [415, status(415, 'UnsupportedMediaType', `the fixture does not take ${contentType} patches`)]
        if (!before) return notFound()
        return [200, commit(path, onlyStatusOrNot(at, before, mergePatch(before, body) as Obj), before, dryRun)]
      }
      case 'DELETE': {
        if (!before) return notFound()
        if (!dryRun) store.objects.delete(path)
        return [200, {kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details: {name: at.name, kind: at.resource.plural}}]
      }
      default:
        return [405, status(405, 'MethodNotAllowed', `${method} is not served`)]
    }
  }

  // Seeds and a reactor's own writes: bookkeeping, but no reaction (a reactor would see its own write).
  const seed = (o: KubeObject) => void commit(store.pathOf(o), structuredClone(o) as Obj, store.objects.get(store.pathOf(o)) as Obj | undefined, false, false)
  store.seed(objects, seed)
  const server = await serveApi(store, write)

  const stream = (stopAt?: string): NodeJS.WritableStream => {
    const out = new Writable({write: (_chunk, _encoding, done) => done()})
    // The JSON renderer writes one event a line: the step's "checking" event is its start.
    out.write = (chunk: unknown) => {
      const event = JSON.parse(String(chunk)) as {event: string; id?: string; status?: string}
      if (stopAt && event.event === 'task' && event.status === 'checking' && event.id === stopAt) throw new StoppedAt(stopAt)
      return true
    }
    return out
  }
  const options = (o: {stopAt?: string; yes?: boolean; dryRun?: boolean} = {}): FixtureRunOptions => ({
    kubeconfig: server.kubeconfig,
    output: 'json',
    stream: stream(o.stopAt),
    dryRun: o.dryRun ?? false,
    yes: o.yes ?? true,
    json: false,
    timeoutMs: 2000,
  })

  return {
    session: server.session,
    kubeconfig: server.kubeconfig,
    requests: server.requests,
    writes: () => server.requests.filter((r) => !r.startsWith('GET ')),
    get: (apiVersion, kind, name, namespace) => {
      const path = store.pathOf({apiVersion, kind, metadata: {name, namespace}})
      const o = store.objects.get(path)
      return o && (structuredClone(o) as Obj)
    },
    put: seed,
    onWrite: (react) => void reactors.push(react),
    dump: () =>
      Object.fromEntries(
        [...store.objects.entries()]
          .filter(([, o]) => o.kind !== 'Lease')
          .sort(([a], [b]) => a.localeCompare(b))
          .map(([path, o]) => {
            const {
              uid: _u,
              resourceVersion: _r,
              creationTimestamp: _c,
              managedFields: _m,
              ...metadata
            } = o.metadata as Obj['metadata'] & Record<string, unknown>
            return [path, {...structuredClone(o), metadata} as Obj]
          }),
      ),
    options,
    run: (plan, o = {}, deps = {}) => {
      const {stopAt, ...rest} = o
      const {kubeconfig: _k, timeoutMs: _t, ...run} = options({stopAt})
      return runPlan(plan, {...run, ...rest, stream: run.stream}, {...deps, open: (s) => openSession({...s, kubeconfig: server.kubeconfig})})
    },
  }
}

/** What a write may change: only status through /status, and never status through the object itself. */
function onlyStatusOrNot(at: ApiPath, before: Obj, next: Obj): Obj {
  if (at.status) return {...before, status: next.status}
  const {status: _, ...rest} = next
  return before.status === undefined ? rest : {...rest, status: before.status}
}

/** Everything but metadata and status: what moves metadata.generation. */
function specOf(o: Obj): string {
  const {metadata: _m, status: _s, ...spec} = o
  return JSON.stringify(spec)
}

/** The applied object with `manager` recorded in managedFields (one Apply entry per manager). */
function withManager(applied: Obj, manager: string, before: Obj | undefined): Obj {
  type Entry = {manager: string; operation: string}
  const kept = ((before?.metadata as {managedFields?: Entry[]} | undefined)?.managedFields ?? []).filter((e) => e.manager !== manager)
  return {...applied, metadata: {...applied.metadata, managedFields: [...kept, {manager, operation: 'Apply', apiVersion: applied.apiVersion}]}} as Obj
}

/** RFC 7386 JSON merge patch: objects merge, null removes, anything else replaces. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return patch
  const out: Record<string, unknown> = isPlainObject(target) ? {...target} : {}
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k]
    else out[k] = mergePatch(out[k], v)
  }
  return out
}

/** Server-side apply as this fake does it: the applied fields over the stored ones, nothing removed. */
function mergeFields(target: unknown, applied: unknown): unknown {
  if (!isPlainObject(applied) || !isPlainObject(target)) return applied
  const out: Record<string, unknown> = {...target}
  for (const [k, v] of Object.entries(applied)) out[k] = mergeFields(out[k], v)
  return out
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}
