// The stack as the IchorInstallation describes it: rendered again from the stored user values
// and the artifacts the cluster was installed with (same inputs ⟹ same tags and digests).
// Shared by `stack sync` (republish) and `stack values set` (a new layer for one component).
import {installedArtifact, refuseUnpinnedArtifacts, type InstalledArtifact} from '../assets/pinning.js'
import {resolveAsset, type ResolvedAsset} from '../assets/resolve.js'
import type {Session} from '../session/session.js'
import {readGeneratedSecrets, requireInstallation, type Installation} from '../state/installation.js'
import type {Values} from '../values/path.js'
import type {StackComponent} from '../state/installation-types.js'
import {generateStackSecrets, prepareStack, type PreparedStack} from './prepare.js'

export interface StackArtifactSources {
  argocdChart?: string
  kokumiManifest?: string
  mirror?: string
  /**
   * A real run that publishes: an artifact that is neither the pinned one nor the one the cluster
   * was installed with (status.artifacts) needs --allow-unpinned. Absent: any is taken (reads, diffs).
   */
  pinning?: {command: string; dryRun: boolean; allowUnpinned: boolean}
}

/** The stack as rendered, and the artifacts it was rendered from (the CR records them). */
export type StackRender = PreparedStack & {artifacts: {argocd: InstalledArtifact; kokumi: InstalledArtifact}}

/**
 * The Argo CD chart and Kokumi manifest to render from. What init installed was accepted then
 * (pinned, or with --allow-unpinned); any other artifact is checked as init checks it.
 */
function stackArtifacts(cr: Installation, sources: StackArtifactSources): {argocd: ResolvedAsset; kokumi: ResolvedAsset} {
  const argocd = resolveAsset('argocd', {override: sources.argocdChart, mirror: sources.mirror})
  const kokumi = resolveAsset('kokumi', {override: sources.kokumiManifest, mirror: sources.mirror})
  const installed = cr.status?.artifacts ?? {}
  const notInstalled = (a: ResolvedAsset) => installed[a.id]?.sha256 !== a.sha256
  if (sources.pinning) refuseUnpinnedArtifacts(sources.pinning.command, [argocd, kokumi].filter(notInstalled), sources.pinning)
  return {argocd, kokumi}
}

/** Refuses (exit 2) what a render with `sources` would refuse, before anything else runs. */
export async function checkStackArtifacts(session: Session, sources: StackArtifactSources): Promise<void> {
  stackArtifacts(await requireInstallation(await session.kube()), sources)
}

/** Renders the stack from the CR's spec; `values` replaces one component's stored user layer. */
export async function renderStackFromInstallation(
  session: Session,
  sources: StackArtifactSources,
  override?: {component: StackComponent; values: Values},
): Promise<StackRender> {
  const kube = await session.kube()
  const cr = await requireInstallation(await session.kube())
  const {argocd, kokumi} = stackArtifacts(cr, sources)
  // The generated values only reach Secrets, never a bundle; the cluster's win anyway.
  const held = await readGeneratedSecrets(kube)
  const generated = {...generateStackSecrets(), ...Object.fromEntries(Object.entries(held).filter(([, v]) => v))}
  const values = (c: StackComponent) => (override?.component === c ? override.values : cr.spec.stack[c].values)
  const stack = await prepareStack({
    argocdChartPath: argocd.path,
    kokumiManifestPath: kokumi.path,
    kubeVersion: cr.spec.talos.kubernetesVersion,
    argocdValues: values('argocd'),
    kokumiValues: values('kokumi'),
    promotion: cr.spec.stack.promotion,
    generated,
  })
  return {...stack, artifacts: {argocd: installedArtifact(argocd), kokumi: installedArtifact(kokumi)}}
}
