// ichor init on the harness (real apiserver/etcd, registry, helm, talosctl; simulated
// Talos nodes and readiness): first run vs no-op rerun wall time, and the CLI's peak RSS
// (VmHWM of the node process itself, read from /proc while it runs; helm and talosctl
// subprocesses are not counted).
import {readFileSync} from 'node:fs'
import {join} from 'node:path'
import {fmtMs} from './lib.mjs'

export async function run(ctx) {
  const {startHarnessCluster, runIchor} = await import(join(ctx.root, 'test', 'harness', 'cluster.ts'))
  const h = await startHarnessCluster()
  // A rerun on the operator's machine finds its earlier renders in the render cache.
  h.env.ICHOR_RENDER_CACHE = 'on'
  try {
    const measure = async (label) => {
      let peakKb = 0
      let timer
      const r = await runIchor([...h.initArgs, '--json'], h.env, {
        onStart: (child) => {
          timer = setInterval(() => {
            try {
              const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))
              if (m) peakKb = Math.max(peakKb, Number(m[1]))
            } catch {
              // exited
            }
          }, 25)
        },
      })
      clearInterval(timer)
      if (r.code !== 0) throw new Error(`${label} failed: ${r.stderr}`)
      const end = r.stdout.split('\n').map((l) => { try { return JSON.parse(l) } catch { return undefined } }).find((e) => e?.event === 'end')
      return {ms: r.ms, peakMb: peakKb / 1024, changed: end?.changed}
    }
    const first = await measure('first run')
    const reruns = []
    for (let i = 0; i < 3; i++) reruns.push(await measure('rerun'))
    const rerun = reruns.sort((a, b) => a.ms - b.ms)[1]
    console.log(`first ichor init (2 simulated nodes): ${fmtMs(first.ms)}, changed=${first.changed}`)
    console.log(`no-op rerun (median of 3): ${fmtMs(rerun.ms)}, changed=${rerun.changed}, ${((rerun.ms / first.ms) * 100).toFixed(1)} % of the first run   goal <= 3 s and <= 15 %`)
    console.log(`peak RSS of the CLI process: first run ${first.peakMb.toFixed(0)} MB, rerun ${Math.max(...reruns.map((r) => r.peakMb)).toFixed(0)} MB   goal <= 200 MB`)
  } finally {
    await h.stop()
  }
}
