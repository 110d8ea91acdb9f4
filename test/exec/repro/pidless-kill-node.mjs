// Smallest reproduction of issue 11 with Node alone (no execa). DANGEROUS: it signals the
// pid libuv never set for a failed spawn, often 0 = this script's whole process group.
// Run it only in its own group, in a throwaway container:
//   setsid strace -f -e trace=kill node test/exec/repro/pidless-kill-node.mjs
// Seen with Node v20.20.2 (libuv 1.46): `kill(0, SIGTERM) = 0`, exit status 143.
import {spawn} from 'node:child_process'

const child = spawn('ichor-no-such-binary', [])
child.on('error', () => {})
// Same tick as the failed spawn: the ENOENT is only delivered on the next tick
// (onErrorNT), which is what clears child._handle; until then kill() reaches
// uv_process_kill() with an uninitialised pid.
console.log(`pid=${child.pid} handle=${child._handle !== null}`)
child.kill()
