// The human form of `ichor talos status` (the typed report is the -o/--json form).
import type {TalosStatusReport} from './status.js'

export function formatTalosStatus(r: TalosStatusReport): string {
  const rows = [
    ['NODE', 'ROLE', 'TALOS', 'KUBERNETES', ''],
    ...r.nodes.map((n) => [n.node, n.role, n.talosVersion ?? '-', n.kubernetesVersion ?? '-', n.error ? 'NOT ANSWERING' : '']),
  ]
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)))
  const lines = [
    `Talos nodes of cluster "${r.cluster}": ${r.healthy ? 'all answer' : 'DEGRADED'}; recorded Talos ${r.recorded.talosVersion}, Kubernetes ${r.recorded.kubernetesVersion}`,
    '',
    ...rows.map((row) =>
      row
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    ),
  ]
  if (r.problems.length > 0) {
    lines.push('', 'Problems:')
    for (const p of r.problems) lines.push(`  ${p.severity === 'error' ? 'x' : '!'} ${p.what}`, `      fix: ${p.fix}`)
  }
  return lines.join('\n')
}
