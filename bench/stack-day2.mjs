// `ichor stack status`, a no-op `ichor stack sync` and `ichor stack values set argocd` on the
// harness after one `ichor init` (real apiserver/etcd, registry, helm, talosctl; real Kokumi
// 0.14.0 manifest and Argo CD chart; simulated nodes, readiness and Kokumi/Argo CD): wall time
// of the CLI as an operator runs it. The values set is timed without its wait for the
// Application (the `wait-applications` step, which waits on Argo CD, not on ichor). The runs
// share one XDG_CACHE_HOME, as an operator's runs do.
import {loadavg} from 'node:os'
import {join} from 'node:path'
import {fmtMs, median} from './lib.mjs'

export async function run(ctx) {
  const {startHarnessCluster, runIchor, jsonEvents} = await import(join(ctx.root, 'test', 'harness', 'cluster.ts'))
  const {UPSTREAM} = await import(join(ctx.root, 'test', 'support', 'upstream.ts'))
  const h = await startHarnessCluster()
  try {
    const init = await runIchor([...h.initArgs, '--json'], h.env)
    if (init.code !== 0) throw new Error(`ichor init failed: ${init.stderr}\n${init.stdout.slice(-1500)}`)
    const day2 = ['--kubeconfig', join(h.stateDir, 'kubeconfig'), '--registry-endpoint', h.registry.endpoint]
    const check = (r, args) => {
      if (r.code !== 0) throw new Error(`${args.join(' ')} exited ${r.code}: ${r.stderr}`)
      return r
    }
    const times = async (args, n = 5) => {
      const ms = []
      for (let i = 0; i < n; i++) ms.push(check(await runIchor(args, h.env), args).ms)
      return ms
    }
    // The first look after a change dry-runs every object of both bundles; later ones only what
    // changed since (the verdict cache, src/lib/stack/drift-cache.ts). Both are printed.
    const statusArgs = ['stack', 'status', '-o', 'json', ...day2]
    const cold = check(await runIchor(statusArgs, {...h.env, ICHOR_DRIFT_CACHE: 'off'}), statusArgs).ms
    const status = await times(statusArgs)
    const sync = await times(['stack', 'sync', '--yes', '--json', ...day2])
    // Each set is a real change (alternating values): new bundle, Order moved.
    const set = []
    for (let i = 0; i < 5; i++) {
      const args = [
        'stack',
        'values',
        'set',
        'argocd',
        '--yes',
        '--set',
        `server.podAnnotations.bench=run${i}`,
        '--json',
        ...day2,
        '--argocd-chart',
        UPSTREAM.argocdChart,
        '--kokumi-manifest',
        h.kokumiManifest,
      ]
      const r = check(await runIchor(args, h.env), args)
      const wait = jsonEvents(r).find((e) => e.event === 'task' && e.id === 'wait-applications' && e.ms !== undefined)
      set.push(r.ms - (wait?.ms ?? 0))
    }
    console.log(`ichor stack status -o json (median of 5): ${fmtMs(median(status))}   goal <= 1 s`)
    console.log(`ichor stack status -o json, nothing remembered (ICHOR_DRIFT_CACHE=off, every object dry-run): ${fmtMs(cold)}`)
    console.log(`ichor stack sync, nothing to do (median of 5): ${fmtMs(median(sync))}   goal <= 1.5 s`)
    console.log(`ichor stack values set argocd, without the wait for the Application (median of 5): ${fmtMs(median(set))}   goal <= 3 s`)
    console.log(
      `load average while measuring (1/5/15 min): ${loadavg()
        .map((x) => x.toFixed(2))
        .join(' ')} on ${(await import('node:os')).cpus().length} cores`,
    )
  } finally {
    await h.stop()
  }
}
