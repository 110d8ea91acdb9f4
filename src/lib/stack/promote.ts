// `ichor stack promote <component>` for an Order whose new Preparations wait for a person
// (autoDeploy Disabled / promotion Manual). Kokumi 0.14.0 and main take that approval from
// outside the UI too: the label delivery.kokumi.dev/approve-deploy=true on a Preparation makes
// the Preparation controller point the Order's Serving at it (api/v1alpha1/labels.go
// LabelApproveDeploy, internal/controller/preparation_controller.go).
import {IchorError} from '../errors/errors.js'
import type {Kube} from '../kube/client.js'
import {getObject, type KubeObject} from '../kube/objects.js'
import {FIELD_MANAGER} from '../constants.js'
import {ORDER_API_VERSION} from './orders.js'

export const APPROVE_DEPLOY_LABEL = 'delivery.kokumi.dev/approve-deploy'

type OrderObject = KubeObject & {status?: {latestPreparationName?: string}}
type ServingObject = KubeObject & {spec?: {preparationName?: string}}

export interface PromotionState {
  preparation: string
  approved: boolean
  served: boolean
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
  return {preparation, approved: prep?.metadata.labels?.[APPROVE_DEPLOY_LABEL] === 'true', served: serving?.spec?.preparationName === preparation}
}

/** Labels the latest Preparation approved; Kokumi moves the Serving, Argo CD syncs. */
export async function approveLatestPreparation(kube: Kube, namespace: string, order: string): Promise<string> {
  const {preparation} = await readPromotion(kube, namespace, order)
  await kube.request('PATCH', `/apis/${ORDER_API_VERSION}/namespaces/${namespace}/preparations/${preparation}`, {
    body: {metadata: {labels: {[APPROVE_DEPLOY_LABEL]: 'true'}}},
    contentType: 'application/merge-patch+json',
    query: {fieldManager: FIELD_MANAGER, fieldValidation: 'Strict'},
  })
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
