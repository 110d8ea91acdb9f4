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
import {COMPONENT_NAMESPACE, ORDER_API_VERSION, type PromotionMode} from './orders.js'
import type {StackComponent} from './policies.js'

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

type PreparationObject = KubeObject & {spec?: {orderName?: string; configHash?: string; source?: {oci?: string; baseDigest?: string}; artifact?: {digest?: string}}}

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
    if (p.metadata.name !== preparation && p.metadata.labels?.[APPROVE_DEPLOY_LABEL] !== undefined) await setPreparationLabel(kube, namespace, p.metadata.name, APPROVE_DEPLOY_LABEL, null)
  }
  await setPreparationLabel(kube, namespace, preparation, APPROVE_DEPLOY_LABEL, 'true')
}

/**
 * After a promotion mode switch: every Preparation of the Order carries the new mode's
 * auto-deploy label. Kokumi stamps it only at render time and its Preparation controller reads
 * the Preparation's label, not the Order (preparation_controller.go 66-84): an older one left
 * Enabled would turn the Serving back to Automatic on the next resync. Switching to Manual also
 * approves what is served now, so the Serving turns Manual and stays there.
 */
export async function relabelPreparations(kube: Kube, namespace: string, order: string, mode: PromotionMode): Promise<string[]> {
  const value = mode === 'Automatic' ? 'Enabled' : 'Disabled'
  const changed: string[] = []
  if (mode === 'Manual') {
    const served = (await getObject<ServingObject>(kube, {apiVersion: ORDER_API_VERSION, kind: 'Serving', name: order, namespace}))?.spec?.preparationName
    if (served && !(await relabelState(kube, namespace, order, mode)).singleApproval) {
      await approvePreparation(kube, namespace, order, served)
      changed.push(`${served} approved`)
    }
  }
  for (const p of await listPreparations(kube, namespace, order)) {
    if (p.metadata.labels?.[AUTO_DEPLOY_LABEL] === value) continue
    await setPreparationLabel(kube, namespace, p.metadata.name, AUTO_DEPLOY_LABEL, value)
    changed.push(`${p.metadata.name} ${AUTO_DEPLOY_LABEL}=${value}`)
  }
  return changed
}

/** Whether relabelPreparations has nothing left to do, and what is not in line yet. */
export async function relabelState(kube: Kube, namespace: string, order: string, mode: PromotionMode): Promise<{done: boolean; singleApproval: boolean; state: string}> {
  const value = mode === 'Automatic' ? 'Enabled' : 'Disabled'
  const [preps, serving] = await Promise.all([
    listPreparations(kube, namespace, order),
    getObject<ServingObject>(kube, {apiVersion: ORDER_API_VERSION, kind: 'Serving', name: order, namespace}),
  ])
  const approvals = preps.filter((p) => p.metadata.labels?.[APPROVE_DEPLOY_LABEL] === 'true').map((p) => p.metadata.name)
  const served = serving?.spec?.preparationName
  const singleApproval = !served || (approvals.length === 1 && approvals[0] === served)
  const stale = preps.filter((p) => p.metadata.labels?.[AUTO_DEPLOY_LABEL] !== value).map((p) => p.metadata.name)
  if (stale.length > 0) return {done: false, singleApproval, state: `${stale.join(', ')} not labelled ${AUTO_DEPLOY_LABEL}=${value}`}
  if (mode === 'Manual' && !singleApproval) return {done: false, singleApproval, state: `the served ${served} is not the one approved Preparation (approved: ${approvals.join(', ') || 'none'})`}
  return {done: true, singleApproval, state: `every Preparation of Order ${namespace}/${order} labelled ${AUTO_DEPLOY_LABEL}=${value}`}
}

/**
 * A component whose Order (promotion Manual) rendered a Preparation that nothing serves yet:
 * only `ichor stack promote` moves its Application, so no command waits for it. Undefined when
 * nothing waits (Automatic, not rendered yet, or already served).
 */
export async function readAwaitingApproval(kube: Kube, component: StackComponent, pushedTag?: string): Promise<{preparation: string; message: string} | undefined> {
  const namespace = COMPONENT_NAMESPACE[component]
  type O = OrderObject & {metadata: {generation?: number}; spec?: {source?: {version?: string}}; status?: {observedGeneration?: number; conditions?: {type: string; status: string}[]}}
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
  return {preparation, message: `${component}: Preparation ${preparation} (${o.spec?.source?.version}) waits for approval: approve it with \`ichor stack promote ${component}\``}
}

/** The Order's latest Preparation, whether it carries the approval and whether the Serving serves it. */
export async function readPromotion(kube: Kube, namespace: string, order: string): Promise<PromotionState> {
  const o = await getObject<OrderObject>(kube, {apiVersion: ORDER_API_VERSION, kind: 'Order', name: order, namespace})
  if (!o) throw new IchorError(`no Order ${namespace}/${order}`, {hint: 'run ichor init first'})
  const preparation = o.status?.latestPreparationName
  if (!preparation) throw new IchorError(`Order ${namespace}/${order} has no Preparation to promote yet`, {hint: 'check `ichor stack status`: the Order must be Ready first'})
  const [prep, serving] = await Promise.all([
    getObject(kube, {apiVersion: ORDER_API_VERSION, kind: 'Preparation', name: preparation, namespace}),
    getObject<ServingObject>(kube, {apiVersion: ORDER_API_VERSION, kind: 'Serving', name: order, namespace}),
  ])
  const otherApprovals = (await listPreparations(kube, namespace, order)).filter((p) => p.metadata.name !== preparation && p.metadata.labels?.[APPROVE_DEPLOY_LABEL] === 'true').map((p) => p.metadata.name)
  return {preparation, approved: prep?.metadata.labels?.[APPROVE_DEPLOY_LABEL] === 'true', served: serving?.spec?.preparationName === preparation, otherApprovals}
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
