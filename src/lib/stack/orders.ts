// The objects that connect the stack (ADR-0099 decisions 5 and 7), as unstructured data:
// one Kokumi Order per component, Argo CD's repo-creds Secret for Kokumi's registry, and
// the default AppProject every Kokumi-made Application uses.
import {ARGOCD_NAMESPACE} from '../constants.js'
import {ValidationError, type Issue} from '../errors/errors.js'
import type {KubeObject} from '../kube/objects.js'
import type {PromotionMode, StackComponent} from '../state/installation-types.js'

export const MANAGED_LABEL = 'ichor.maesh.dev/managed'
export const ORDER_API_VERSION = 'delivery.kokumi.dev/v1alpha1'
export const APPLICATION_API_VERSION = 'argoproj.io/v1alpha1'

/** Kokumi's in-cluster registry, as Argo CD and Kokumi's controller address it. */
export const IN_CLUSTER_REGISTRY = 'kokumi-registry.kokumi.svc.cluster.local:5000'
/** Where ichor publishes the bundles in it: `ichor/<component>`. */
export const BUNDLE_REPOSITORY_PREFIX = 'ichor'

export const COMPONENT_NAMESPACE: Readonly<Record<StackComponent, string>> = {argocd: ARGOCD_NAMESPACE, kokumi: 'kokumi'}

/** `oci://host[:port]/path`; a reference without a scheme gets `oci://` (Kokumi requires it). */
function ociUrl(reference: string, field: string): string {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(reference) ? reference : `oci://${reference}`
  let url: URL
  try {
    url = new URL(withScheme)
  } catch {
    throw new ValidationError('OCI reference', [{path: field, message: `${JSON.stringify(reference)} is not an OCI URL (oci://host:port/path)`}])
  }
  if (url.protocol !== 'oci:' || url.host === '') {
    throw new ValidationError('OCI reference', [{path: field, message: `${JSON.stringify(reference)} must be oci://host[:port][/path]`}])
  }
  return withScheme.replace(/\/+$/, '')
}

export interface OrderInput {
  component: StackComponent
  /** The bundle's repository, e.g. oci://kokumi-registry.kokumi.svc.cluster.local:5000/ichor/argocd. */
  repository: string
  /** The bundle's tag, `<chartVersion>-<hash12>`. */
  tag: string
  promotion: PromotionMode
  /** Defaults to the component's own namespace. */
  namespace?: string
}

/** Order `<component>` in the component's namespace: source = repository + tag, no render (a pre-rendered bundle). */
export function buildOrder(input: OrderInput): KubeObject {
  const issues: Issue[] = []
  if (!/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/.test(input.tag)) issues.push({path: 'tag', message: `${JSON.stringify(input.tag)} is not an OCI tag`})
  if (input.promotion !== 'Automatic' && input.promotion !== 'Manual') issues.push({path: 'promotion', message: 'must be Automatic or Manual'})
  if (issues.length > 0) throw new ValidationError(`Order ${input.component}`, issues)
  return {
    apiVersion: ORDER_API_VERSION,
    kind: 'Order',
    metadata: {
      name: input.component,
      namespace: input.namespace ?? COMPONENT_NAMESPACE[input.component],
      labels: {[MANAGED_LABEL]: 'true'},
    },
    spec: {
      source: {oci: ociUrl(input.repository, 'repository'), version: input.tag},
      promotion: {mode: input.promotion},
    },
  }
}

const REPO_CREDS_SECRET_NAME = 'ichor-kokumi-registry'

/**
 * Argo CD's credential template for every repository under Kokumi's registry: OCI over plain
 * HTTP, no credential (the registry is anonymous; the network policies restrict who reaches it).
 */
export function repoCredsSecret(registryUrl: string): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: REPO_CREDS_SECRET_NAME,
      namespace: ARGOCD_NAMESPACE,
      labels: {'argocd.argoproj.io/secret-type': 'repo-creds', [MANAGED_LABEL]: 'true'},
    },
    type: 'Opaque',
    stringData: {type: 'oci', url: ociUrl(registryUrl, 'registryUrl'), insecureOCIForceHttp: 'true'},
  }
}

/** The `default` AppProject as Argo CD creates it itself: any source, any destination, any kind. */
export function defaultAppProject(): KubeObject {
  return {
    apiVersion: 'argoproj.io/v1alpha1',
    kind: 'AppProject',
    metadata: {name: 'default', namespace: ARGOCD_NAMESPACE, labels: {[MANAGED_LABEL]: 'true'}},
    spec: {
      sourceRepos: ['*'],
      destinations: [{server: '*', namespace: '*'}],
      clusterResourceWhitelist: [{group: '*', kind: '*'}],
    },
  }
}
