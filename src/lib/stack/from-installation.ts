// The stack as the IchorInstallation describes it: rendered again from the stored user values
// and the artifacts the cluster was installed with (same inputs ⟹ same tags and digests).
// Shared by `stack sync` (republish) and `stack values set` (a new layer for one component).
import {resolveAsset} from '../assets/resolve.js'
import {IchorError} from '../errors/errors.js'
import type {Session} from '../session/session.js'
import {readGeneratedSecrets, readInstallation, type Installation} from '../state/installation.js'
import type {Values} from '../values/path.js'
import type {StackComponent} from './policies.js'
import {generateStackSecrets, prepareStack, type PreparedStack} from './prepare.js'

export interface StackArtifactSources {
  argocdChart?: string
  kokumiManifest?: string
  mirror?: string
}

export async function requireInstallation(session: Session): Promise<Installation> {
  const cr = await readInstallation(await session.kube())
  if (!cr) throw new IchorError('this cluster has no IchorInstallation: it was not set up by ichor init', {hint: 'run ichor init first'})
  return cr
}

/** Renders the stack from the CR's spec; `values` replaces one component's stored user layer. */
export async function renderStackFromInstallation(session: Session, sources: StackArtifactSources, override?: {component: StackComponent; values: Values}): Promise<PreparedStack> {
  const kube = await session.kube()
  const cr = await requireInstallation(session)
  const argocd = resolveAsset('argocd', {override: sources.argocdChart, mirror: sources.mirror})
  const kokumi = resolveAsset('kokumi', {override: sources.kokumiManifest, mirror: sources.mirror})
  // The generated values only reach Secrets, never a bundle; the cluster's win anyway.
  const held = await readGeneratedSecrets(kube)
  const generated = {...generateStackSecrets(), ...Object.fromEntries(Object.entries(held).filter(([, v]) => v))}
  const values = (c: StackComponent) => (override?.component === c ? override.values : cr.spec.stack[c].values)
  return prepareStack({
    argocdChartPath: argocd.path,
    kokumiManifestPath: kokumi.path,
    kubeVersion: cr.spec.talos.kubernetesVersion,
    argocdValues: values('argocd'),
    kokumiValues: values('kokumi'),
    promotion: cr.spec.stack.promotion,
    generated,
  })
}
