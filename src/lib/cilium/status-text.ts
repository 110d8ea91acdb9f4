// The human form of `ichor cni status` (the typed report is the -o/--json form).
import type {CniStatusReport} from './status.js'

export function formatCniStatus(r: CniStatusReport): string {
  const yes = (b: boolean) => (b ? 'yes' : 'NO')
  const w = (x?: {ready: number; desired: number; rolledOut: boolean; state: string}) =>
    x ? `${x.ready}/${x.desired} ready${x.rolledOut ? '' : ` (${x.state})`}` : 'absent'
  const lines = [
    `Cilium: ${r.healthy ? 'healthy' : 'DEGRADED'}`,
    `  release        ${r.release ? `revision ${r.release.revision}, ${r.release.status}, chart ${r.release.chartVersion}` : 'none'}`,
    `  values         ${r.values.inSync ? 'as the IchorInstallation asks' : 'DIFFER from the IchorInstallation'} (release ${short(r.values.releaseHash)}, desired ${short(r.values.desiredHash)}, recorded ${short(r.values.recordedHash)})`,
    `  chart          pinned ${r.chart.pinned}: ${r.chart.upgrade} (${r.chart.detail})`,
    `  next upgrade   ${r.chart.next ? `${r.chart.next.version}: ${r.chart.next.command}${r.chart.next.after ? ` (after ${r.chart.next.after.join(', then ')})` : ''}` : 'none ichor knows of'}; upgradeCompatibility ${r.upgradeCompatibility ?? 'not set'}`,
    ...(r.chart.next ? [`                 why: ${r.chart.next.why} (the whole path: ichor upgrade plan)`] : []),
    `  kubernetes     ${r.kubernetes ? `${r.kubernetes.version} (${r.kubernetes.source}); next minor ${r.kubernetes.next}: ${r.kubernetes.needsCiliumUpgrade ? `needs a Cilium upgrade first (${r.kubernetes.message})` : "inside Cilium's tested range"}` : 'unknown'}`,
    `  kube-proxy     ${r.kubeProxy.desired} (release kubeProxyReplacement=${String(r.kubeProxy.release)}, cilium-config ${r.kubeProxy.ciliumConfig ?? 'absent'})${r.kubeProxy.consistent ? '' : ' HALF SWITCHED'}`,
    `  kube-proxy ds  ${w(r.kubeProxy.daemonSet)}; Talos configs: ${r.kubeProxy.talosNodes ? r.kubeProxy.talosNodes.map((n) => `${n.node} ${n.enabled ? 'on' : 'off'}`).join(', ') : 'not checked'}`,
    `  agent          ${w(r.readiness.daemonSet)}`,
    `  operator       ${w(r.readiness.operator)}`,
    `  Talos          inventory free of Cilium: ${yes(!r.talos.inInventory)}; inline manifest on control planes: ${r.talos.checked ? (r.talos.inlineManifestOn!.length ? r.talos.inlineManifestOn!.join(', ') : 'none') : 'not checked'}; local configs with it: ${r.talos.localConfigsWithInline.length || 'none'}`,
  ]
  if (r.problems.length > 0) {
    lines.push('', 'Problems:')
    for (const p of r.problems) lines.push(`  ${p.severity === 'error' ? 'x' : '!'} ${p.what}`, `      fix: ${p.fix}`)
  }
  return lines.join('\n')
}

const short = (h?: string) => (h ? h.slice(0, 12) : 'none')
