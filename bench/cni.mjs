// Cilium day-2 on the harness after one `ichor init`: `cni status`, a no-op `cni values set`
// (the values the release already runs: fails if it makes a Helm revision) and `cni values diff`, each the
// median of 5 wall times of the CLI as an operator runs it (render cache on, as on a laptop).
import {availableParallelism, loadavg} from 'node:os'
import {join} from 'node:path'
import {fmtMs, median} from './lib.mjs'

export async function run(ctx) {
  const {startHarnessCluster, runIchor} = await import(join(ctx.root, 'test', 'harness', 'cluster.ts'))
  const {readReleaseRecord} = await import(join(ctx.root, 'src', 'lib', 'helm', 'release.ts'))
  const {connectKube} = await import(join(ctx.root, 'src', 'lib', 'kube', 'client.ts'))
  const h = await startHarnessCluster()
  h.env.ICHOR_RENDER_CACHE = 'on'
  try {
    const init = await runIchor(h.initArgs, h.env)
    if (init.code !== 0) throw new Error(`init failed: ${init.stderr}`)
    const kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
    const chart = join(ctx.upstream, 'charts', 'cilium-1.18.0.tgz')
    const common = ['--kubeconfig', join(h.stateDir, 'kubeconfig'), '--state-dir', h.stateDir]
    const times = async (label, args, okCodes = [0]) => {
      await runIchor([...args, ...common], h.env) // warm the render cache once
      const ms = []
      for (let i = 0; i < 5; i++) {
        const r = await runIchor([...args, ...common], h.env)
        if (!okCodes.includes(r.code)) throw new Error(`${label} exited ${r.code}: ${r.stderr}`)
        ms.push(r.ms)
      }
      return median(ms)
    }
    const status = await times('cni status', ['cni', 'status'])
    const before = (await readReleaseRecord(kube, 'cilium', 'kube-system')).revision
    const noop = await times('no-op cni values set', ['cni', 'values', 'set', '--yes', '--cilium-chart', chart])
    const after = (await readReleaseRecord(kube, 'cilium', 'kube-system')).revision
    if (after !== before) throw new Error(`a no-op cni values set made Helm revision ${after} (was ${before})`)
    const diff = await times('cni values diff', ['cni', 'values', 'diff', 'hubble.relay.enabled=true', '--cilium-chart', chart])
    console.log(`cni status (median of 5): ${fmtMs(status)}   goal <= 1 s`)
    console.log(`no-op cni values set (median of 5): ${fmtMs(noop)}, Helm revision ${before} -> ${after}   goal <= 1.5 s and no revision`)
    console.log(`cni values diff (median of 5): ${fmtMs(diff)}   goal <= 1.5 s`)
    console.log(
      `load average (1, 5, 15 min) at the end: ${loadavg()
        .map((l) => l.toFixed(2))
        .join(', ')} on ${availableParallelism()} cores`,
    )
  } finally {
    await h.stop()
  }
}
