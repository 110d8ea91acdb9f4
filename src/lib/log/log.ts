// The one logger lib code calls for what only `-v/--verbose` shows: each probe's detail and
// every external command run. Commands set the level from their flags (src/lib/cli/base.ts);
// lib code never decides on its own whether to print. Everything goes to stderr so stdout
// stays one JSON document under --json; under --json these lines are JSON events too.

export type LogLevel = 'quiet' | 'verbose'

interface LogState {
  level: LogLevel
  json: boolean
  /** Where lines go (stderr; tests may swap it). */
  out: NodeJS.WritableStream
}

const state: LogState = {level: 'quiet', json: false, out: process.stderr}

/** Set once by the command from --verbose/--json. */
export function configureLog(options: Partial<LogState>): void {
  Object.assign(state, options)
}

function isVerbose(): boolean {
  return state.level === 'verbose'
}

// Flag names whose next argument (or `--flag=value` part) is a secret.
const SECRET_FLAGS = /^--?(password|token|secret|bearer-token|passphrase|client-key-data)$/i
// `key=value` pairs (helm --set, env) whose key names a secret.
const SECRET_KEY = /(password|passwd|token|secret|bearer|apikey|api-key|privatekey|private-key|credential)/i

/** argv with secret values replaced by `***`: flags named like a secret, and `k=v` whose key is. */
export function redactArgv(argv: readonly string[]): string[] {
  const out: string[] = []
  let hideNext = false
  for (const arg of argv) {
    if (hideNext) {
      out.push('***')
      hideNext = false
      continue
    }
    const eq = arg.indexOf('=')
    if (arg.startsWith('-') && eq > 0) {
      const flag = arg.slice(0, eq)
      const value = arg.slice(eq + 1)
      out.push(SECRET_FLAGS.test(flag) ? `${flag}=***` : `${flag}=${redactPairs(value)}`)
      continue
    }
    if (arg.startsWith('-') && SECRET_FLAGS.test(arg)) {
      out.push(arg)
      hideNext = true
      continue
    }
    out.push(redactPairs(arg))
  }
  return out
}

/** `a.password=x,b=y` → `a.password=***,b=y`; other text unchanged. */
function redactPairs(text: string): string {
  if (!text.includes('=')) return text
  return text
    .split(',')
    .map((pair) => {
      const eq = pair.indexOf('=')
      return eq > 0 && SECRET_KEY.test(pair.slice(0, eq)) ? `${pair.slice(0, eq)}=***` : pair
    })
    .join(',')
}

function quote(arg: string): string {
  return /^[\w@%+=:,./*-]+$/.test(arg) ? arg : `'${arg.replaceAll("'", "'\\''")}'`
}

function write(event: Record<string, unknown>, text: string): void {
  state.out.write(state.json ? `${JSON.stringify(event)}\n` : `${text}\n`)
}

export const log = {
  /** A detail only --verbose shows (a probe's answer, a decision taken). */
  verbose(message: string): void {
    if (isVerbose()) write({event: 'log', level: 'verbose', message}, `  · ${message}`)
  },
  /** An external command about to run (helm, talosctl): shown with --verbose, secrets redacted. */
  command(argv: readonly string[]): void {
    if (!isVerbose()) return
    const shown = redactArgv(argv)
    write({event: 'command', argv: shown}, `  $ ${shown.map(quote).join(' ')}`)
  },
}
