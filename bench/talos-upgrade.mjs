// `ichor talos upgrade` on the harness (3+2 after one `ichor init`): the whole run's wall time
// against the time its `talosctl upgrade` calls took (a wrapper around the talosctl stand-in
// logs each call's start and end), so ichor's own time per node (the checks before the Lease,
// the Lease, the proof after each node: Node Ready, Cilium agent Ready, the records; the waits
// after the last node) reads off as the difference. Goal: under 2 s per node on top of talosctl.
import {chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {availableParallelism, loadavg, tmpdir} from 'node:os'
import {join} from 'node:path'
import {fmtMs} from './lib.mjs'

export async function run(ctx) {
  const {startHarnessCluster, runIchor} = await import(join(ctx.root, 'test', 'harness', 'cluster.ts'))
  const h = await startHarnessCluster({controlPlanes: 3, workers: 2})
  const work = mkdtempSync(join(tmpdir(), 'ichor-bench-talos-'))
  try {
    const init = await runIchor(h.initArgs, h.env)
    if (init.code !== 0) throw new Error(`init failed: ${init.stderr}`)
    const log = join(work, 'talosctl.log')
    const wrapper = join(work, 'talosctl')
    writeFileSync(
      wrapper,
      `#!/bin/sh\nstart=$(date +%s%N)\n${JSON.stringify(h.env.ICHOR_TALOSCTL)} "$@"\nrc=$?\necho "$1 $start $(date +%s%N)" >> ${JSON.stringify(log)}\nexit $rc\n`,
    )
    chmodSync(wrapper, 0o755)
    const env = {...h.env, ICHOR_TALOSCTL: wrapper}
    const common = ['--kubeconfig', join(h.stateDir, 'kubeconfig'), '--state-dir', h.stateDir, '--yes', '--json']
    const nodes = h.controlPlanes.length + h.workers.length
    for (const to of ['v1.14.2', 'v1.14.3']) {
      writeFileSync(log, '')
      const r = await runIchor(['talos', 'upgrade', '--to', to, ...common], env)
      if (r.code !== 0) throw new Error(`talos upgrade --to ${to} exited ${r.code}: ${r.stderr.slice(-3000)}`)
      const calls = readFileSync(log, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split(' '))
        .map(([cmd, start, end]) => ({cmd, ms: (Number(end) - Number(start)) / 1e6}))
      const upgrades = calls.filter((c) => c.cmd === 'upgrade')
      const upgradeMs = upgrades.reduce((a, c) => a + c.ms, 0)
      const otherMs = calls.filter((c) => c.cmd !== 'upgrade').reduce((a, c) => a + c.ms, 0)
      const own = r.ms - upgradeMs
      console.log(
        `talos upgrade --to ${to} on ${h.controlPlanes.length}+${h.workers.length}: ${fmtMs(r.ms)} in all; ${upgrades.length} talosctl upgrade calls ${fmtMs(upgradeMs)} ` +
          `(${fmtMs(upgradeMs / Math.max(1, upgrades.length))} each, TALOS_SIM_REBOOT_MS ${process.env.TALOS_SIM_REBOOT_MS ?? 2000}); ` +
          `ichor on top: ${fmtMs(own)}, ${fmtMs(own / nodes)} per node (of which ${calls.length - upgrades.length} other talosctl calls ${fmtMs(otherMs)})   goal < 2 s per node`,
      )
    }
    const again = await runIchor(['talos', 'upgrade', '--to', 'v1.14.3', ...common], env)
    console.log(`talos upgrade at the target (nothing to do): ${fmtMs(again.ms)}`)
    console.log(
      `load average (1, 5, 15 min) at the end: ${loadavg()
        .map((l) => l.toFixed(2))
        .join(', ')} on ${availableParallelism()} cores`,
    )
  } finally {
    rmSync(work, {recursive: true, force: true})
    await h.stop()
  }
}
