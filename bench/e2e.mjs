// ichor init on the harness (real apiserver/etcd, registry, helm, talosctl; simulated
// Talos nodes and readiness), for 1 control plane + 1 worker and for 3 control planes + 2
// workers: first run vs no-op rerun wall time, and the CLI's peak RSS (VmHWM of the node
// process itself, read from /proc while it runs; helm and talosctl subprocesses are not
// counted). The 3+2 no-op rerun should stay within 1.3x the 1+1 one: node probes and
// applies run in parallel. The load average is printed: on a shared machine it moves
// every number.
import {readFileSync} from 'node:fs'
import {loadavg} from 'node:os'
import {join} from 'node:path'
import {fmtMs} from './lib.mjs'

const load = () =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')

async function measureCluster(ctx, shape) {
  const {startHarnessCluster, runIchor} = await import(join(ctx.root, 'test', 'harness', 'cluster.ts'))
  const h = await startHarnessCluster(shape)
  const name = `${shape.controlPlanes}+${shape.workers}`
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
      if (r.code !== 0) throw new Error(`${name} ${label} failed: ${r.stderr}`)
      const end = r.stdout
        .split('\n')
        .map((l) => {
          try {
            return JSON.parse(l)
          } catch {
            return undefined
          }
        })
        .find((e) => e?.event === 'end')
      return {ms: r.ms, peakMb: peakKb / 1024, changed: end?.changed, load: load()}
    }
    const first = await measure('first run')
    const reruns = []
    for (let i = 0; i < 3; i++) reruns.push(await measure('rerun'))
    const rerun = reruns.sort((a, b) => a.ms - b.ms)[1]
    console.log(`[${name}] first ichor init: ${fmtMs(first.ms)}, changed=${first.changed}   (load ${first.load})`)
    console.log(
      `[${name}] no-op rerun (median of 3): ${fmtMs(rerun.ms)}, changed=${rerun.changed}, ${((rerun.ms / first.ms) * 100).toFixed(1)} % of the first run   goal <= 3 s and <= 15 %   (load ${rerun.load})`,
    )
    console.log(
      `[${name}] peak RSS of the CLI process: first run ${first.peakMb.toFixed(0)} MB, rerun ${Math.max(...reruns.map((r) => r.peakMb)).toFixed(0)} MB   goal <= 200 MB`,
    )
    return rerun.ms
  } finally {
    await h.stop()
  }
}

export async function run(ctx) {
  const single = await measureCluster(ctx, {controlPlanes: 1, workers: 1})
  const ha = await measureCluster(ctx, {controlPlanes: 3, workers: 2})
  console.log(`no-op rerun 3+2 / 1+1: ${(ha / single).toFixed(2)}x   goal <= 1.3x`)
}
