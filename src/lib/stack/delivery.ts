// Read-only reads of a stack component's delivery, shared by the stack steps and `stack status`:
// its Order, its Application, why that Application is not Healthy, and whether the component is
// delivered. Nothing here writes; each read is one or two GETs.
import type {Kube} from '../kube/client.js'
import {IchorError} from '../errors/errors.js'
import {getObject, listObjects, type KubeObject} from '../kube/objects.js'
import {APPLICATION_API_VERSION, COMPONENT_NAMESPACE, ORDER_API_VERSION} from './orders.js'
import {ARGOCD_NAMESPACE} from '../constants.js'
import type {StackComponent} from '../state/installation-types.js'

export interface OrderState {
  generation?: number
  ready: boolean
  /** The Order's status has seen its current spec. */
  current: boolean
  latestArtifactDigest?: string
  spec?: unknown
}

type OrderObject = KubeObject & {
  spec?: {source?: {oci?: string; version?: string}}
  status?: {conditions?: {type: string; status: string}[]; observedGeneration?: number; latestArtifactDigest?: string; latestPreparationName?: string}
}

/**
 * A spec change that is no render input (a promotion mode switch) bumps the generation, but
 * Kokumi's Order controller returns before writing any status when the hash of the render
 * inputs is unchanged (0.14.0 internal/controller/order_controller.go reconcileRender 135-138),
 * so observedGeneration stays behind for good. The Order is current then when its latest
 * Preparation was rendered from the source it asks for now (Kokumi stamps the version label).
 */
async function renderedFromCurrentSource(kube: Kube, order: OrderObject): Promise<boolean> {
  const name = order.status?.latestPreparationName
  if (!name) return false
  type Prep = KubeObject & {spec?: {source?: {oci?: string}}}
  const prep = await getObject<Prep>(kube, {apiVersion: ORDER_API_VERSION, kind: 'Preparation', name, namespace: order.metadata.namespace})
  return (
    prep !== undefined &&
    prep.metadata.labels?.['delivery.kokumi.dev/version'] === order.spec?.source?.version &&
    prep.spec?.source?.oci === order.spec?.source?.oci
  )
}

/** The component's Order, or undefined when it (or Kokumi's CRD) does not exist. */
export async function readOrder(kube: Kube, component: StackComponent): Promise<OrderState | undefined> {
  const order = await getObject<OrderObject>(kube, {apiVersion: ORDER_API_VERSION, kind: 'Order', name: component, namespace: COMPONENT_NAMESPACE[component]})
  if (!order) return undefined
  const status = order.status
  return {
    generation: order.metadata.generation,
    ready: status?.conditions?.some((x) => x.type === 'Ready' && x.status === 'True') ?? false,
    current:
      status?.observedGeneration === undefined || status.observedGeneration === order.metadata.generation || (await renderedFromCurrentSource(kube, order)),
    latestArtifactDigest: status?.latestArtifactDigest,
    spec: order.spec,
  }
}

/** One entry of an Application's status.resources: what it manages. */
export interface ApplicationResource {
  group?: string
  kind: string
  namespace?: string
  name: string
}

export interface ApplicationState {
  sync?: string
  health?: string
  revision?: string
  /** What the Application manages (Argo CD's status.resources); undefined before its first compare. */
  resources?: ApplicationResource[]
}

/** The Application Kokumi made for the component, or undefined (or Argo CD's CRD) when absent. */
export async function readApplication(kube: Kube, component: StackComponent): Promise<ApplicationState | undefined> {
  type App = KubeObject & {status?: {sync?: {status?: string; revision?: string}; health?: {status?: string}; resources?: ApplicationResource[]}}
  const app = await getObject<App>(kube, {apiVersion: APPLICATION_API_VERSION, kind: 'Application', name: component, namespace: ARGOCD_NAMESPACE})
  if (!app) return undefined
  const resources = app.status?.resources?.map(({group, kind, namespace, name}) => ({...(group ? {group} : {}), kind, ...(namespace ? {namespace} : {}), name}))
  return {sync: app.status?.sync?.status, health: app.status?.health?.status, revision: app.status?.sync?.revision, ...(resources ? {resources} : {})}
}

type PodObject = KubeObject & {
  status?: {
    phase?: string
    conditions?: {type: string; status: string; reason?: string; message?: string}[]
    containerStatuses?: ContainerStatus[]
    initContainerStatuses?: ContainerStatus[]
  }
}
interface ContainerStatus {
  name: string
  ready?: boolean
  restartCount?: number
  state?: {waiting?: {reason?: string; message?: string}; terminated?: {reason?: string; exitCode?: number}}
  lastState?: {terminated?: {reason?: string; exitCode?: number}}
}
type WorkloadObject = KubeObject & {
  spec?: {replicas?: number; selector?: {matchLabels?: Record<string, string>}}
  status?: {observedGeneration?: number; readyReplicas?: number; updatedReplicas?: number; numberReady?: number; desiredNumberScheduled?: number}
}

/** At most this many pods are named per workload: the first few say what the rest do. */
const PODS_NAMED = 2

/**
 * Why an Application that is not Healthy is not: each workload it manages that is not fully
 * ready, with what its pods wait on, as `kubectl describe` would put it ("Deployment
 * argocd/argocd-repo-server 0/1 ready: pod argocd-repo-server-7d9f-x container repo-server
 * CrashLoopBackOff, 3 restarts"). Argo CD v3 keeps each resource's health out of the
 * Application (argo-cd v3.0 upgrade notes: `controller.resource.health.persist` defaults to
 * false), so the workloads themselves are read. Empty when every workload is ready.
 */
export async function explainApplicationHealth(kube: Kube, app: ApplicationState): Promise<string[]> {
  const workloads = (app.resources ?? []).filter((r) => r.group === 'apps' && ['Deployment', 'StatefulSet', 'DaemonSet'].includes(r.kind) && r.namespace)
  const out = await Promise.all(workloads.map((r) => explainWorkload(kube, r as ApplicationResource & {namespace: string})))
  return out.filter((x): x is string => x !== undefined)
}

async function explainWorkload(kube: Kube, r: ApplicationResource & {namespace: string}): Promise<string | undefined> {
  const w = await getObject<WorkloadObject>(kube, {apiVersion: 'apps/v1', kind: r.kind, name: r.name, namespace: r.namespace})
  const id = `${r.kind} ${r.namespace}/${r.name}`
  if (!w) return `${id} is missing`
  const daemon = r.kind === 'DaemonSet'
  const desired = daemon ? (w.status?.desiredNumberScheduled ?? 0) : (w.spec?.replicas ?? 1)
  const ready = daemon ? (w.status?.numberReady ?? 0) : (w.status?.readyReplicas ?? 0)
  const observed = (w.status?.observedGeneration ?? 0) >= (w.metadata.generation ?? 0)
  if (ready >= desired && observed) return undefined
  const selector = Object.entries(w.spec?.selector?.matchLabels ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .join(',')
  const pods = selector ? await listObjects<PodObject>(kube, {apiVersion: 'v1', kind: 'Pod', namespace: r.namespace}, {labelSelector: selector}) : []
  const reasons = pods
    .filter((p) => !p.metadata.deletionTimestamp)
    .map(podProblem)
    .filter((x): x is string => x !== undefined)
  const shown = reasons.slice(0, PODS_NAMED)
  if (reasons.length > shown.length) shown.push(`${reasons.length - shown.length} more pods alike`)
  return `${id} ${ready}/${desired} ready${shown.length > 0 ? `: ${shown.join('; ')}` : observed ? '' : ' (its controller has not seen its latest spec yet)'}`
}

/** What keeps one pod from Ready, or undefined when it is Ready. */
function podProblem(pod: PodObject): string | undefined {
  const conditions = pod.status?.conditions ?? []
  if (conditions.some((c) => c.type === 'Ready' && c.status === 'True')) return undefined
  const name = `pod ${pod.metadata.name}`
  const scheduled = conditions.find((c) => c.type === 'PodScheduled')
  if (scheduled?.status === 'False') return `${name} is not scheduled (${scheduled.reason ?? 'Pending'}${scheduled.message ? `: ${scheduled.message}` : ''})`
  const containers = [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])]
  for (const c of containers) {
    if (c.ready) continue
    const waiting = c.state?.waiting
    const last = c.lastState?.terminated ?? c.state?.terminated
    const restarts = c.restartCount ? `, ${c.restartCount} restart${c.restartCount === 1 ? '' : 's'}` : ''
    const exit = last?.exitCode !== undefined ? `, last exit ${last.exitCode}${last.reason ? ` (${last.reason})` : ''}` : ''
    if (waiting?.reason) return `${name} container ${c.name} ${waiting.reason}${waiting.message ? ` (${waiting.message})` : ''}${restarts}${exit}`
    if (c.restartCount || last) return `${name} container ${c.name} not ready${restarts}${exit}`
  }
  return `${name} is ${pod.status?.phase ?? 'Pending'}, not Ready`
}

export interface DeliveryState {
  done: boolean
  state: string
  order?: OrderState
  application?: ApplicationState
}

/**
 * The source digest Kokumi rendered a component's Preparation from, for the Preparation whose
 * artifact is `artifactDigest` (Kokumi's Preparation CRD requires spec.source.baseDigest).
 * 'none' when no such Preparation exists (yet); 'unserved' when the cluster has no Preparation kind.
 */
async function readPreparationSource(kube: Kube, component: StackComponent, artifactDigest: string): Promise<string | 'none' | 'unserved'> {
  if (!(await kube.resourceFor(ORDER_API_VERSION, 'Preparation'))) return 'unserved'
  type Preparation = KubeObject & {spec?: {orderName?: string; source?: {baseDigest?: string}; artifact?: {digest?: string}}}
  const list = await listObjects<Preparation>(kube, {apiVersion: ORDER_API_VERSION, kind: 'Preparation', namespace: COMPONENT_NAMESPACE[component]})
  const p = list.find((x) => x.spec?.orderName === component && x.spec.artifact?.digest === artifactDigest)
  return p?.spec?.source?.baseDigest ?? 'none'
}

/**
 * A component is delivered when its Order has seen its current spec (Ready, observed
 * generation) and its Application is Synced and Healthy at the artifact that Order
 * produced: an Application still healthy at the previous revision does not count. With
 * `pushedDigest`, that artifact must also have been rendered from the bundle ichor pushed:
 * Orders name a tag, and a tag moved in the (anonymous, writable) registry in between would
 * have Argo CD deploy someone else's manifests. That is an error, never something to wait out.
 */
export async function readDelivery(kube: Kube, component: StackComponent, options: {pushedDigest?: string; pushedTag?: string} = {}): Promise<DeliveryState> {
  const ns = COMPONENT_NAMESPACE[component]
  const order = await readOrder(kube, component)
  if (!order) return {done: false, state: 'no Order yet'}
  // An Order not yet moved to the pushed tag serves an older bundle, rightly from another digest.
  const asked = (order.spec as {source?: {version?: string}} | undefined)?.source?.version
  if (options.pushedTag && asked !== options.pushedTag)
    return {done: false, state: `Order ${ns}/${component} asks for ${asked ?? 'no version'}, not ${options.pushedTag} yet`, order}
  if (!order.ready || !order.current) return {done: false, state: `Order ${ns}/${component} not Ready for its current version yet`, order}
  const application = await readApplication(kube, component)
  if (!application) return {done: false, state: `Application ${ARGOCD_NAMESPACE}/${component} not created yet`, order}
  const wanted = order.latestArtifactDigest
  if (wanted && application.revision !== wanted) {
    return {
      done: false,
      state: `Application ${ARGOCD_NAMESPACE}/${component} at ${application.revision ?? 'no revision'}, Order serves ${wanted}`,
      order,
      application,
    }
  }
  if (options.pushedDigest && application.revision) {
    const source = await readPreparationSource(kube, component, application.revision)
    if (source === 'none') return {done: false, state: `no Preparation in ${ns} for ${application.revision} yet`, order, application}
    if (source !== 'unserved' && source !== options.pushedDigest) {
      throw new IchorError(
        `Application ${ARGOCD_NAMESPACE}/${component} serves ${application.revision}, which Kokumi rendered from ${source}, not from the bundle ichor pushed (${options.pushedDigest}): the tag was moved in the registry`,
        {
          hint: "treat the cluster as compromised: Argo CD applied those manifests with its rights; find what could write to Kokumi's registry (its network policies) before anything else",
        },
      )
    }
  }
  const done = application.sync === 'Synced' && application.health === 'Healthy'
  // Not Healthy: name the workloads that hold it back, so a timeout says which crash-loops.
  const why = done || application.health === undefined ? [] : await explainApplicationHealth(kube, application)
  return {
    done,
    state: `Application ${ARGOCD_NAMESPACE}/${component} ${application.sync ?? 'Unknown'}/${application.health ?? 'Unknown'}${why.length > 0 ? `: ${why.join('; ')}` : ''}`,
    order,
    application,
  }
}
