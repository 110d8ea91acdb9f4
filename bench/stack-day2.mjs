// `ichor stack status` and a no-op `ichor stack sync` on the harness after one `ichor init`
// (real apiserver/etcd, registry, helm, talosctl; real Kokumi 0.14.0 manifest; simulated
// nodes, readiness and Kokumi/Argo CD): wall time of the CLI as an operator runs it.
import {join} from 'node:path'
import {fmtMs, median} from './lib.mjs'

export async function run(ctx) {
  const {startHarnessCluster, runIchor} = await import(join(ctx.root, 'test', 'harness', 'cluster.ts'))
  const h = await startHarnessCluster()
  try {
    const init = await runIchor([...h.initArgs, '--json'], h.env)
    if (init.code !== 0) throw new Error(`ichor init failed: ${init.stderr}\n${init.stdout.slice(-1500)}`)
    const day2 = ['--kubeconfig', join(h.stateDir, 'kubeconfig'), '--registry-endpoint', h.registry.endpoint]
    const times = async (args) => {
      const ms = []
      for (let i = 0; i < 5; i++) {
        const r = await runIchor(args, h.env)
        if (r.code !== 0) throw new Error(`${args.join(' ')} exited ${r.code}: ${r.stderr}`)
        ms.push(r.ms)
      }
      return ms
    }
    const status = await times(['stack', 'status', '-o', 'json', ...day2])
    const sync = await times(['stack', 'sync', '--json', ...day2])
    console.log(`ichor stack status -o json (median of 5): ${fmtMs(median(status))}   goal <= 1 s`)
    console.log(`ichor stack sync, nothing to do (median of 5): ${fmtMs(median(sync))}   goal <= 1.5 s`)
  } finally {
    await h.stop()
  }
}
