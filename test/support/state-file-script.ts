// Runs one local-state operation in a child process (as another user, or inside a mount
// namespace set up by test/support/other-user.ts) and prints its outcome as one JSON line.
//   prepare <dir>      prepareStateDir(localState('c', dir))
//   full-disk <dir>    writes the secrets bundle read from stdin into <dir>, then the same
//                      bundle with a 1 MiB comment (more than the test's tmpfs holds), and reads back
import {readFileSync} from 'node:fs'
import {localState, prepareStateDir, readStateFile, writeStateFile} from '../../src/lib/state/local.js'

const [op, dir] = process.argv.slice(2)
const out = (v: unknown) => process.stdout.write(`${JSON.stringify(v)}\n`)
const failure = (err: unknown) => {
  const e = err as Error & {exitCode?: number}
  return {name: e.name, exitCode: e.exitCode, message: e.message}
}
try {
  const state = localState('c', dir)
  if (op === 'prepare') {
    out({ok: true, ...prepareStateDir(state)})
  } else if (op === 'full-disk') {
    const bundle = readFileSync(0, 'utf8')
    prepareStateDir(state)
    writeStateFile(state, 'secrets', bundle)
    let error
    try {
      writeStateFile(state, 'secrets', `${bundle}# ${'x'.repeat(1024 * 1024)}\n`)
    } catch (err) {
      error = failure(err)
    }
    const after = readStateFile(state, 'secrets')
    out({ok: true, error, status: after.status, unchanged: after.status === 'ok' && after.text === bundle})
  } else {
    throw new Error(`unknown op ${op}`)
  }
} catch (err) {
  out({ok: false, ...failure(err)})
}
