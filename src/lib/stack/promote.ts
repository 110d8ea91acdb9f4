// `ichor stack promote <component>` for an Order whose new Preparations wait for a person
// (autoDeploy Disabled / promotion Manual). Kokumi 0.14.0 and main take that approval from
// outside the UI too: the label delivery.kokumi.dev/approve-deploy=true on a Preparation makes
// the Preparation controller point the Order's Serving at it (api/v1alpha1/labels.go
// LabelApproveDeploy, internal/controller/preparation_controller.go).
import {IchorError} from '../errors/errors.js'
import type {Kube} from '../kube/client.js'
import {getObject, listObjects, type KubeObject} from '../kube/objects.js'
import {FIELD_MANAGER} from '../constants.js'
import {orderPromotion} from './kokumi-api.js'
import type {PromotionMode, StackComponent} from '../state/installation-types.js'
import {COMPONENT_NAMESPACE, ORDER_API_VERSION} from './orders.js'

export const APPROVE_DEPLOY_LABEL = 'delivery.kokumi.dev/approve-deploy'
/** Stamped on each Preparation from the Order at render time (0.14.0 order_controller.go createPreparation). */
export const AUTO_DEPLOY_LABEL = 'delivery.kokumi.dev/auto-deploy'
const ORDER_LABEL = 'delivery.kokumi.dev/order'

type OrderObject = KubeObject & {status?: {latestPreparationName?: string}}
type ServingObject = KubeObject & {spec?: {preparationName?: string}}

export interface PromotionState {
  preparation: string
  approved: boolean
  served: boolean
  /** Other Preparations of the Order that still carry the approval. */
  otherApprovals: string[]
}

type PreparationObject = KubeObject & {
  spec?: {orderName?: string; configHash?: string; source?: {oci?: string; baseDigest?: string}; artifact?: {digest?: string}}
}

/** The Order's Preparations (Kokumi labels each with its Order). */
export async function listPreparations(kube: Kube, namespace: string, order: string): Promise<PreparationObject[]> {
  return listObjects<PreparationObject>(kube, {apiVersion: ORDER_API_VERSION, kind: 'Preparation', namespace}, {labelSelector: `${ORDER_LABEL}=${order}`})
}

async function setPreparationLabel(kube: Kube, namespace: string, name: string, key: string, value: string | null): Promise<void> {
  await kube.request('PATCH', `/apis/${ORDER_API_VERSION}/namespaces/${namespace}/preparations/${name}`, {
    body: {metadata: {labels: {[key]: value}}},
    contentType: 'application/merge-patch+json',
    query: {fieldManager: FIELD_MANAGER, fieldValidation: 'Strict'},
  })
}

/**
 * Approves one Preparation and takes the approval off every other of its Order, those first.
 * Kokumi reconciles every Preparation again on each restart and resync, and each approved one
 * points the Serving at itself, the last processed winning (0.14.0
 * internal/controller/preparation_controller.go Reconcile 50-89, reconcileServing 92-161): two
 * approvals could bring an older bundle back. One approval per Order is the only stable state.
 */
export async function approvePreparation(kube: Kube, namespace: string, order: string, preparation: string): Promise<void> {
  for (const p of await listPreparations(kube, namespace, order)) {
    if (p.metadata.name !== preparation && p.metadata.labels?.[APPROVE_DEPLOY_LABEL] !== undefined)
      await setPreparationLabel(kube, namespace, p.metadata.name, APPROVE_DEPLOY_LABEL, null)
  }
  await setPreparationLabel(kube, namespace, preparation, APPROVE_DEPLOY_LABEL, 'true')
}

/**
 * After a promotion mode switch, one Preparation of the Order decides what Kokumi serves, and
 * only one. Kokumi stamps auto-deploy only at render time and its Preparation controller reads
 * each Preparation's own labels, not the Order: every Ready one labelled auto-deploy=Enabled,
 * or else approve-deploy=true, points the Serving at itself, and it reconciles them all again
 * on every restart and resync, the last processed (in name order, i.e. by digest) winning
 * (0.14.0 preparation_controller.go Reconcile 50-89, reconcileServing 92-161). So:
 * - Automatic: the Order's latest Preparation alone is Enabled, the others Disabled, none
 *   approved (an approved older one would turn the Serving back to Manual at itself);
 * - Manual: all Disabled, and the one the Automatic Serving served (the newest render, which
 *   is what Automatic serves: serving_controller.go 124-133) the only approved one, so the
 *   Serving turns Manual where it was. Kokumi's own renders in Automatic leave older ones
 *   Enabled, so the Serving's preparationName is not a reliable "served" there.
 */
export async function relabelPreparations(kube: Kube, namespace: string, order: string, mode: PromotionMode): Promise<string[]> {
  const changed: string[] = []
  const latest = await latestPreparation(kube, namespace, order)
  const approvals = (await listPreparations(kube, namespace, order)).filter((p) => p.metadata.labels?.[APPROVE_DEPLOY_LABEL] === 'true')
  if (mode === 'Manual' && latest && approvals.length !== 1) {
    await approvePreparation(kube, namespace, order, latest)
    changed.push(`${latest} approved`)
  }
  for (const p of await listPreparations(kube, namespace, order)) {
    if (mode === 'Automatic' && p.metadata.labels?.[APPROVE_DEPLOY_LABEL] !== undefined) {
      await setPreparationLabel(kube, namespace, p.metadata.name, APPROVE_DEPLOY_LABEL, null)
      changed.push(`${p.metadata.name} approval removed`)
    }
    const value = wantedAutoDeploy(mode, p.metadata.name, latest)
    if (p.metadata.labels?.[AUTO_DEPLOY_LABEL] === value) continue
    await setPreparationLabel(kube, namespace, p.metadata.name, AUTO_DEPLOY_LABEL, value)
    changed.push(`${p.metadata.name} ${AUTO_DEPLOY_LABEL}=${value}`)
  }
  return changed
}

function wantedAutoDeploy(mode: PromotionMode, name: string, latest: string | undefined): 'Enabled' | 'Disabled' {
  return mode === 'Automatic' && name === latest ? 'Enabled' : 'Disabled'
}

/** The Order's newest render (its status), or undefined before the first. */
async function latestPreparation(kube: Kube, namespace: string, order: string): Promise<string | undefined> {
  return (await getObject<OrderObject>(kube, {apiVersion: ORDER_API_VERSION, kind: 'Order', name: order, namespace}))?.status?.latestPreparationName
}

/** Whether relabelPreparations has nothing left to do, and what is not in line yet. */
export async function relabelState(kube: Kube, namespace: string, order: string, mode: PromotionMode): Promise<{done: boolean; state: string}> {
  const [preps, latest] = await Promise.all([listPreparations(kube, namespace, order), latestPreparation(kube, namespace, order)])
  const approvals = preps.filter((p) => p.metadata.labels?.[APPROVE_DEPLOY_LABEL] === 'true').map((p) => p.metadata.name)
  const stale = preps.filter((p) => p.metadata.labels?.[AUTO_DEPLOY_LABEL] !== wantedAutoDeploy(mode, p.metadata.name, latest)).map((p) => p.metadata.name)
  if (stale.length > 0) return {done: false, state: `${stale.join(', ')} not labelled for promotion ${mode}`}
  if (mode === 'Automatic' && approvals.length > 0) return {done: false, state: `${approvals.join(', ')} still approved`}
  // Manual: one approval, whichever (a person may since have approved another with `stack promote`).
  if (mode === 'Manual' && latest && approvals.length !== 1)
    return {done: false, state: `not exactly one approved Preparation (approved: ${approvals.join(', ') || 'none'})`}
  return {done: true, state: `the Preparations of Order ${namespace}/${order} are labelled for promotion ${mode}`}
}

/**
 * A component whose Order (promotion Manual) rendered a Preparation that nothing serves yet:
 * only `ichor stack promote` moves its Application, so no command waits for it. Undefined when
 * nothing waits (Automatic, not rendered yet, or already served).
 */
export async function readAwaitingApproval(
  kube: Kube,
  component: StackComponent,
  pushedTag?: string,
): Promise<{preparation: string; message: string} | undefined> {
  const namespace = COMPONENT_NAMESPACE[component]
  type O = OrderObject & {
    metadata: {generation?: number}
    spec?: {source?: {version?: string}}
    status?: {observedGeneration?: number; conditions?: {type: string; status: string}[]}
  }
  const [o, serving] = await Promise.all([
    getObject<O>(kube, {apiVersion: ORDER_API_VERSION, kind: 'Order', name: component, namespace}),
    getObject<ServingObject>(kube, {apiVersion: ORDER_API_VERSION, kind: 'Serving', name: component, namespace}),
  ])
  if (!o || orderPromotion(o.spec) !== 'Manual') return undefined
  if (pushedTag && o.spec?.source?.version !== pushedTag) return undefined
  const ready = o.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')
  const preparation = o.status?.latestPreparationName
  if (!ready || !preparation || !serving?.spec?.preparationName || serving.spec.preparationName === preparation) return undefined
  const prep = await getObject<PreparationObject>(kube, {apiVersion: ORDER_API_VERSION, kind: 'Preparation', name: preparation, namespace})
  // Rendered from the Order's current version (Kokumi stamps it as a label), not an older render.
  if (!prep || prep.metadata.labels?.['delivery.kokumi.dev/version'] !== o.spec?.source?.version) return undefined
  if (prep.metadata.labels?.[APPROVE_DEPLOY_LABEL] === 'true') return undefined // approved: Kokumi moves the Serving
  return {
    preparation,
    message: `${component}: Preparation ${preparation} (${o.spec?.source?.version}) waits for approval: approve it with \`ichor stack promote ${component}\``,
  }
}

/** The Order's latest Preparation, whether it carries the approval and whether the Serving serves it. */
export async function readPromotion(kube: Kube, namespace: string, order: string): Promise<PromotionState> {
  const o = await getObject<OrderObject>(kube, {apiVersion: ORDER_API_VERSION, kind: 'Order', name: order, namespace})
  if (!o) throw new IchorError(`no Order ${namespace}/${order}`, {hint: 'run ichor init first'})
  const preparation = o.status?.latestPreparationName
  if (!preparation)
    throw new IchorError(`Order ${namespace}/${order} has no Preparation to promote yet`, {hint: 'check `ichor stack status`: the Order must be Ready first'})
  const [prep, serving] = await Promise.all([
    getObject(kube, {apiVersion: ORDER_API_VERSION, kind: 'Preparation', name: preparation, namespace}),
    getObject<ServingObject>(kube, {apiVersion: ORDER_API_VERSION, kind: 'Serving', name: order, namespace}),
  ])
  const otherApprovals = (await listPreparations(kube, namespace, order))
    .filter((p) => p.metadata.name !== preparation && p.metadata.labels?.[APPROVE_DEPLOY_LABEL] === 'true')
    .map((p) => p.metadata.name)
  return {
    preparation,
    approved: prep?.metadata.labels?.[APPROVE_DEPLOY_LABEL] === 'true',
    served: serving?.spec?.preparationName === preparation,
    otherApprovals,
  }
}

/** Approves the latest Preparation (the only approval of its Order); Kokumi moves the Serving, Argo CD syncs. */
export async function approveLatestPreparation(kube: Kube, namespace: string, order: string): Promise<string> {
  const {preparation} = await readPromotion(kube, namespace, order)
  await approvePreparation(kube, namespace, order, preparation)
  return preparation
}

export interface FirstPromotionState {
  /** The Serving named after the Order points at a Preparation: something was promoted before. */
  served: boolean
  /** The Order's latest Preparation, once Kokumi rendered one. */
  preparation?: string
  approved: boolean
}

/** Like readPromotion, but never throws while the Order or its first Preparation is still coming. */
export async function readFirstPromotion(kube: Kube, namespace: string, order: string): Promise<FirstPromotionState> {
  const [o, serving] = await Promise.all([
    getObject<OrderObject>(kube, {apiVersion: ORDER_API_VERSION, kind: 'Order', name: order, namespace}),
    getObject<ServingObject>(kube, {apiVersion: ORDER_API_VERSION, kind: 'Serving', name: order, namespace}),
  ])
  const preparation = o?.status?.latestPreparationName
  const prep = preparation ? await getObject(kube, {apiVersion: ORDER_API_VERSION, kind: 'Preparation', name: preparation, namespace}) : undefined
  return {served: Boolean(serving?.spec?.preparationName), preparation, approved: prep?.metadata.labels?.[APPROVE_DEPLOY_LABEL] === 'true'}
}

/** The closing words of a command whose new bundles wait for approval (promotion Manual); empty when none waits. */
export function awaitingLines(awaiting: readonly string[] | undefined): string {
  if (!awaiting?.length) return ''
  return `\nPublished, waiting for approval (promotion Manual):\n${awaiting.map((line) => `  ${line}`).join('\n')}`
}

/** The closing line of `stack values set|edit`: the component's new bundle, or that nothing changed, then what waits for approval. */
export function valuesChangeLine(r: {component: string; changed: boolean; tag: string; digest: string; awaitingApproval?: readonly string[]}): string {
  const what = r.changed ? `${r.component} is at ${r.tag} (${r.digest.slice(0, 19)}).` : `${r.component} already has these values: nothing changed.`
  return `\n${what}${awaitingLines(r.awaitingApproval)}`
}
