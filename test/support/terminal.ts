// A pseudo-terminal session with the built CLI (util-linux `script`): `expect` waits for
// text on the screen, `type` sends keys, as a user at a terminal would.
import {spawn} from 'node:child_process'
import {join} from 'node:path'
import {PROJECT_ROOT} from './upstream.js'

const BIN = join(PROJECT_ROOT, 'bin', 'run.js')
const shellQuote = (s: string) => `'${s.replaceAll("'", "'\\''")}'`
// Inquirer's visible text is drawn with escape sequences between the words.
const visible = (s: string) => s.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '').replace(/\r/g, '')

/** A terminal session: `expect` waits for text on the screen, `type` sends keys. */
export function terminal(args: string[], options: {executable?: string; env?: NodeJS.ProcessEnv} = {}) {
  // A wide terminal, so no answer or message wraps. `executable`: another build of ichor (the single binary).
  const argv = options.executable ? [options.executable, ...args] : [process.execPath, BIN, ...args]
  const command = `stty cols 250 rows 50; ${argv.map(shellQuote).join(' ')}`
  const child = spawn('script', ['-qfec', command, '/dev/null'], {
    env: {...process.env, ICHOR_MIRROR: '', TERM: 'xterm', ...options.env},
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  // Keys typed after the command ended (it need not wait for them) meet a closed pipe: no error.
  child.stdin.on('error', () => {})
  let screen = ''
  let seen = 0
  child.stdout.on('data', (d) => (screen += visible(String(d))))
  child.stderr.on('data', (d) => (screen += visible(String(d))))
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  return {
    /** Resolves once `text` shows after what earlier expects consumed. */
    async expect(text: string | RegExp, timeoutMs = 60_000): Promise<string> {
      const started = Date.now()
      for (;;) {
        const rest = screen.slice(seen)
        const match =
          typeof text === 'string'
            ? rest.includes(text)
              ? {index: rest.indexOf(text), length: text.length}
              : undefined
            : (() => {
                const m = text.exec(rest)
                return m ? {index: m.index, length: m[0].length} : undefined
              })()
        if (match) {
          seen += match.index + match.length
          return rest.slice(0, match.index + match.length)
        }
        if (Date.now() - started > timeoutMs) throw new Error(`no ${text} on the terminal after ${timeoutMs} ms; it shows:\n${rest}`)
        await new Promise((r) => setTimeout(r, 50))
      }
    },
    type(keys: string): void {
      child.stdin.write(keys)
    },
    exited,
    screen: () => screen,
  }
}
