// The human form of a doctor report: one line per check, its fix indented below it.
import type {DoctorReport} from './types.js'

const MARK = {ok: 'ok  ', warn: 'warn', fail: 'FAIL'} as const

export function formatDoctorReport(report: DoctorReport): string {
  const lines: string[] = []
  for (const check of report.checks) {
    lines.push(`${MARK[check.status]}  ${check.id}: ${check.detail}`)
    if (check.fix) lines.push(`      fix: ${check.fix}`)
  }
  for (const skipped of report.skipped) lines.push(`skip  ${skipped}`)
  lines.push('What this build was tested with:')
  for (const t of report.tested) {
    const others = t.testedVersions.filter((v) => v !== t.pinned)
    lines.push(
      t.pinTested
        ? `  ${t.id} ${t.pinned} (the pin): tested${others.length ? `, and ${others.join(', ')}` : ''}`
        : `  ${t.id} ${t.pinned} (the pin): NOT tested by this build; its tests ran ${t.testedVersions.join(', ') || 'no version of it'}`,
    )
    lines.push(`      ${t.how}`)
  }
  const counts = (['fail', 'warn'] as const).map((s) => `${report.checks.filter((c) => c.status === s).length} ${s === 'fail' ? 'failed' : 'warnings'}`)
  lines.push(report.ok ? `ichor doctor: ready (${counts[1]})` : `ichor doctor: ${counts.join(', ')}`)
  return lines.join('\n')
}
