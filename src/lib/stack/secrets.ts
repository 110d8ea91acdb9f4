// No Secret is ever published (ADR-0099, amendment "no Secret in a bundle"): Kokumi's
// registry is anonymous, so a Secret in a bundle is readable by any pod that reaches it.
// Secrets are split out of a rendered component and created once in the cluster instead.
import {cloneObjects} from './objects.js'
import type {KubeObject} from '../kube/objects.js'

/**
 * Second line of defence for Secrets created outside any bundle: Argo CD never prunes them
 * and does not report them as extraneous, should an Application ever come to track them.
 */
const SECRET_ARGOCD_ANNOTATIONS: Readonly<Record<string, string>> = {
  'argocd.argoproj.io/sync-options': 'Prune=false',
  'argocd.argoproj.io/compare-options': 'IgnoreExtraneous',
}

/** Splits every `kind: Secret` out (whatever its apiVersion), annotated, leaving the objects that may be published. */
export function splitSecrets(objects: readonly KubeObject[]): {secrets: KubeObject[]; rest: KubeObject[]} {
  const secrets: KubeObject[] = []
  const rest: KubeObject[] = []
  for (const obj of objects) {
    if (obj.kind !== 'Secret') {
      rest.push(obj)
      continue
    }
    const secret = cloneObjects(obj)
    secret.metadata.annotations = {...secret.metadata.annotations, ...SECRET_ARGOCD_ANNOTATIONS}
    secrets.push(secret)
  }
  return {secrets, rest}
}
