// Starts a long-running child through runProcess, waits until it runs, then exits with
// code 3 while it still runs: the child must not outlive us. argv[2]: file the child writes its pid to.
import {existsSync} from 'node:fs'
import {runProcess} from '../../../src/lib/exec/run.js'

const pidFile = process.argv[2]!
void runProcess(process.execPath, ['-e', `require('node:fs').writeFileSync(${JSON.stringify(pidFile)}, String(process.pid)); setInterval(() => {}, 1000)`])
while (!existsSync(pidFile)) await new Promise((r) => setTimeout(r, 20))
process.exit(3)
