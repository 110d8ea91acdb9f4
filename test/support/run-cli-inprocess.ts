// Runs the built CLI inside this test process, with what runCli (run-cli.ts) returns: the exit
// code, stdout and stderr. A table of fifty rows spends most of a spawned run on Node and oclif
// starting; here oclif's `run` loads the same dist/ files once and every row after the first
// costs only its own work.
//
// It takes the steps of bin/run.js (entryArgv, the topic-flag check, oclif's run, flush) and on
// a throw calls the project's own handleTopLevelError, with process.exit turned into a throw
// that carries the code: the exit code comes from the same code as in a real run. The dist/
// modules are imported by Node itself (as oclif imports the commands), not through vitest, so
// the error classes, the interrupt handlers and every module-level setting are the ones the
// commands use.
//
// Not the same as a process, so those rows stay on runCli: stdin (values/input.ts reads fd 0
// synchronously and keeps what it read), signals, a terminal, and runs meant to be separate
// processes (two renders compared byte for byte). A crash that would end a real process (an
// uncaught exception) fails the test instead of giving exit 1. One run at a time: the process's
// env, cwd, streams and exit code are swapped for the run.
import {Console} from 'node:console'
import {createRequire} from 'node:module'
import {join} from 'node:path'
import tty from 'node:tty'
import {pathToFileURL} from 'node:url'
import {BIN, type CliResult} from './run-cli.js'
import {PROJECT_ROOT} from './upstream.js'

export interface InProcessOptions {
  /** The whole environment of the run (as runCli's `env`); default this process's. */
  env?: NodeJS.ProcessEnv
  cwd?: string
  /** Called with every chunk written, as it is written: a test can time a line. */
  onWrite?: (stream: 'stdout' | 'stderr', text: string) => void
}

type Oclif = typeof import('@oclif/core')
interface Entry {
  oclif: Oclif
  entryArgv: (argv: readonly string[]) => string[]
  flagGivenToTopic: (argv: readonly string[], config: unknown) => {topic: string; flag: string} | undefined
  topicFlagError: (found: {topic: string; flag: string}, bin: string) => Error
  handleTopLevelError: (err: unknown, argv: readonly string[], catalog?: () => Promise<unknown>) => Promise<never>
  removeInterruptHandlers: () => void
}

// Node's own require (of ES modules, Node >= 20.19), which vitest does not rewrite as it does
// import(): dist/ must be the instance oclif loads, or an IchorError is not one to reportOf.
const nodeRequire = createRequire(import.meta.url)
const dist = (file: string) => nodeRequire(join(PROJECT_ROOT, 'dist', file))
const BIN_URL = pathToFileURL(BIN).href

let entry: Entry | undefined
function loadEntry(): Entry {
  // As bin/run.js: oclif's engines check, run when it loads, stays silent.
  const engineWarning = process.env.OCLIF_DISABLE_ENGINE_WARNING
  process.env.OCLIF_DISABLE_ENGINE_WARNING = '1'
  const oclif = nodeRequire('@oclif/core') as Oclif
  if (engineWarning === undefined) delete process.env.OCLIF_DISABLE_ENGINE_WARNING
  else process.env.OCLIF_DISABLE_ENGINE_WARNING = engineWarning
  return {
    oclif,
    entryArgv: dist('lib/cli/entry-argv.js').entryArgv,
    flagGivenToTopic: dist('lib/cli/entry-argv.js').flagGivenToTopic,
    topicFlagError: dist('lib/cli/top-level.js').topicFlagError,
    handleTopLevelError: dist('lib/cli/top-level.js').handleTopLevelError,
    removeInterruptHandlers: dist('lib/session/interrupt.js').removeInterruptHandlers,
  }
}

/** process.exit during a run: unwinds to runCliInProcess with the code. */
class ProcessExit extends Error {
  constructor(readonly code: number) {
    super(`process.exit(${code})`)
  }
}

let busy = false

export async function runCliInProcess(args: string[], options: InProcessOptions = {}): Promise<CliResult> {
  if (busy) throw new Error('runCliInProcess: one run at a time (the process env, cwd and streams are swapped for a run)')
  busy = true
  const saved = {
    env: {...process.env},
    cwd: process.cwd(),
    umask: process.umask(),
    exitCode: process.exitCode,
    exit: process.exit,
    console: globalThis.console,
    stdoutWrite: process.stdout.write,
    stderrWrite: process.stderr.write,
    isatty: tty.isatty,
    tty: [process.stdin, process.stdout, process.stderr].map((s) => Object.getOwnPropertyDescriptor(s, 'isTTY')),
    signals: {SIGINT: process.listeners('SIGINT'), SIGTERM: process.listeners('SIGTERM')},
    drain: process.stdout.listeners('drain'),
  }
  let stdout = ''
  let stderr = ''
  const capture = (stream: 'stdout' | 'stderr') =>
    function write(chunk: string | Uint8Array, encoding?: unknown, callback?: unknown): boolean {
      const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8')
      if (stream === 'stdout') stdout += text
      else stderr += text
      options.onWrite?.(stream, text)
      const done = typeof encoding === 'function' ? encoding : callback
      if (typeof done === 'function') queueMicrotask(() => done())
      return true
    }
  try {
    // What a spawned CLI sees: its own env and cwd, pipes (no terminal) on 0, 1 and 2.
    replaceEnv(options.env ?? saved.env)
    if (options.cwd) process.chdir(options.cwd)
    process.exitCode = undefined
    for (const s of [process.stdin, process.stdout, process.stderr]) Object.defineProperty(s, 'isTTY', {value: undefined, configurable: true, writable: true})
    tty.isatty = (fd: number) => fd > 2 && saved.isatty(fd)
    process.stdout.write = capture('stdout') as typeof process.stdout.write
    process.stderr.write = capture('stderr') as typeof process.stderr.write
    // oclif's ux prints with console.log, which vitest replaces with its own in a test worker.
    globalThis.console = new Console({stdout: process.stdout, stderr: process.stderr})
    process.exit = ((code?: number | string | null) => {
      throw new ProcessExit(Number(code ?? process.exitCode ?? 0))
    }) as typeof process.exit
    // Loaded inside the swap on the first run: oclif sizes its help and colours from the streams it sees when it loads.
    entry ??= loadEntry()
    const code = await runEntry(entry, args)
    return {code, stdout, stderr}
  } finally {
    entry?.removeInterruptHandlers()
    for (const signal of ['SIGINT', 'SIGTERM'] as const)
      for (const listener of process.listeners(signal)) if (!saved.signals[signal].includes(listener)) process.off(signal, listener)
    // oclif's flush waits for a 'drain' that a captured write never emits.
    for (const listener of process.stdout.listeners('drain')) if (!saved.drain.includes(listener)) process.stdout.off('drain', listener as () => void)
    process.exit = saved.exit
    globalThis.console = saved.console
    process.stdout.write = saved.stdoutWrite
    process.stderr.write = saved.stderrWrite
    tty.isatty = saved.isatty
    ;[process.stdin, process.stdout, process.stderr].forEach((s, i) => {
      const d = saved.tty[i]
      if (d) Object.defineProperty(s, 'isTTY', d)
      else delete (s as {isTTY?: boolean}).isTTY
    })
    process.exitCode = saved.exitCode
    process.umask(saved.umask)
    process.chdir(saved.cwd)
    replaceEnv(saved.env)
    busy = false
  }
}

/** bin/run.js, with process.exit as a throw: the code the process would have ended with. */
async function runEntry({oclif, entryArgv, flagGivenToTopic, topicFlagError, handleTopLevelError}: Entry, args: string[]): Promise<number> {
  const argv = entryArgv(args)
  try {
    try {
      const config = await oclif.Config.load(BIN_URL)
      const topicFlag = flagGivenToTopic(argv, config)
      if (topicFlag) throw topicFlagError(topicFlag, config.bin)
      await oclif.run(argv, config)
      await oclif.flush()
    } catch (error) {
      // process.exit ends a real process where it is called: nothing else runs.
      if (error instanceof ProcessExit) throw error
      await handleTopLevelError(error, argv, () => oclif.Config.load(BIN_URL))
    }
  } catch (error) {
    if (error instanceof ProcessExit) return error.code
    throw error
  }
  return Number(process.exitCode ?? 0)
}

/** Replaces the variables of process.env in place: modules holding process.env see the row's. */
function replaceEnv(env: NodeJS.ProcessEnv): void {
  const next = {...env}
  for (const key of Object.keys(process.env)) if (!(key in next)) delete process.env[key]
  for (const [key, value] of Object.entries(next)) if (value !== undefined) process.env[key] = value
}
