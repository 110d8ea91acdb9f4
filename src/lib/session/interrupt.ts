// SIGINT/SIGTERM: run what the command registered (release the Lease, close a tunnel), then
// exit 130. Lib code registers with onInterrupt() and unregisters when done, so a cleanup
// runs exactly once: on the normal path by its owner, on an interrupt from here.
import {EXIT} from '../errors/exit-codes.js'

type Cleanup = () => unknown

const cleanups = new Set<Cleanup>()
let installed: ((signal: NodeJS.Signals) => void) | undefined
let interrupted = false
/** Set while a command serves until Ctrl-C (`ichor open`): the interrupt is its normal end. */
let endsNormally = false

/** Cleanups get this long in total before the process exits anyway. */
const CLEANUP_BUDGET_MS = 5000

/**
 * For a command that runs until Ctrl-C (as kubectl port-forward does): an interrupt runs the
 * cleanups and exits 0, with no "interrupted" report. Returns the function that undoes it.
 */
export function interruptEndsNormally(): () => void {
  endsNormally = true
  return () => {
    endsNormally = false
  }
}

/**
 * Lets a SIGINT/SIGTERM that came during long synchronous work (parsing forty patch files) be
 * handled before the next step writes anything: libuv reads a signal in its poll phase, which
 * synchronous work never reaches, so two turns of the loop are taken. When one came, this never
 * returns: the handler runs the cleanups and exits 130.
 */
export async function heedSignals(): Promise<void> {
  await new Promise((resolve) => setImmediate(resolve))
  await new Promise((resolve) => setImmediate(resolve))
  if (interrupted) await new Promise(() => {})
}

/**
 * Registers a cleanup to run when the command is interrupted. Returns the function that
 * unregisters it (call it once the resource is closed on the normal path).
 */
export function onInterrupt(cleanup: Cleanup): () => void {
  cleanups.add(cleanup)
  return () => cleanups.delete(cleanup)
}

export interface InterruptOptions {
  /** Prints the interruption (text or JSON) before exiting. */
  report: (signal: NodeJS.Signals) => void
  exit?: (code: number) => void
}

/** Installed once per process by the command base class. A second signal exits at once. */
export function installInterruptHandlers(options: InterruptOptions): void {
  if (installed) return
  const exit = options.exit ?? ((code: number) => process.exit(code))
  const onSignal = (signal: NodeJS.Signals): void => {
    if (interrupted) return exit(EXIT.interrupted)
    interrupted = true
    const normal = endsNormally
    void runCleanups().finally(() => {
      if (normal) return exit(EXIT.ok)
      options.report(signal)
      exit(EXIT.interrupted)
    })
  }
  installed = onSignal
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
}

/** Removes the handlers again: for a process that embeds commands (and the in-process tests). */
export function removeInterruptHandlers(): void {
  if (!installed) return
  process.off('SIGINT', installed)
  process.off('SIGTERM', installed)
  installed = undefined
  interrupted = false
  endsNormally = false
}

/** Runs every registered cleanup (newest first), each at most once, within the budget. */
async function runCleanups(): Promise<void> {
  const pending = [...cleanups].reverse()
  cleanups.clear()
  const all = (async () => {
    for (const cleanup of pending) {
      try {
        await cleanup()
      } catch (error) {
        process.stderr.write(`cleanup after interrupt failed: ${(error as Error).message}\n`)
      }
    }
  })()
  let timer: NodeJS.Timeout | undefined
  const budget = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, CLEANUP_BUDGET_MS)
    timer.unref()
  })
  await Promise.race([all, budget])
  clearTimeout(timer)
}
