// `ichor status` on a 3+2 harness after one `ichor init` (issue 37: goal <= 1.5 s): wall time of
// the CLI as an operator runs it, with this machine's talosconfig (one talosctl version for the
// five nodes) and without one (the Kubernetes reads alone).
import {loadavg} from 'node:os'
import {join} from 'node:path'
import {fmtMs, median} from './lib.mjs'

export async function run(ctx) {
  const {startHarnessCluster, runIchor} = await import(join(ctx.root, 'test', 'harness', 'cluster.ts'))
  const h = await startHarnessCluster({controlPlanes: 3, workers: 2})
  try {
    const init = await runIchor([...h.initArgs, '--json'], h.env)
    if (init.code !== 0) throw new Error(`ichor init failed: ${init.stderr}\n${init.stdout.slice(-1500)}`)
    const times = async (args, n = 7) => {
      const ms = []
      for (let i = 0; i < n; i++) {
        const r = await runIchor(args, h.env)
        if (r.code !== 0) throw new Error(`ichor ${args.join(' ')} exited ${r.code}: ${r.stderr}`)
        ms.push(r.ms)
      }
      return ms
    }
    const kubeconfig = ['--kubeconfig', join(h.stateDir, 'kubeconfig')]
    const withTalos = await times(['status', '-o', 'json', ...kubeconfig, '--state-dir', h.stateDir])
    const kubeOnly = await times(['status', '-o', 'json', ...kubeconfig, '--state-dir', join(h.stateDir, 'none')])
    console.log(`ichor status -o json on 3+2, Talos versions read (median of 7): ${fmtMs(median(withTalos))}   goal <= 1.5 s`)
    console.log(`ichor status -o json on 3+2, no talosconfig (median of 7): ${fmtMs(median(kubeOnly))}`)
    console.log(
      `load average while measuring (1/5/15 min): ${loadavg()
        .map((x) => x.toFixed(2))
        .join(' ')} on ${(await import('node:os')).cpus().length} cores`,
    )
  } finally {
    await h.stop()
  }
}
