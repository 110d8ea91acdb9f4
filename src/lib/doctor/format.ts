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
  const counts = (['fail', 'warn'] as const).map((s) => `${report.checks.filter((c) => c.status === s).length} ${s === 'fail' ? 'failed' : 'warnings'}`)
  lines.push(report.ok ? `ichor doctor: ready (${counts[1]})` : `ichor doctor: ${counts.join(', ')}`)
  return lines.join('\n')
}
