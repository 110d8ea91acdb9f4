// Runs the built CLI (node bin/run.js) asynchronously. A spawnSync would block the test
// worker's event loop for as long as the CLI runs, and vitest's worker times out its own
// progress messages ("Timeout calling onTaskUpdate") when a test blocks it over 60 s, which
// a few slow runs in a row do on a loaded machine.
import {spawn} from 'node:child_process'
import {join} from 'node:path'
import {PROJECT_ROOT} from './upstream.js'

export const BIN = join(PROJECT_ROOT, 'bin', 'run.js')

export interface CliResult {
  code: number | null
  stdout: string
  stderr: string
}

export function runCli(args: string[], options: {env?: NodeJS.ProcessEnv; input?: string; cwd?: string} = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {env: options.env ?? process.env, cwd: options.cwd, stdio: ['pipe', 'pipe', 'pipe']})
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
    child.on('error', reject)
    child.on('close', (code) => resolve({code, stdout, stderr}))
    child.stdin.on('error', () => undefined)
    child.stdin.end(options.input ?? '')
  })
}
