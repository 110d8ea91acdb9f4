// The CiliumNetworkPolicies of each stack component (ADR-0099 decision 10), shipped as
// assets/policies/<component>.yaml in the package: appended to the component's bundle, and
// returned on their own for the "policies last" step of the first apply.
import {join} from 'node:path'
import {PACKAGE_ROOT} from '../assets/lock.js'
import {readPackagedAsset} from '../assets/packaged.js'
import {IchorError} from '../errors/errors.js'
import {parseObjects} from './objects.js'
import type {StackComponent} from '../state/installation-types.js'
import type {KubeObject} from '../kube/objects.js'

export function policiesPath(component: StackComponent): string {
  return join(PACKAGE_ROOT, 'assets', 'policies', `${component}.yaml`)
}

/** The component's policies, checked to be CiliumNetworkPolicies in the component's namespace. */
export function policiesFor(component: StackComponent): KubeObject[] {
  const path = policiesPath(component)
  let text: string
  try {
    // Embedded in the single binary, else the package's file at `path`.
    text = readPackagedAsset(`policies/${component}.yaml`).toString('utf8')
  } catch (error) {
    throw new IchorError(`cannot read the ${component} network policies at ${path}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`)
  }
  const policies = parseObjects(text, `assets/policies/${component}.yaml`)
  for (const p of policies) {
    if (p.apiVersion !== 'cilium.io/v2' || p.kind !== 'CiliumNetworkPolicy' || p.metadata.namespace !== component) {
      throw new IchorError(
        `assets/policies/${component}.yaml: ${p.kind} ${p.metadata.name} is not a cilium.io/v2 CiliumNetworkPolicy in namespace ${component}`,
      )
    }
  }
  return policies
}
