// The same, the way ichor hit it: execa 9.6.1 registers a signal-exit hook calling
// subprocess.kill() at exit; a spawn that failed with ENOENT, started but not awaited (a
// render begun in parallel with checks that then fail), is still inside that window when
// the command ends with process.exit from microtasks alone. DANGEROUS as above:
//   setsid strace -f -e trace=kill node test/exec/repro/pidless-kill-execa.mjs
// Seen with Node v20.20.2, execa 9.6.1: `kill(208, SIGTERM) = -1 ESRCH` (a garbage pid).
import {execa} from 'execa'

execa('ichor-no-such-binary').catch(() => {})
await null // microtasks only: the nextTick that delivers ENOENT has not run
process.exit(2)
