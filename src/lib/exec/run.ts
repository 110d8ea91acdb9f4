// The one place ichor starts an external process (helm, talosctl, credential plugins).
//
// - Only absolute paths of files checked executable (src/lib/exec/resolve.ts) are spawned,
//   so a missing binary never becomes a failed spawn.
// - A child is signalled only while it has a real pid and has not exited. Node keeps the
//   native handle of a failed spawn until the next tick, and ChildProcess#kill() then
//   signals the pid field libuv never set (garbage, or 0 = our whole process group).
// - Children still running when ichor exits (an error, a signal) get SIGTERM: helm and
//   talosctl end cleanly on it. After a SIGKILL of ichor nothing can run here; a helm left
//   running then finishes its release on its own (killing it would leave the release
//   pending-* for good), and the next run waits for it: see waitForSettledRelease in
//   src/lib/helm/pending.ts.
import {spawn, type ChildProcess} from 'node:child_process'
import {isAbsolute} from 'node:path'
import {onExit} from 'signal-exit'
import {IchorError} from '../errors/errors.js'
import {log} from '../log/log.js'

export interface RunOptions {
  /** Written to the child's stdin, then stdin is closed. Without it stdin is /dev/null. */
  input?: string
  /** The child's whole environment (no merge with ours): callers pass exactly what it gets. */
  env?: NodeJS.ProcessEnv
  /** SIGTERM after this long, SIGKILL 5 s later; the result then says timedOut. */
  timeoutMs?: number
  /** Cancels the child (SIGTERM, SIGKILL 5 s later); the result then says canceled. */
  signal?: AbortSignal
  /** Bytes of stdout (and of stderr) kept; more kills the child. Default 64 MiB. */
  maxBuffer?: number
  /** Let the child use our stdin and stderr (an interactive credential plugin). */
  inheritStdinStderr?: boolean
  /** Each whole line of stdout and stderr as it arrives (a long run's progress). */
  onLine?: (line: string) => void
}

export interface RunResult {
  /** null when the child ended by a signal. */
  exitCode: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
  timedOut: boolean
  canceled: boolean
  /** More output than maxBuffer: the child was killed and the output cut. */
  overflowed: boolean
}

const FORCE_KILL_AFTER_MS = 5_000

/** Children started and not yet exited, for the exit hook. */
const live = new Set<ChildProcess>()
let exitHookInstalled = false

/** Signals a child only while it is a running process with a pid of its own. */
export function signalChild(child: ChildProcess, sig: NodeJS.Signals = 'SIGTERM'): boolean {
  if (typeof child.pid !== 'number' || child.pid <= 0) return false
  if (child.exitCode !== null || child.signalCode !== null) return false
  return child.kill(sig)
}

function installExitHook(): void {
  if (exitHookInstalled) return
  exitHookInstalled = true
  // signal-exit also runs this on SIGINT/SIGTERM/SIGHUP, then re-raises the signal.
  onExit(() => {
    for (const child of live) signalChild(child, 'SIGTERM')
  })
}

/** Number of children started by runProcess that are still running (for tests). */
export function liveChildren(): number {
  return live.size
}

/**
 * Runs `file` (an absolute path) with `args` and collects its output. Never rejects for a
 * non-zero exit: the caller reads exitCode. Rejects only when the process could not be
 * started (with the errno code, e.g. ENOENT when the file vanished after it was found).
 */
export function runProcess(file: string, args: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  if (!isAbsolute(file)) throw new Error(`runProcess needs an absolute path, got "${file}" (resolve it first)`)
  installExitHook()
  // -v shows every external command ichor runs (secret flag values redacted).
  log.command([file, ...args])
  const maxBuffer = options.maxBuffer ?? 64 * 1024 * 1024
  return new Promise<RunResult>((resolvePromise, reject) => {
    if (options.signal?.aborted) {
      resolvePromise({exitCode: null, signal: null, stdout: '', stderr: '', timedOut: false, canceled: true, overflowed: false})
      return
    }
    const child = spawn(file, args, {
      env: options.env ?? process.env,
      stdio: [
        options.input === undefined ? (options.inheritStdinStderr ? 'inherit' : 'ignore') : 'pipe',
        'pipe',
        options.inheritStdinStderr ? 'inherit' : 'pipe',
      ],
      windowsHide: true,
    })
    // Tracked only once it has a pid: a failed spawn is never signalled.
    if (typeof child.pid === 'number') live.add(child)
    const out: Buffer[] = []
    const err: Buffer[] = []
    let outBytes = 0
    let errBytes = 0
    let timedOut = false
    let canceled = false
    let overflowed = false
    let forceKill: NodeJS.Timeout | undefined

    const terminate = () => {
      if (!signalChild(child, 'SIGTERM')) return
      forceKill ??= setTimeout(() => signalChild(child, 'SIGKILL'), FORCE_KILL_AFTER_MS)
      forceKill.unref()
    }
    const timer = options.timeoutMs === undefined ? undefined : setTimeout(() => ((timedOut = true), terminate()), options.timeoutMs)
    const onAbort = () => ((canceled = true), terminate())
    options.signal?.addEventListener('abort', onAbort, {once: true})
    const collect = (chunks: Buffer[], isOut: boolean) => (chunk: Buffer) => {
      const size = isOut ? (outBytes += chunk.length) : (errBytes += chunk.length)
      if (size > maxBuffer) {
        overflowed = true
        terminate()
        return
      }
      chunks.push(chunk)
      if (options.onLine) {
        const lines = (pending[isOut ? 0 : 1] + chunk.toString('utf8')).split('\n')
        pending[isOut ? 0 : 1] = lines.pop() ?? ''
        for (const line of lines) options.onLine(line)
      }
    }
    const pending = ['', '']
    child.stdout?.on('data', collect(out, true))
    child.stderr?.on('data', collect(err, false))
    if (options.input !== undefined && child.stdin) {
      // A child may exit without reading all of its input: that is its answer, not our error.
      child.stdin.on('error', () => {})
      child.stdin.end(options.input)
    }
    const settle = () => {
      live.delete(child)
      if (timer) clearTimeout(timer)
      if (forceKill) clearTimeout(forceKill)
      options.signal?.removeEventListener('abort', onAbort)
    }
    child.once('error', (error: NodeJS.ErrnoException) => {
      settle()
      reject(error)
    })
    child.once('close', (exitCode, signal) => {
      settle()
      resolvePromise({
        exitCode,
        signal,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
        timedOut,
        canceled,
        overflowed,
      })
    })
  })
}

/** An error for a process that could not be started at all. */
export function startError(what: string, path: string, error: unknown, hint?: string): IchorError {
  const code = (error as NodeJS.ErrnoException).code
  return new IchorError(`cannot start ${what} at ${path}: ${code ?? (error as Error).message}`, {hint, cause: error})
}
