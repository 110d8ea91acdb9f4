// Argo CD application-controller simulator: the sync and status of an Application that
// Kokumi's Serving created (./stack-simulator.ts plays Kokumi and calls `syncApplication`), and
// the one thing argocd-server writes when it starts: its first admin password (see
// serverInitializesSettings).
// Argo CD cannot run on the harness (no kubelet, no pods), so this plays its controller from
// the outside:
//
// - an Application whose revision changed first reads OutOfSync/Progressing, then the sync:
//   the Preparation's manifest.yaml is pulled from the registry and every object in it is
//   applied server-side as field manager `argocd-controller` with force, as Argo CD does with
//   `ServerSideApply=true` (argoproj/argo-cd common/common.go `ArgoCDSSAManager =
//   "argocd-controller"`, passed by controller/sync.go `sync.WithServerSideApplyManager`;
//   argoproj/gitops-engine pkg/utils/kube/resource_ops.go sets ForceConflicts for every
//   server-side apply). So a field a new bundle drops is removed only when no other manager
//   still owns it, exactly as in a real cluster. Then Synced/Healthy; if the digest cannot be
//   pulled, OutOfSync/Missing; if the apply fails, OutOfSync/Degraded with the error.
//
// What its controller does on every reconciliation (argoproj/argo-cd v3.4.4, the app version of
// the installed chart 10.1.1, with the gitops-engine it vendors under gitops-engine/):
// - compare (controller/state.go CompareAppState): the revision's objects, each stamped with
//   the tracking annotation `argocd.argoproj.io/tracking-id: <app>:<group>/<kind>:<ns>/<name>`
//   (util/argo/resource_tracking.go; annotation tracking is the default when argocd-cm sets no
//   `application.resourceTrackingMethod`, util/settings/settings.go GetTrackingMethod; a
//   cluster-scoped object carries the destination namespace), against the live objects: the
//   live counterpart of each, and every live object whose tracking id names this Application
//   and matches the object (state.go isSelfReferencedObj), which is extraneous when the
//   revision no longer holds it. A target that differs from live (here: a server-side dry-run
//   apply as argocd-controller that would change the live object; Argo CD's structured-merge
//   diff for ServerSideApply=true Applications), absent, or extraneous makes it OutOfSync,
//   unless the extraneous object has `argocd.argoproj.io/compare-options: IgnoreExtraneous`;
// - health (controller/health.go setApplicationHealth, gitops-engine pkg/health): see
//   ./argocd-health.ts; the worst of the live resources, an absent one not counted, Missing
//   only when none is live. Re-assessed on every round, not just after a sync;
// - auto-sync (controller/appcontroller.go autoSync) when `syncPolicy.automated` is set and the
//   Application is OutOfSync: not when only pruning is needed and `automated.prune` is false;
//   a revision already synced successfully is synced again only with `automated.selfHeal`,
//   then only its out-of-sync resources, after the self-heal backoff (2 s, factor 3, cap
//   300 s: cmd/argocd-application-controller defaults); a failed sync of a revision is not
//   attempted again by auto-sync;
// - sync (gitops-engine pkg/sync/sync_context.go): apply every object (see above), then prune
//   the extraneous ones with foreground propagation when the operation prunes (background on a
//   harness without a garbage collector, see prunePropagation), except those
//   annotated `argocd.argoproj.io/sync-options: Prune=false`. `status.resources` lists each
//   resource's sync status; its health is not persisted (`--persist-resource-health` defaults
//   to false in v3).
//
// Only while its controller runs: Argo CD's application controller is the StatefulSet
// `argocd-application-controller` of the argo-cd chart (argoproj/argo-helm, chart 10.1.1
// templates/argocd-application-controller/statefulset.yaml; a Deployment of that name instead
// with `controller.dynamicClusterDistribution`, deployment.yaml). Without a Ready pod of it (a
// crash loop, a pod not yet started) nothing reconciles: no compare, no status written, no
// sync, no self-heal; the Applications keep the status last written. kwok plays the pod, so
// `h.pods.hold(..., 'crashloop')` takes the controller down as a crashing image would.
//
// Simplifications, on purpose: live objects are read by listing the kinds of the current and
// earlier revisions (and of status.resources) each round, where Argo CD watches every kind;
// no sync waves, hooks or resource exclusions; argocd-cm's Lua health overrides are not run;
// a failed sync is retried on the next round while the revision has not been synced once
// (Argo CD retries an automated sync 5 times with a 5 s backoff, then stops); a revision that
// cannot be pulled reads OutOfSync/Missing (Argo CD: a ComparisonError condition).
import {ApiextensionsV1Api, CustomObjectsApi, KubeConfig} from '@kubernetes/client-node'
import {createHash, randomBytes} from 'node:crypto'
import {isDeepStrictEqual} from 'node:util'
import {untarSync} from '../../src/lib/chart/archive.js'
import {serverSideApply} from '../../src/lib/kube/apply.js'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {deleteObject, getObject, PARTIAL_OBJECT_METADATA_LIST, resolvePath, type KubeObject} from '../../src/lib/kube/objects.js'
import type {OciClient} from '../../src/lib/oci/client.js'
import {bcryptHash} from '../../src/lib/stack/bcrypt.js'
import {parseObjects} from '../../src/lib/stack/objects.js'
import {isWorse, resourceHealth, type HealthCode} from './argocd-health.js'
import type {PulledManifest} from './kokumi-puller.js'

/** argoproj/argo-cd common/common.go ArgoCDSSAManager: the field manager of Argo CD's server-side syncs. */
export const ARGOCD_SSA_MANAGER = 'argocd-controller'
export const ARGOCD_NAMESPACE = 'argocd'
export const APPLICATIONS = {group: 'argoproj.io', version: 'v1alpha1', plural: 'applications'}

/** Kinds the bundles hold that are cluster-scoped (everything else is namespaced). */
const CLUSTER_SCOPED = new Set([
  'Namespace',
  'ClusterRole',
  'ClusterRoleBinding',
  'CustomResourceDefinition',
  'PriorityClass',
  'StorageClass',
  'ValidatingWebhookConfiguration',
  'MutatingWebhookConfiguration',
  'CiliumClusterwideNetworkPolicy',
])

export type AppObj = {
  apiVersion?: string
  kind?: string
  metadata: {
    name: string
    namespace?: string
    generation?: number
    resourceVersion?: string
    annotations?: Record<string, string>
    labels?: Record<string, string>
  }
  spec?: Record<string, any>
  status?: Record<string, any>
}

export interface ArgoCdSimulatorOptions {
  kubeconfigPath: string
  kubeConfig: KubeConfig
  /** The harness registry client (stands in for Kokumi's in-cluster registry). */
  oci: OciClient
  /** HEAD of `repository:reference` in the registry: its digest, or undefined when absent. */
  headManifest(repository: string, reference: string): Promise<string | undefined>
  /** The shared event log of the stack simulator. */
  events: string[]
  /**
   * Least time between two comparisons of one Application at the same revision (default
   * 1000 ms). Argo CD refreshes on every watch event of a managed object; polling every kind
   * on every round of the stack simulator would load the shared test machine.
   */
  compareIntervalMs?: number
  /**
   * `required` (default): act only while a pod of the application controller is Ready (see the
   * header). `assumed`: a bare control plane with Argo CD's CRDs and no Argo CD workloads, where
   * a test plays the controller as always running.
   */
  applicationController?: 'required' | 'assumed'
}

/** The argo-cd chart's API server Deployment (templates/argocd-server/), and the Secret it keeps the first admin password in. */
const ARGO_SERVER = 'argocd-server'
const INITIAL_ADMIN_SECRET = 'argocd-initial-admin-secret'

/** The argo-cd chart's application controller (templates/argocd-application-controller/). */
export const APPLICATION_CONTROLLER = {namespace: ARGOCD_NAMESPACE, name: 'argocd-application-controller'}

export interface ArgoCdSimulator {
  /** One reconciliation of Application `app` (Order `orderNamespace/name`), its source in `repository`. */
  syncApplication(app: AppObj, orderNamespace: string, repository: string | undefined): Promise<void>
}

/** util/argo/resource_tracking.go: the annotation key and `<app>:<group>/<kind>:<namespace>/<name>`. */
export const TRACKING_ANNOTATION = 'argocd.argoproj.io/tracking-id'
const SYNC_OPTIONS_ANNOTATION = 'argocd.argoproj.io/sync-options'
const COMPARE_OPTIONS_ANNOTATION = 'argocd.argoproj.io/compare-options'
const IGNORE_HEALTHCHECK_ANNOTATION = 'argocd.argoproj.io/ignore-healthcheck'
/** Self-heal backoff: cmd/argocd-application-controller flags --self-heal-backoff-timeout-seconds 2, -factor 3, -cap-seconds 300. */
const SELF_HEAL_BACKOFF = {firstMs: 2_000, factor: 3, capMs: 300_000}

export function trackingId(app: string, group: string, kind: string, namespace: string, name: string): string {
  return `${app}:${group}/${kind}:${namespace}/${name}`
}

/** resource_tracking.go ParseAppInstanceValue. */
function parseTrackingId(value: string | undefined): {app: string; group: string; kind: string; namespace: string; name: string} | undefined {
  if (!value) return undefined
  const parts = value.split(':')
  if (parts.length < 3) return undefined
  const [app, gk, ...rest] = parts
  const nsName = rest.join(':')
  const g = gk!.split('/')
  const n = nsName.split('/')
  if (g.length !== 2 || n.length !== 2) return undefined
  return {app: app!, group: g[0]!, kind: g[1]!, namespace: n[0]!, name: n[1]!}
}

/** resource/annotations HasAnnotationOption: a comma-separated option list holding `option`. */
function hasOption(obj: KubeObject | undefined, annotation: string, option: string): boolean {
  return (obj?.metadata.annotations?.[annotation] ?? '').split(',').some((o) => o.trim() === option)
}

const groupOf = (apiVersion: string): string => (apiVersion.includes('/') ? apiVersion.split('/')[0]! : '')
const keyOf = (group: string, kind: string, namespace: string | undefined, name: string): string => `${group}/${kind}/${namespace ?? ''}/${name}`
const objKey = (o: KubeObject): string => keyOf(groupOf(o.apiVersion), o.kind, o.metadata.namespace, o.metadata.name)

interface ResourceState {
  target?: KubeObject
  live?: KubeObject
  group: string
  kind: string
  version: string
  namespace?: string
  name: string
  status: 'Synced' | 'OutOfSync'
  requiresPruning: boolean
}

interface Comparison {
  sync: 'Synced' | 'OutOfSync'
  health: HealthCode
  resources: ResourceState[]
}

export function createArgoCdSimulator(opts: ArgoCdSimulatorOptions): ArgoCdSimulator {
  const custom = opts.kubeConfig.makeApiClient(CustomObjectsApi)
  const ext = opts.kubeConfig.makeApiClient(ApiextensionsV1Api)
  const {oci, events, headManifest} = opts
  let applicationStatusSubresource: boolean | undefined
  let kube: Promise<Kube> | undefined
  // Per Application: every kind its revisions held (the kinds whose live objects it may track).
  const appKinds = new Map<string, Map<string, {apiVersion: string; kind: string}>>()
  // The revision's objects as parsed from its manifest.yaml, by `repository@digest` (a digest's
  // content never changes; parsing it again each round was most of an idle cluster's CPU here).
  const manifests = new Map<string, readonly KubeObject[]>()
  // Live objects by key, with the resourceVersion they were read at.
  const liveCache = new Map<string, KubeObject>()
  // Diff verdicts by live uid/resourceVersion and target content.
  const diffCache = new Map<string, boolean>()
  const lastCompared = new Map<string, {revision: string; at: number}>()
  let gcRuns: Promise<boolean> | undefined
  let adminInitialized = false

  function connect(): Promise<Kube> {
    kube ??= connectKube({kubeconfig: opts.kubeconfigPath})
    kube.catch(() => (kube = undefined))
    return kube
  }

  /** The revision's objects, namespaced into the destination and stamped with the tracking id. */
  async function targetObjects(app: AppObj, repository: string, digest: string): Promise<KubeObject[]> {
    const ref = `${repository}@${digest}`
    let parsed = manifests.get(ref)
    if (parsed === undefined) {
      const fetched = await oci.getManifest(repository, digest)
      let text: string | undefined
      for (const layer of (fetched.manifest as PulledManifest).layers)
        text ??= untarSync(await oci.getBlob(repository, layer.digest), ref)
          .get('manifest.yaml')
          ?.toString('utf8')
      if (text === undefined) throw new Error(`${ref} holds no manifest.yaml`)
      parsed = parseObjects(text, ref)
      manifests.set(ref, parsed)
    }
    const k = await connect()
    const destination = app.spec?.destination?.namespace as string | undefined
    const objects: KubeObject[] = []
    for (const o of parsed) {
      const served = await k.resourceFor(o.apiVersion, o.kind)
      const clusterScoped = served ? !served.namespaced : CLUSTER_SCOPED.has(o.kind)
      // gitops-engine pkg/sync/sync_context.go: the target namespace is set on namespaced
      // resources that carry none; state.go normalizeClusterScopeTracking drops it from cluster-scoped ones.
      const namespace = clusterScoped ? undefined : o.metadata.namespace || destination
      const id = trackingId(app.metadata.name, groupOf(o.apiVersion), o.kind, namespace ?? destination ?? '', o.metadata.name)
      const {namespace: _ns, ...meta} = o.metadata
      objects.push({...o, metadata: {...meta, ...(namespace ? {namespace} : {}), annotations: {...o.metadata.annotations, [TRACKING_ANNOTATION]: id}}})
    }
    return objects
  }

  /** Live objects of these kinds that are targets or carry this Application's tracking id (the cluster cache's managed objects). */
  async function liveObjects(appName: string, kinds: Iterable<{apiVersion: string; kind: string}>, targetKeys: Set<string>): Promise<Map<string, KubeObject>> {
    const k = await connect()
    const found = new Map<string, KubeObject>()
    for (const {apiVersion, kind} of kinds) {
      const resource = await k.resourceFor(apiVersion, kind)
      if (!resource) continue
      const root = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`
      const list = await k.request<{items: KubeObject[]}>('GET', `${root}/${resource.plural}`, {accept: PARTIAL_OBJECT_METADATA_LIST})
      for (const item of list.items ?? []) {
        const key = keyOf(groupOf(apiVersion), kind, item.metadata.namespace, item.metadata.name)
        const tracked = parseTrackingId(item.metadata.annotations?.[TRACKING_ANNOTATION])
        if (!targetKeys.has(key) && tracked?.app !== appName) continue
        const cached = liveCache.get(key)
        if (cached && cached.metadata.resourceVersion === item.metadata.resourceVersion && cached.metadata.uid === item.metadata.uid) {
          found.set(key, cached)
          continue
        }
        const full = await getObject(k, {apiVersion, kind, name: item.metadata.name, namespace: item.metadata.namespace})
        if (!full) continue
        liveCache.set(key, full)
        found.set(key, full)
      }
    }
    return found
  }

  /** Would applying `target` as argocd-controller change the live object? A server-side dry run, as Argo CD's merge diff predicts. */
  async function differs(target: KubeObject, live: KubeObject): Promise<boolean> {
    const cacheKey = `${live.metadata.uid}/${live.metadata.resourceVersion}/${createHash('sha256').update(JSON.stringify(target)).digest('hex')}`
    const cached = diffCache.get(cacheKey)
    if (cached !== undefined) return cached
    const k = await connect()
    const path = await resolvePath(k, {apiVersion: target.apiVersion, kind: target.kind, name: target.metadata.name, namespace: target.metadata.namespace})
    let verdict: boolean
    try {
      const predicted = await k.request<KubeObject>('PATCH', path.item, {
        body: target,
        contentType: 'application/apply-patch+yaml',
        query: {fieldManager: ARGOCD_SSA_MANAGER, force: true, dryRun: 'All'},
      })
      verdict = !isDeepStrictEqual(comparable(predicted), comparable(live))
    } catch {
      verdict = true // Argo CD reports a resource it cannot diff as OutOfSync.
    }
    diffCache.set(cacheKey, verdict)
    return verdict
  }

  /** CompareAppState for one revision: each resource's sync status, the Application's sync and health. */
  async function compare(app: AppObj, targets: KubeObject[]): Promise<Comparison> {
    const name = app.metadata.name
    const kinds = appKinds.get(name) ?? new Map<string, {apiVersion: string; kind: string}>()
    appKinds.set(name, kinds)
    for (const t of targets) kinds.set(`${groupOf(t.apiVersion)}/${t.kind}`, {apiVersion: t.apiVersion, kind: t.kind})
    for (const r of (app.status?.resources as any[] | undefined) ?? []) {
      const gk = `${r.group ?? ''}/${r.kind}`
      if (!kinds.has(gk) && r.version) kinds.set(gk, {apiVersion: r.group ? `${r.group}/${r.version}` : r.version, kind: r.kind})
    }
    const targetKeys = new Set(targets.map(objKey))
    const live = await liveObjects(name, kinds.values(), targetKeys)
    const resources: ResourceState[] = []
    for (const target of targets) {
      const l = live.get(objKey(target))
      const modified = l ? await differs(target, l) : true
      resources.push({
        target,
        live: l,
        group: groupOf(target.apiVersion),
        kind: target.kind,
        version: versionOf(target.apiVersion),
        namespace: target.metadata.namespace,
        name: target.metadata.name,
        status: modified ? 'OutOfSync' : 'Synced',
        requiresPruning: false,
      })
    }
    for (const [key, l] of live) {
      if (targetKeys.has(key)) continue
      const id = parseTrackingId(l.metadata.annotations?.[TRACKING_ANNOTATION])
      // state.go isSelfReferencedObj: a tracking id copied onto another object does not make it ours.
      if (
        !id ||
        id.group !== groupOf(l.apiVersion) ||
        id.kind !== l.kind ||
        id.name !== l.metadata.name ||
        (l.metadata.namespace && id.namespace !== l.metadata.namespace)
      )
        continue
      resources.push({
        live: l,
        group: groupOf(l.apiVersion),
        kind: l.kind,
        version: versionOf(l.apiVersion),
        namespace: l.metadata.namespace,
        name: l.metadata.name,
        status: 'OutOfSync',
        requiresPruning: true,
      })
    }
    const sync = resources.some((r) => r.status === 'OutOfSync' && !(r.requiresPruning && hasOption(r.live, COMPARE_OPTIONS_ANNOTATION, 'IgnoreExtraneous')))
      ? 'OutOfSync'
      : 'Synced'
    // controller/health.go setApplicationHealth.
    let health: HealthCode = 'Healthy'
    let anyLive = false
    for (const r of resources) {
      if (r.live) anyLive = true
      if (!r.live || r.live.metadata.annotations?.[IGNORE_HEALTHCHECK_ANNOTATION] === 'true') continue
      const h = resourceHealth(r.live)
      if (h && isWorse(health, h.status)) health = h.status
    }
    if (resources.length > 0 && !anyLive && isWorse(health, 'Missing')) health = 'Missing'
    return {sync, health, resources}
  }

  /** One sync operation: apply (all, or only `only`), then prune the extraneous resources when asked. */
  async function runSync(targets: KubeObject[], cmp: Comparison, prune: boolean, only?: Set<string>): Promise<string | undefined> {
    const k = await connect()
    const apply = only ? targets.filter((t) => only.has(objKey(t))) : targets
    try {
      const results = await serverSideApply(k, apply, {fieldManager: ARGOCD_SSA_MANAGER, force: true})
      let pruned = 0
      for (const r of cmp.resources) {
        if (!r.requiresPruning || !r.live || (only && !only.has(objKey(r.live)))) continue
        // sync_context.go: `Prune=false` resources are skipped ("ignored (no prune)"); without prune, "ignored (requires pruning)".
        if (!prune || hasOption(r.live, SYNC_OPTIONS_ANNOTATION, 'Prune=false')) continue
        if (r.live.metadata.deletionTimestamp) continue
        await deleteObject(
          k,
          {apiVersion: r.live.apiVersion, kind: r.kind, name: r.name, namespace: r.namespace},
          {propagationPolicy: await prunePropagation(k)},
        )
        pruned++
      }
      events.push(`synced ${apply.length} objects: ${results.filter((r) => r.result !== 'unchanged').length} changed, ${pruned} pruned`)
      return undefined
    } catch (err) {
      return (err as Error).message.split('\n')[0]
    }
  }

  /** A Ready pod of the application controller: the StatefulSet's, or the Deployment's ReplicaSets' (see the header). */
  async function controllerRunning(): Promise<boolean> {
    if ((opts.applicationController ?? 'required') === 'assumed') return true
    return podReady(APPLICATION_CONTROLLER.name)
  }

  /** A Ready pod of the workload `name` in Argo CD's namespace: its StatefulSet's, or its Deployment's ReplicaSets'. */
  async function podReady(name: string): Promise<boolean> {
    const k = await connect()
    const pods = await k.request<{items?: (KubeObject & {status?: {conditions?: {type: string; status: string}[]}})[]}>(
      'GET',
      `/api/v1/namespaces/${ARGOCD_NAMESPACE}/pods`,
    )
    const replicaSet = new RegExp(`^${name}-[a-z0-9]+$`)
    return (pods.items ?? []).some((pod) => {
      const owners = (pod.metadata as {ownerReferences?: {kind: string; name: string}[]}).ownerReferences ?? []
      const ours = owners.some((o) => (o.kind === 'StatefulSet' && o.name === name) || (o.kind === 'ReplicaSet' && replicaSet.test(o.name)))
      return ours && !pod.metadata.deletionTimestamp && (pod.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True')
    })
  }

  /**
   * What argocd-server does when it starts (argoproj/argo-cd util/settings/settings.go
   * InitializeSettings, called by the API server before it serves; read in the github.com/argoproj/
   * argo-cd/v2 module, the newest source readable here: v3.4.4, the app of the installed chart, could
   * not be read, so its sameness is assumed): an enabled admin account
   * (argocd-cm `admin.enabled` not "false") with no `admin.password` in argocd-secret gets a
   * random password of 16 characters from [0-9A-Za-z-], written in plain text to
   * argocd-initial-admin-secret (field `password`, CreateOrUpdateSecretField) and saved as its
   * bcrypt hash with `admin.passwordMtime` in argocd-secret. A password already there is left
   * alone, so a deleted argocd-initial-admin-secret is not made again. Done before a
   * reconciliation reads health, so an Application that reads Healthy has a started server.
   */
  async function serverInitializesSettings(): Promise<void> {
    if (adminInitialized || !(await podReady(ARGO_SERVER))) return
    const k = await connect()
    const secretRef = {apiVersion: 'v1', kind: 'Secret', namespace: ARGOCD_NAMESPACE}
    const settings = await getObject<KubeObject & {data?: Record<string, string>}>(k, {...secretRef, name: 'argocd-secret'})
    if (!settings) return // GetSettings fails without it; the server starts again later
    const cm = await getObject<KubeObject & {data?: Record<string, string>}>(k, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      namespace: ARGOCD_NAMESPACE,
      name: 'argocd-cm',
    })
    if (settings.data?.['admin.password'] || cm?.data?.['admin.enabled'] === 'false') {
      adminInitialized = true
      return
    }
    const letters = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-'
    const password = Array.from(randomBytes(16), (b) => letters[b % letters.length]).join('')
    const b64 = (text: string) => Buffer.from(text).toString('base64')
    const initial = {apiVersion: 'v1', kind: 'Secret', metadata: {name: INITIAL_ADMIN_SECRET, namespace: ARGOCD_NAMESPACE}, data: {password: b64(password)}}
    const path = `/api/v1/namespaces/${ARGOCD_NAMESPACE}/secrets`
    try {
      await k.request('POST', path, {body: initial, query: {fieldManager: ARGO_SERVER}})
    } catch (err) {
      if (!isCode(err, 409)) throw err
      await k.request('PATCH', `${path}/${INITIAL_ADMIN_SECRET}`, {
        body: {data: initial.data},
        contentType: 'application/merge-patch+json',
        query: {fieldManager: ARGO_SERVER},
      })
    }
    const mtime = new Date().toISOString().replace(/\.\d+Z$/, 'Z')
    await k.request('PATCH', `${path}/argocd-secret`, {
      body: {data: {'admin.password': b64(bcryptHash(password, randomBytes(16))), 'admin.passwordMtime': b64(mtime)}},
      contentType: 'application/merge-patch+json',
      query: {fieldManager: ARGO_SERVER},
    })
    adminInitialized = true
    events.push(`argocd-server initialized the admin password (${ARGOCD_NAMESPACE}/${INITIAL_ADMIN_SECRET})`)
  }

  /** A reconciliation of the Application: compare, maybe auto-sync or run the requested operation, write status. */
  async function reconcile(app: AppObj, orderNamespace: string, repository: string | undefined): Promise<void> {
    await serverInitializesSettings()
    if (!(await controllerRunning())) return
    const target = app.spec?.source?.targetRevision as string
    const current = (app.status ?? {}) as Record<string, any>
    const operation = (app as AppObj & {operation?: {sync?: {prune?: boolean}}}).operation
    let operationState = current.operationState as Record<string, any> | undefined
    let sync: string
    let health: string
    let revision: string | undefined = current.sync?.revision
    let resources: Record<string, unknown>[] | undefined = current.resources
    let operated = false
    if (current.sync?.revision !== target && !['Progressing', 'Missing'].includes(current.health?.status)) {
      // First sight of this revision: Argo CD compares before it syncs.
      sync = 'OutOfSync'
      health = 'Progressing'
    } else if (!operation && current.sync?.revision === target && recentlyCompared(app.metadata.name, target)) {
      return
    } else if (repository && (await headManifest(repository, target))) {
      lastCompared.set(app.metadata.name, {revision: target, at: Date.now()})
      revision = target
      const targets = await targetObjects(app, repository, target)
      let cmp = await compare(app, targets)
      const automated = app.spec?.syncPolicy?.automated as {prune?: boolean; selfHeal?: boolean} | undefined
      const lastResult = operationState?.syncResult as {revision?: string; source?: unknown} | undefined
      const attempted = lastResult?.revision === target && isDeepStrictEqual(lastResult?.source, app.spec?.source)
      let plan: {prune: boolean; only?: Set<string>; selfHealAttempts: number; automated: boolean} | undefined
      if (operation) {
        // `argocd app sync` / ichor's stack sync set `operation`; appcontroller.go processRequestedAppOperations runs it.
        plan = {prune: operation.sync?.prune === true, selfHealAttempts: 0, automated: false}
      } else if (automated && cmp.sync === 'OutOfSync') {
        const pruneOnly = cmp.resources.every((r) => r.status === 'Synced' || r.requiresPruning)
        if (!automated.prune && pruneOnly) {
          // appcontroller.go autoSync: "need to prune extra resources only but automated prune is disabled".
        } else if (!attempted || operationState?.phase !== 'Succeeded') {
          // A new revision, or one whose sync failed (see the simplification above).
          plan = {prune: automated.prune === true, selfHealAttempts: 0, automated: true}
        } else if (automated.selfHeal) {
          const attempts = (operationState?.operation?.sync?.selfHealAttemptsCount as number | undefined) ?? 0
          const delay = attempts === 0 ? 0 : Math.min(SELF_HEAL_BACKOFF.firstMs * SELF_HEAL_BACKOFF.factor ** (attempts - 1), SELF_HEAL_BACKOFF.capMs)
          const finished = Date.parse(operationState?.finishedAt ?? '') || 0
          if (Date.now() - finished >= delay) {
            const only = new Set(cmp.resources.filter((r) => r.status !== 'Synced').map((r) => keyOf(r.group, r.kind, r.namespace, r.name)))
            plan = {prune: automated.prune === true, only, selfHealAttempts: attempts + 1, automated: true}
          }
        }
        // selfHeal false on a revision already synced: "Skipping auto-sync: most recent sync already to <revision>".
      }
      if (plan) {
        operated = true
        const startedAt = new Date().toISOString().replace(/\.\d+Z$/, 'Z')
        const failed = await runSync(targets, cmp, plan.prune, plan.only)
        const op = operation ?? {
          sync: {
            revision: target,
            prune: plan.prune,
            syncOptions: app.spec?.syncPolicy?.syncOptions,
            ...(plan.selfHealAttempts ? {selfHealAttemptsCount: plan.selfHealAttempts} : {}),
          },
          initiatedBy: {automated: true},
          retry: {limit: 5},
        }
        operationState = {
          operation: op,
          phase: failed ? 'Failed' : 'Succeeded',
          message: failed ?? 'successfully synced (all tasks run)',
          syncResult: {revision: target, source: app.spec?.source},
          startedAt,
          finishedAt: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
        }
        if (failed) events.push(`Application ${ARGOCD_NAMESPACE}/${app.metadata.name} sync failed: ${failed}`)
        cmp = await compare(app, targets)
      }
      sync = cmp.sync
      health = cmp.health
      resources = cmp.resources.map((r) => ({
        ...(r.group ? {group: r.group} : {}),
        version: r.version,
        kind: r.kind,
        ...(r.namespace ? {namespace: r.namespace} : {}),
        name: r.name,
        status: r.status,
        ...(r.requiresPruning ? {requiresPruning: true} : {}),
      }))
    } else {
      sync = 'OutOfSync'
      health = 'Missing'
    }
    if (health === 'Healthy') await serverInitializesSettings()
    const status = {
      ...current,
      sync: {status: sync, ...(revision ? {revision} : {}), comparedTo: {source: app.spec?.source, destination: app.spec?.destination}},
      health: {status: health},
      sourceType: 'Directory',
      ...(resources ? {resources} : {}),
      ...(operationState ? {operationState} : {}),
    }
    if (!operated && isDeepStrictEqual(JSON.parse(JSON.stringify(status)), current)) return
    const {operation: _done, ...rest} = app as AppObj & {operation?: unknown}
    const clearOperation = operated && operation !== undefined
    const body = {...(clearOperation ? rest : app), status}
    try {
      if (await hasApplicationStatusSubresource()) {
        // The operation lives in the main resource: cleared there first, then the status.
        const cleared = clearOperation
          ? ((await custom.replaceNamespacedCustomObject({...APPLICATIONS, namespace: ARGOCD_NAMESPACE, name: app.metadata.name, body: rest})) as AppObj)
          : app
        await custom.replaceNamespacedCustomObjectStatus({...APPLICATIONS, namespace: ARGOCD_NAMESPACE, name: app.metadata.name, body: {...cleared, status}})
      } else {
        // Argo CD's Application CRD has no status subresource: status is written with the object.
        await custom.replaceNamespacedCustomObject({...APPLICATIONS, namespace: ARGOCD_NAMESPACE, name: app.metadata.name, body})
      }
      const line = `Application ${ARGOCD_NAMESPACE}/${app.metadata.name} (Order ${orderNamespace}/${app.metadata.name}) ${sync}/${health}${revision ? ` at ${revision}` : ''}`
      if (events[events.length - 1] !== line) events.push(line)
    } catch (err) {
      if (!isCode(err, 409) && !isCode(err, 404)) throw err
    }
  }

  /**
   * sync_context.go prunes with foreground propagation; its `foregroundDeletion` finalizer is
   * removed by kube-controller-manager's garbage collector. A harness without one (no
   * kube-controller-manager leader Lease) would keep every pruned object forever, so there the
   * deletion is background: a pruned object without dependents goes at once, as with the collector.
   */
  async function prunePropagation(k: Kube): Promise<'Foreground' | 'Background'> {
    gcRuns ??= getObject(k, {apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace: 'kube-system', name: 'kube-controller-manager'}).then(
      (l) => l !== undefined,
    )
    const runs = await gcRuns.catch(() => false)
    if (!runs) gcRuns = undefined // Ask again next time: the controller manager may start later.
    return runs ? 'Foreground' : 'Background'
  }

  function recentlyCompared(name: string, revision: string): boolean {
    const last = lastCompared.get(name)
    return last !== undefined && last.revision === revision && Date.now() - last.at < (opts.compareIntervalMs ?? 1000)
  }

  async function hasApplicationStatusSubresource(): Promise<boolean> {
    if (applicationStatusSubresource === undefined) {
      const crd = await ext.readCustomResourceDefinition({name: 'applications.argoproj.io'})
      const version = crd.spec.versions.find((v) => v.name === APPLICATIONS.version)
      applicationStatusSubresource = Boolean(version?.subresources?.status)
    }
    return applicationStatusSubresource
  }

  return {syncApplication: reconcile}
}

const versionOf = (apiVersion: string): string => (apiVersion.includes('/') ? apiVersion.split('/')[1]! : apiVersion)

/** What a comparison of two versions of an object looks at: not the server's bookkeeping nor the status. */
function comparable(o: KubeObject): unknown {
  const {managedFields: _m, resourceVersion: _r, generation: _g, ...metadata} = o.metadata
  const {status: _s, ...rest} = o as KubeObject & {status?: unknown}
  return {...rest, metadata}
}

function isCode(err: unknown, code: number): boolean {
  return (err as {code?: number}).code === code
}
