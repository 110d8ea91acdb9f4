// Values engine numbers on the real Cilium 1.18.0 chart.
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {fmtMB, fmtMs, median, pct, wall} from './lib.mjs'

const USER = {
  hubble: {relay: {enabled: true}, ui: {enabled: true}, metrics: {enabled: ['dns', 'drop', 'tcp']}},
  operator: {replicas: 1},
  loadBalancer: {mode: 'dsr', algorithm: 'maglev'},
  bandwidthManager: {enabled: true},
  podAnnotations: {'example.com/team': 'net'},
  resources: {requests: {cpu: '100m', memory: '256Mi'}},
}

export async function run(ctx) {
  const {checkCiliumValues} = await import(join(ctx.root, 'dist', 'lib', 'cilium', 'validate.js'))
  const input = {chartPath: join(ctx.upstream, 'charts', 'cilium-1.18.0.tgz'), user: USER, facts: {kubeProxy: 'replaced', tunnel: 'vxlan'}}
  let t = performance.now()
  const first = checkCiliumValues(input)
  const firstMs = performance.now() - t
  if (first.issues.length > 0) throw new Error(`bench values are invalid: ${JSON.stringify(first.issues)}`)
  for (let i = 0; i < 50; i++) checkCiliumValues(input) // warm-up
  const N = 500
  const times = []
  const allocs = []
  for (let i = 0; i < N; i++) {
    const h0 = process.memoryUsage().heapUsed
    t = performance.now()
    checkCiliumValues(input)
    times.push(performance.now() - t)
    const dh = process.memoryUsage().heapUsed - h0
    if (dh >= 0) allocs.push(dh) // a negative delta means a GC ran mid-call; skip that sample
  }
  globalThis.gc?.()
  const before = process.memoryUsage().heapUsed
  for (let i = 0; i < N; i++) checkCiliumValues(input)
  globalThis.gc?.()
  const retained = (process.memoryUsage().heapUsed - before) / N
  console.log(`first call in process (chart read, key tree, schema compile of the keys used): ${fmtMs(firstMs)}`)
  console.log(`warm per-call validation, no helm render (N=${N}): median ${fmtMs(median(times))}, p95 ${fmtMs(pct(times, 95))}   goal <= 5 ms`)
  console.log(
    `heap growth per call: median ${fmtMB(median(allocs))} allocated (heapUsed delta, ${allocs.length} samples without GC); ${globalThis.gc ? `${(retained / 1024).toFixed(1)} KB retained after GC` : 'run node --expose-gc for retained'}   goal <= 5 MB`,
  )

  const validate = wall([ctx.bin, 'cni', 'values', 'validate', '--set', 'hubble.relay.enabled=true', '--cilium-chart', input.chartPath], 5)
  console.log(
    `cold \`ichor cni values validate\` wall time incl. a real helm render (5 runs): median ${fmtMs(median(validate))}, min ${fmtMs(Math.min(...validate))}   goal <= 1 s`,
  )
  const cacheDir = mkdtempSync(join(tmpdir(), 'ichor-bench-cache-'))
  const cached = wall([ctx.bin, 'cni', 'values', 'validate', '--set', 'hubble.relay.enabled=true', '--cilium-chart', input.chartPath], 6, {
    ICHOR_RENDER_CACHE: 'on',
    XDG_CACHE_HOME: cacheDir,
  }).slice(1)
  rmSync(cacheDir, {recursive: true, force: true})
  console.log(`same, with the render cache warm (5 runs): median ${fmtMs(median(cached))}`)
  const help = wall([ctx.bin, '--help'], 7)
  console.log(`\`ichor --help\` wall time (7 runs): median ${fmtMs(median(help))}, min ${fmtMs(Math.min(...help))}   goal <= 300 ms`)
}
