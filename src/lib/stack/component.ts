// One stack component rendered for the first apply and for its bundle: the objects that may
// be published (no Secret), the Secrets to create once, and the network policies, which the
// bundle carries and the first apply applies last.
import {readFileSync} from 'node:fs'
import {renderArgoCd, type RenderArgoCdInput} from './argocd.js'
import {renderKokumi, type RenderKokumiInput} from './kokumi.js'
import {serializeObjects, sortObjects} from './objects.js'
import type {KubeObject} from '../kube/objects.js'
import {COMPONENT_NAMESPACE, defaultAppProject, repoCredsSecret} from './orders.js'
import type {StackComponent} from '../state/installation-types.js'
import {policiesFor} from './policies.js'
import {splitSecrets} from './secrets.js'

export interface KokumiComponentInputs extends Omit<RenderKokumiInput, 'manifestText'> {
  /** The install.yaml text, or its path. */
  manifestText?: string
  manifestPath?: string
}

export interface ArgoCdComponentInputs extends RenderArgoCdInput {
  /** Kokumi's registry (oci://host:port); adds the repo-creds Secret and the default AppProject. */
  registryUrl?: string
}

export interface RenderedComponent {
  component: StackComponent
  namespace: string
  /** The chart version (Argo CD) or the install manifest's version (Kokumi). */
  version: string
  /** Everything that may be published, sorted; never a Secret. */
  objects: KubeObject[]
  /** Created once in the cluster (create-if-absent), never published. */
  secrets: KubeObject[]
  /** The component's CiliumNetworkPolicies. */
  policies: KubeObject[]
  /** The bundle's manifest.yaml: serializeObjects(objects + policies). */
  manifest: string
}

export async function renderComponent(component: 'kokumi', inputs: KokumiComponentInputs): Promise<RenderedComponent>
export async function renderComponent(component: 'argocd', inputs: ArgoCdComponentInputs): Promise<RenderedComponent>
export async function renderComponent(component: StackComponent, inputs: KokumiComponentInputs | ArgoCdComponentInputs): Promise<RenderedComponent> {
  let version: string
  let all: KubeObject[]
  if (component === 'kokumi') {
    const k = inputs as KokumiComponentInputs
    const manifestText = k.manifestText ?? (k.manifestPath ? readFileSync(k.manifestPath, 'utf8') : undefined)
    if (manifestText === undefined) throw new Error('renderComponent(kokumi) needs manifestText or manifestPath')
    const rendered = renderKokumi({...k, manifestText})
    version = rendered.version
    all = rendered.objects
  } else {
    const a = inputs as ArgoCdComponentInputs
    const rendered = await renderArgoCd(a)
    version = rendered.version
    all = rendered.objects
    if (a.registryUrl !== undefined) all = [...all, repoCredsSecret(a.registryUrl), defaultAppProject()]
  }
  return assembleComponent(component, version, all)
}

/** Splits out the Secrets, sorts, appends the policies and serialises: the in-process tail of a render. */
export function assembleComponent(component: StackComponent, version: string, all: KubeObject[]): RenderedComponent {
  const {secrets, rest} = splitSecrets(all)
  const objects = sortObjects(rest)
  const policies = policiesFor(component)
  return {
    component,
    namespace: COMPONENT_NAMESPACE[component],
    version,
    objects,
    secrets: sortObjects(secrets),
    policies,
    manifest: serializeObjects([...objects, ...policies]),
  }
}
