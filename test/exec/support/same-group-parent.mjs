// The "caller" of the regression test for issue 11: a script that runs the built CLI many
// times from ITS OWN process group, as a user's shell or CI script does. A CLI that sent
// SIGTERM to pid 0 would kill this script too; then it never prints its summary.
// Usage: node same-group-parent.mjs PLAN.json  (PLAN: {concurrency, runs: [{args, env}]})
import {spawn} from 'node:child_process'
import {readFileSync} from 'node:fs'

const plan = JSON.parse(readFileSync(process.argv[2], 'utf8'))
const results = new Array(plan.runs.length)
let next = 0

function runOne(i) {
  const {args, env} = plan.runs[i]
  return new Promise((resolve) => {
    // Not detached: the CLI shares this script's process group.
    const child = spawn(process.execPath, args, {env, stdio: ['ignore', 'pipe', 'pipe']})
    // Both streams: a failed step's message is printed by the step list (stdout when piped).
    let output = ''
    child.stdout.on('data', (c) => (output += c))
    child.stderr.on('data', (c) => (output += c))
    child.on('close', (code, signal) => resolve((results[i] = {code, signal, stderr: output.slice(-4000)})))
  })
}

async function worker() {
  while (next < plan.runs.length) await runOne(next++)
}

await Promise.all(Array.from({length: plan.concurrency ?? 1}, worker))
process.stdout.write(JSON.stringify({survived: true, results}))
