// Loaded with NODE_OPTIONS=--import by the node-count benchmark: when a Node process ends, it
// writes its own CPU time and peak RSS (getrusage, so sub-processes are not counted) to
// $ICHOR_BENCH_REPORT_DIR/<pid>.json, with its argv. Only the CLI reports: ichor gives the
// programs it runs an explicit environment without NODE_OPTIONS.
import {writeFileSync} from 'node:fs'
import {join} from 'node:path'

const dir = process.env.ICHOR_BENCH_REPORT_DIR
if (dir) {
  process.on('exit', () => {
    const u = process.resourceUsage()
    const report = {pid: process.pid, argv: process.argv.slice(1), cpuMs: (u.userCPUTime + u.systemCPUTime) / 1000, maxRssKb: u.maxRSS}
    try {
      writeFileSync(join(dir, `${process.pid}.json`), JSON.stringify(report))
    } catch {
      // the benchmark's directory is gone: nothing to report to
    }
  })
}
