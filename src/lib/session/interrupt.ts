// SIGINT/SIGTERM: run the registered cleanups (free the Lease, close the tunnel), then exit
// 130 as a shell expects of an interrupted command. A second signal exits at once.
import {EXIT} from '../errors/exit-codes.js'

const cleanups = new Set<() => Promise<void> | void>()
let installed = false
let interrupted = false

function handle(signal: NodeJS.Signals): void {
  if (interrupted) process.exit(EXIT.interrupted)
  interrupted = true
  process.stderr.write(`\n${signal}: stopping; freeing the lock and closing connections\n`)
  const pending = [...cleanups].map(async (fn) => {
    try {
      await fn()
    } catch {
      // Best effort: an unreleased Lease expires on its own.
    }
  })
  // Bounded: a cleanup that hangs (a dead API server) must not keep the operator waiting.
  const deadline = new Promise((resolve) => setTimeout(resolve, 5000).unref())
  void Promise.race([Promise.all(pending), deadline]).then(() => process.exit(EXIT.interrupted))
}

/** Registers a cleanup for SIGINT/SIGTERM; returns its removal. */
export function onInterrupt(cleanup: () => Promise<void> | void): () => void {
  if (!installed) {
    installed = true
    process.on('SIGINT', handle)
    process.on('SIGTERM', handle)
  }
  cleanups.add(cleanup)
  return () => cleanups.delete(cleanup)
}
