// Helpers shared by the bench sections.
import {spawnSync} from 'node:child_process'

export function median(xs) {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)]
}
export function pct(xs, p) {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]
}
export function fmtMs(ms) {
  return `${ms.toFixed(ms < 10 ? 2 : 0)} ms`
}
export function fmtMB(bytes) {
  return `${(bytes / 1024 / 1024).toFixed(2)} MB`
}
export function wall(args, runs, env = {}) {
  const times = []
  for (let i = 0; i < runs; i++) {
    const t = performance.now()
    const r = spawnSync(process.execPath, args, {encoding: 'utf8', env: {...process.env, ...env}})
    times.push(performance.now() - t)
    if (r.status !== 0) throw new Error(`bench: ${args.join(' ')} exited ${r.status}: ${r.stderr}`)
  }
  return times
}
