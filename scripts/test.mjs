#!/usr/bin/env node
// `npm test` after the build: the type check of the tests and `npm run lint` run beside vitest
// (niced, so they take the CPU the tests leave idle) instead of before it. Their output is kept
// and printed only when one fails, after vitest, so vitest's closing line stays the last line of
// a passing run. The exit code is non-zero when any of the three failed.
import {spawn} from 'node:child_process'
import {dirname, resolve} from 'node:path'
import {fileURLToPath} from 'node:url'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')

/** Runs `npm run <script>` (niced when asked), keeping its output. */
function npmRun(script, args = [], {nice = false, inherit = false} = {}) {
  const command = nice ? 'nice' : 'npm'
  const argv = [...(nice ? ['-n', '10', 'npm'] : []), 'run', '--silent', script, ...(args.length ? ['--', ...args] : [])]
  const started = Date.now()
  return new Promise((resolvePromise) => {
    const child = spawn(command, argv, {cwd: root, stdio: inherit ? 'inherit' : ['ignore', 'pipe', 'pipe']})
    let output = ''
    child.stdout?.on('data', (c) => (output += c))
    child.stderr?.on('data', (c) => (output += c))
    child.on('error', (err) => resolvePromise({script, code: 1, output: `${err.message}\n`, ms: Date.now() - started}))
    child.on('close', (code, signal) => resolvePromise({script, code: code ?? (signal ? 1 : 0), output, ms: Date.now() - started}))
  })
}

const checks = Promise.all([npmRun('lint:types', [], {nice: true}), npmRun('lint', [], {nice: true})])
const tests = await npmRun('test:vitest', process.argv.slice(2), {inherit: true})
const failed = (await checks).filter((c) => c.code !== 0)
for (const c of failed) process.stderr.write(`\nnpm run ${c.script} failed (exit ${c.code}):\n${c.output}`)
process.exitCode = tests.code !== 0 || failed.length ? 1 : 0
