// The human form of `ichor status` (the typed report is the -o/--json form): one line per node,
// then Kubernetes, Cilium, the stack, the Lease and the next upgrade; problems last.
import type {ClusterStatus} from './read.js'

export function formatClusterStatus(s: ClusterStatus): string {
  const rows = s.nodes.map((n) => [n.address, n.role, n.talos ?? '-', n.kubelet ?? '-', n.ready ? 'Ready' : 'NotReady'])
  const lines = [
    `Cluster ${s.cluster.name} (${s.cluster.endpoint}): ${s.healthy ? 'healthy' : 'UNHEALTHY'}`,
    '',
    ...table([['NODE', 'ROLE', 'TALOS', 'KUBELET', 'STATUS'], ...rows]),
  ]
  const c = s.cilium
  const ratio = (w?: {ready: number; desired: number}) => (w ? `${w.ready}/${w.desired}` : 'absent')
  lines.push(
    '',
    `Kubernetes  ${s.kubernetes ?? 'unknown'}`,
    `Cilium      ${c.chart ?? 'no release'}${c.release ? ` (revision ${c.revision}, ${c.release})` : ''}; agents ${ratio(c.agents)}, operator ${ratio(c.operator)}; kube-proxy ${c.kubeProxy}`,
    `Stack       promotion ${s.stack.promotion}`,
  )
  for (const a of s.stack.components) {
    const served = a.served ? `, serves ${a.served.slice(0, 19)}` : ''
    const waiting = a.waitsForApproval ? `; ${a.waitsForApproval} waits for approval (ichor stack promote ${a.component})` : ''
    lines.push(`  ${a.component.padEnd(9)} ${a.sync ?? 'absent'}/${a.health ?? 'absent'}${served}${waiting}`)
  }
  lines.push(`Lease       ${s.lease ? `held by ${s.lease.holder}${s.lease.expiresAt ? ` until ${s.lease.expiresAt}` : ''}` : 'free'}`)
  lines.push(
    `Next        ${s.nextUpgrade ? `${s.nextUpgrade.command} (${s.nextUpgrade.why}; the whole path: ichor upgrade plan)` : 'nothing to upgrade: the default set runs'}`,
  )
  if (s.warnings.length > 0) lines.push('', ...s.warnings.map((w) => `! ${w}`))
  if (s.problems.length > 0) lines.push('', 'Problems:', ...s.problems.map((p) => `  x ${p}`))
  return lines.join('\n')
}

/** Columns padded to their widest cell, as kubectl prints a table. */
function table(rows: string[][]): string[] {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)))
  return rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]! + 3))).join(''))
}
