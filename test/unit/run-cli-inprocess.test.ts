// runCliInProcess (test/support/run-cli-inprocess.ts) gives a run its own env, cwd and streams
// and hands the process back as it found it; its parity with a real process is checked where
// the tables use it (cli-exit-codes, consent-rule).
import {mkdtempSync, realpathSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {describe, expect, it} from 'vitest'
import {runCliInProcess} from '../support/run-cli-inprocess.js'

describe('runCliInProcess', () => {
  it('restores env, cwd, umask, exitCode, the streams and the signal handlers after a run', async () => {
    const before = {
      cwd: process.cwd(),
      umask: process.umask(),
      exit: process.exit,
      stdout: process.stdout.write,
      stderr: process.stderr.write,
      console: globalThis.console,
      sigint: process.listenerCount('SIGINT'),
      drain: process.stdout.listenerCount('drain'),
    }
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'ichor-inprocess-')))
    const r = await runCliInProcess(['version', '--json'], {env: {...process.env, ICHOR_INPROCESS_PROBE: '1'}, cwd: dir})
    expect(r.code, r.stderr).toBe(0)
    expect(JSON.parse(r.stdout).schemaVersion).toBe(1)
    expect(process.env.ICHOR_INPROCESS_PROBE).toBeUndefined()
    expect(process.cwd()).toBe(before.cwd)
    expect(process.umask()).toBe(before.umask)
    expect(process.exitCode).toBeUndefined()
    expect(process.exit).toBe(before.exit)
    expect(process.stdout.write).toBe(before.stdout)
    expect(process.stderr.write).toBe(before.stderr)
    expect(globalThis.console).toBe(before.console)
    expect(process.listenerCount('SIGINT')).toBe(before.sigint)
    expect(process.stdout.listenerCount('drain')).toBe(before.drain)
  })

  it('a usage error is exit 2 through the project handler, and the next run starts clean', async () => {
    const bad = await runCliInProcess(['inti'])
    expect(bad.code).toBe(2)
    expect(bad.stderr).toContain('did you mean ichor init?')
    const good = await runCliInProcess(['version'])
    expect(good.code, good.stderr).toBe(0)
    expect(good.stderr).toBe('')
  })

  it('refuses a second run while one is going', async () => {
    const first = runCliInProcess(['version'])
    await expect(runCliInProcess(['version'])).rejects.toThrow(/one run at a time/)
    expect((await first).code).toBe(0)
  })
})
