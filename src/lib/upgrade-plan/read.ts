// What `ichor upgrade plan` reads from the live cluster: the Talos version each node runs, the
// Kubernetes version the control planes' configs run, the Cilium release's chart, and the stack's
// artifacts as the last init recorded them; then the planner's hops from there. Read-only.
import {pinnedAssets} from '../assets/lock.js'
import {compareVersions} from '../assets/resolve.js'
import {readCiliumRelease} from '../cilium/reads.js'
import {readRemovedApis, type RemovedApiReport} from '../cilium/removed-apis.js'
import {compatibility} from '../compatibility/data.js'
import {IchorError} from '../errors/errors.js'
import type {Kube} from '../kube/client.js'
import {readRunningKubernetes} from '../kubernetes/upgrade.js'
import type {TalosAccess} from '../talos/access.js'
import {TalosctlError} from '../talos/talosctl.js'
import {defaultTarget, latestTarget, planUpgrade, type Hop, type Versions} from '../upgrade-path/planner.js'

export interface UpgradePlanReport {
  current: {
    talos: {lowest: string; nodes: {node: string; version: string}[]}
    kubernetes: {lowest: string; nodes: {node: string; version: string}[]}
    cilium: string
    /** Argo CD's chart and Kokumi's manifest as the last init installed them, against this ichor's pins. */
    stack: {component: 'argocd' | 'kokumi'; installed?: string; pinned: string}[]
  }
  /** "default": this ichor's tested default set; "latest": the newest combination the data allows (--to-latest). */
  targetKind: 'default' | 'latest'
  target: Versions
  hops: Hop[]
  blocked?: string
  /**
   * The live objects the Cilium minors the hops cross remove or reject (`ichor cni upgrade`
   * refuses them) and deprecate, each with its minor: the same reading cni upgrade makes.
   */
  removedApis: RemovedApiReport
  upToDate: boolean
  compatibility: {revision: number; origin: string}
}

export async function readUpgradePlan(p: {kube: Kube; talos: TalosAccess; toLatest: boolean}): Promise<UpgradePlanReport> {
  const cr = await p.talos.installation()
  const nodes = [...cr.spec.talos.controlPlanes, ...cr.spec.talos.workers]
  const [versions, kubernetes, release] = await Promise.all([p.talos.runningVersions(nodes), readRunningKubernetes(p.talos), readCiliumRelease(p.kube)])
  const talosNodes = nodes.map((node) => {
    const v = versions.get(node)
    if (v === undefined || v instanceof TalosctlError)
      throw new IchorError(`node ${node} did not say which Talos it runs${v ? `: ${v.message}` : ''}`, {
        hint: 'an upgrade plan starts from every node; check it with ichor talos status',
      })
    return {node, version: v}
  })
  const lowestTalos = [...talosNodes].sort((a, b) => compareVersions(a.version, b.version))[0]!.version
  const cilium = release?.chartVersion ?? cr.status?.cni.chartVersion
  if (!cilium) throw new IchorError('the Cilium release has no record yet: run ichor init first')
  const current: Versions = {talos: lowestTalos, kubernetes: kubernetes.lowest, cilium}
  const targetKind = p.toLatest ? 'latest' : 'default'
  const plan = planUpgrade(current, p.toLatest ? latestTarget() : defaultTarget())
  // The Cilium the last Cilium hop reaches: what cni upgrade will have crossed by then.
  const ciliumTo = plan.hops.filter((h) => h.component === 'cilium').at(-1)?.to
  const removedApis = ciliumTo ? await readRemovedApis(p.kube, cilium, ciliumTo) : {refusals: [], warnings: []}
  const pins = pinnedAssets()
  const c = compatibility()
  return {
    current: {
      talos: {lowest: lowestTalos, nodes: talosNodes},
      kubernetes: {lowest: kubernetes.lowest, nodes: kubernetes.perNode},
      cilium,
      stack: (['argocd', 'kokumi'] as const).map((component) => ({
        component,
        installed: cr.status?.artifacts?.[component]?.version,
        pinned: pins[component].version,
      })),
    },
    targetKind,
    target: plan.target,
    hops: plan.hops,
    ...(plan.blocked ? {blocked: plan.blocked} : {}),
    removedApis,
    upToDate: plan.hops.length === 0 && !plan.blocked,
    compatibility: {revision: c.revision, origin: c.origin},
  }
}
