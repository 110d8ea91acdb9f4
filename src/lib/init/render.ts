// Everything `ichor init` renders before it touches a node: artifacts resolved, Cilium
// values validated and rendered once (that render is also the inline manifest), Talos
// patches. Pure and offline; used by the dry run and by the real run alike.
import type {Reporter} from '../log/reporter.js'
import {refuseUnpinnedArtifacts} from '../assets/pinning.js'
import {describeAsset, resolveAsset, type AssetSources, type ResolvedAsset} from '../assets/resolve.js'
import type {AssetId} from '../assets/lock.js'
import {CILIUM_RELEASE} from '../constants.js'
import type {GeneratedStackSecrets, PromotionMode, TunnelProtocol} from '../state/installation-types.js'
import {KUBEPRISM_PORT, renderTalosPatches, type TalosPatches} from '../talos/patches.js'
import type {CiliumFacts} from '../cilium/guards.js'
import {validateCiliumValues, type CiliumValuesReport} from '../cilium/validate.js'
import {formatIssues, IchorError} from '../errors/errors.js'
import {addHelmOwnership, withoutHelmHooks} from '../talos/ownership.js'
import type {Values} from '../values/path.js'
import {prepareStack, type PreparedStack} from '../stack/prepare.js'
import type {InitInputs} from './inputs.js'
import {EXIT} from '../errors/exit-codes.js'

export interface InitRender {
  assets: Record<AssetId, ResolvedAsset>
  cilium: {
    report: CiliumValuesReport
    effective: Values
    /** The chart render with Helm's ownership metadata on every object: the inline manifest. */
    manifest: string
  }
  talos: TalosPatches
  stack: PreparedStack
}

export interface InitRenderOptions {
  sources: Partial<Record<AssetId, AssetSources>>
  userCiliumValues: Values
  argocdValues?: Values
  kokumiValues?: Values
  promotion?: PromotionMode
  /** Generated passwords (from the cluster on a rerun; fresh for a first run or a dry run). */
  generated: GeneratedStackSecrets
  defaultStorageClass?: boolean
  /** Told once per artifact which file and version is used. */
  report?: Reporter
  /** API groups the cluster serves, when it exists already (a rerun): its facts replace a fresh cluster's. */
  servedApiGroups?: Set<string>
  /** A real run refuses artifacts that are not the pinned ones unless allowed (--allow-unpinned); absent: any is taken. */
  pinning?: {dryRun: boolean; allowUnpinned: boolean}
}

/**
 * What ichor knows about a cluster it is about to create: Talos keeps its default
 * forwardKubeDNSToHost (true since Talos 1.8), KubePrism is on 7445 because ichor
 * renders it, and a fresh cluster has no Gateway API CRDs and does not serve
 * monitoring.coreos.com (so no ServiceMonitor at init, and the render does not claim it).
 */
export function freshClusterFacts(inputs: InitInputs, servedApiGroups?: Set<string>): CiliumFacts & {tunnel: TunnelProtocol} {
  if (servedApiGroups) {
    // A rerun on an existing cluster: the stored layer may hold what a day-2 change enabled.
    return {...freshClusterFacts(inputs), freshCluster: false, monitoringCrds: servedApiGroups.has('monitoring.coreos.com') ? 'present' : 'absent'}
  }
  return {
    kubeProxy: inputs.kubeProxy,
    tunnel: inputs.tunnel,
    forwardKubeDNSToHost: true,
    gatewayApiCrds: 'absent',
    monitoringCrds: 'absent',
    freshCluster: true,
    kubePrism: {enabled: true, port: KUBEPRISM_PORT},
    nodeCount: inputs.controlPlanes.length + inputs.workers.length,
  }
}

export async function renderInit(inputs: InitInputs, opts: InitRenderOptions): Promise<InitRender> {
  const assets = {} as Record<AssetId, ResolvedAsset>
  for (const id of ['cilium', 'argocd', 'kokumi'] as const) {
    assets[id] = resolveAsset(id, opts.sources[id] ?? {})
    opts.report?.note(describeAsset(assets[id]))
  }
  if (opts.pinning) refuseUnpinnedArtifacts('ichor init', Object.values(assets), opts.pinning)
  // The Argo CD render (a helm process) runs alongside the Cilium one.
  const stack = prepareStack({
    argocdChartPath: assets.argocd.path,
    kokumiManifestPath: assets.kokumi.path,
    kubeVersion: inputs.kubernetesVersion.version,
    argocdValues: opts.argocdValues,
    kokumiValues: opts.kokumiValues,
    promotion: opts.promotion,
    defaultStorageClass: opts.defaultStorageClass,
    generated: opts.generated,
  })
  stack.catch(() => {}) // awaited below; do not let a Cilium failure leave it unhandled
  const report = await validateCiliumValues({
    chartPath: assets.cilium.path,
    user: opts.userCiliumValues,
    facts: freshClusterFacts(inputs, opts.servedApiGroups),
    kubeVersion: inputs.kubernetesVersion.version,
  })
  if (!report.valid || report.rendered === undefined) {
    throw new IchorError(`the Cilium values (-f/--values, --set…) are invalid\n${formatIssues(report.issues)}`, {exitCode: EXIT.usage})
  }
  const manifest = addHelmOwnership(withoutHelmHooks(report.rendered), CILIUM_RELEASE.name, CILIUM_RELEASE.namespace)
  const talos = renderTalosPatches({
    talosVersion: inputs.talosVersion,
    kubeProxy: inputs.kubeProxy,
    ciliumManifest: manifest,
    allowSchedulingOnControlPlanes: inputs.workers.length === 0,
  })
  return {assets, cilium: {report, effective: report.effective, manifest}, talos, stack: await stack}
}
