// Kokumi as installed: its Order API moves between releases, so ichor reads the live Order CRD
// before it writes an Order, and shapes the Order after it.
// - 0.14.0 and later main (kokumi-dev/kokumi api/v1alpha1/order_types.go): `spec.autoDeploy`,
//   Enabled|Disabled, default Disabled; Enabled makes each new Preparation the Serving, whose
//   Application Argo CD syncs.
// - 0.17 per ADR-0099: `spec.promotion.mode`, Automatic|Manual.
import {IchorError} from '../errors/errors.js'
import type {Kube} from '../kube/client.js'
import {getObject, type KubeObject} from '../kube/objects.js'
import {KOKUMI_OBJECTS} from './kokumi.js'
import type {PromotionMode} from '../state/installation-types.js'
import {COMPONENT_NAMESPACE} from './orders.js'

export const ORDER_CRD = 'orders.delivery.kokumi.dev'

/** Where an Order says how a new Preparation is served. */
export type OrderPromotionField = 'promotion.mode' | 'autoDeploy'

export interface KokumiOrderApi {
  field: OrderPromotionField
  /** group/version of the CRD's served storage version: what an Order is written as. */
  apiVersion: string
}

const SUPPORTED_ORDER_APIS = 'spec.autoDeploy (Kokumi 0.14.0 and later main) or spec.promotion.mode (Kokumi 0.17)'

type SchemaNode = {properties?: Record<string, SchemaNode>}
type CrdVersion = {name: string; served?: boolean; storage?: boolean; schema?: {openAPIV3Schema?: SchemaNode}}
export type Crd = KubeObject & {spec?: {group?: string; versions?: CrdVersion[]}}

/**
 * The Order shape a CRD asks for (the live one, or the one in the install manifest an offline
 * dry run renders): the served storage version (else the first served one) and the field that
 * says how a Preparation is promoted; undefined when that version has neither field.
 */
export function orderApiOfCrd(crd: Crd): KokumiOrderApi | undefined {
  const versions = crd.spec?.versions ?? []
  const version = versions.find((v) => v.served && v.storage) ?? versions.find((v) => v.served)
  if (!version || !crd.spec?.group) return undefined
  const apiVersion = `${crd.spec.group}/${version.name}`
  const spec = version.schema?.openAPIV3Schema?.properties?.spec?.properties ?? {}
  if (spec.promotion?.properties?.mode) return {field: 'promotion.mode', apiVersion}
  if (spec.autoDeploy) return {field: 'autoDeploy', apiVersion}
  return undefined
}

function unsupportedOrderApi(kokumiVersion: string | undefined): IchorError {
  return new IchorError(
    `the installed Kokumi (${kokumiVersion ?? 'version unknown'}) has an Order API ichor does not support: ${ORDER_CRD} has neither spec.autoDeploy nor spec.promotion.mode in its served version`,
    {hint: `ichor supports ${SUPPORTED_ORDER_APIS}; install a supported Kokumi (--kokumi-manifest) or an ichor that knows this one`},
  )
}

/** The Order shape of the Order CRD in an install manifest's objects (the offline dry run's Kokumi). */
export function orderApiOfManifest(objects: readonly KubeObject[], kokumiVersion: string): KokumiOrderApi {
  const crd = objects.find((o) => o.kind === 'CustomResourceDefinition' && o.metadata.name === ORDER_CRD) as Crd | undefined
  if (!crd) throw new IchorError(`the Kokumi install manifest (${kokumiVersion}) has no ${ORDER_CRD}`, {hint: 'pass a Kokumi install.yaml (--kokumi-manifest)'})
  const api = orderApiOfCrd(crd)
  if (!api) throw unsupportedOrderApi(kokumiVersion)
  return api
}

/** Reads the served Order schema; an Order CRD with neither field is an error naming the installed Kokumi. */
export async function readKokumiOrderApi(kube: Kube): Promise<KokumiOrderApi> {
  const crd = await getObject<Crd>(kube, {apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', name: ORDER_CRD})
  if (!crd) {
    throw new IchorError(`Kokumi's Order CRD ${ORDER_CRD} is not installed`, {hint: 'run ichor init first: it installs Kokumi before it creates the Orders'})
  }
  const api = orderApiOfCrd(crd)
  if (api) return api
  throw unsupportedOrderApi(await installedKokumiVersion(kube))
}

/** The tag of the running controller's image (`0.14.0`), or undefined when it cannot be read. */
export async function installedKokumiVersion(kube: Kube): Promise<string | undefined> {
  type Deployment = KubeObject & {spec?: {template?: {spec?: {containers?: {name: string; image?: string}[]}}}}
  const d = await getObject<Deployment>(kube, {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    name: KOKUMI_OBJECTS.controllerDeployment,
    namespace: COMPONENT_NAMESPACE.kokumi,
  })
  const containers = d?.spec?.template?.spec?.containers ?? []
  const image = (containers.find((c) => c.name === 'manager') ?? containers[0])?.image ?? ''
  return /:([^:/@]+)(@.*)?$/.exec(image)?.[1]
}

/**
 * The Order in the installed API's shape. ichor builds Orders with `promotion.mode` (the ADR's
 * vocabulary); for `autoDeploy` Automatic becomes Enabled and Manual Disabled.
 */
export function shapeOrder(order: KubeObject, api: KokumiOrderApi): KubeObject {
  const spec = order.spec as {promotion?: {mode?: PromotionMode}} & Record<string, unknown>
  const versioned = order.apiVersion === api.apiVersion ? order : {...order, apiVersion: api.apiVersion}
  if (api.field === 'promotion.mode') return versioned
  const {promotion, ...rest} = spec
  return {...versioned, spec: {...rest, autoDeploy: promotion?.mode === 'Automatic' ? 'Enabled' : 'Disabled'}}
}

/** How an Order in either shape promotes: Automatic or Manual. */
export function orderPromotion(spec: unknown): PromotionMode {
  const s = spec as {promotion?: {mode?: string}; autoDeploy?: string} | undefined
  if (s?.promotion?.mode) return s.promotion.mode === 'Automatic' ? 'Automatic' : 'Manual'
  return s?.autoDeploy === 'Enabled' ? 'Automatic' : 'Manual'
}
