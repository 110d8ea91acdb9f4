// Temporary folders ichor creates (Talos patches, helm plugins dirs) are private and gone
// on every way out (issue 12 point 15), including a signal and, on the next run, a SIGKILL.
import {spawn, spawnSync} from 'node:child_process'
import {existsSync, mkdirSync, mkdtempSync, readdirSync, statSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {describe, expect, it} from 'vitest'
import {withPrivateTempDir} from '../../src/lib/fs/private-files.js'
import {tsxCommand} from '../support/other-user.js'
import {PROJECT_ROOT} from '../support/upstream.js'

const unique = (name: string) => `ichor-test-${name}-${process.pid}-${Date.now()}-`
const leftovers = (prefix: string) => readdirSync(tmpdir()).filter((n) => n.startsWith(prefix))

describe('withPrivateTempDir', () => {
  it('gives a 0700 folder and removes it when the work returns or throws', async () => {
    const prefix = unique('ret')
    const seen = await withPrivateTempDir(prefix, async (dir) => {
      expect(statSync(dir).mode & 0o777).toBe(0o700)
      writeFileSync(join(dir, 'patch.yaml'), 'x')
      return dir
    })
    expect(existsSync(seen)).toBe(false)
    await expect(
      withPrivateTempDir(prefix, async () => {
        throw new Error('talosctl failed')
      }),
    ).rejects.toThrow('talosctl failed')
    expect(leftovers(prefix)).toEqual([])
  })

  it('Given a process holding one is sent SIGTERM or SIGINT, Then the folder is gone and the process still dies of the signal', async () => {
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      const prefix = unique(signal.toLowerCase())
      const [cmd, ...args] = tsxCommand('temp-dir-script.ts', [prefix])
      const child = spawn(cmd!, args, {cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'inherit']})
      const dir = await new Promise<string>((resolve) => child.stdout.once('data', (b: Buffer) => resolve(b.toString().trim())))
      expect(existsSync(dir)).toBe(true)
      const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_code, sig) => resolve(sig)))
      child.kill(signal)
      expect(await exited).toBe(signal)
      expect(existsSync(dir), signal).toBe(false)
    }
  })

  it('Given one left by a SIGKILLed process, Then the next use of the prefix removes it, and leaves those of live processes', async () => {
    const prefix = unique('kill')
    const dead = spawnSync(process.execPath, ['-e', 'process.exit(0)']).pid!
    const stale = join(tmpdir(), `${prefix}${dead}-AbC123`)
    const live = join(tmpdir(), `${prefix}1-AbC123`) // pid 1 runs
    for (const d of [stale, live]) mkdirSync(d, {mode: 0o700})
    writeFileSync(join(stale, 'controlplane-patch.yaml'), 'x')
    await withPrivateTempDir(prefix, async () => undefined)
    expect(existsSync(stale)).toBe(false)
    expect(existsSync(live)).toBe(true)
    spawnSync('rm', ['-rf', live])
  })
})

describe('writePrivateFileFromStream', () => {
  it('Given the process exits just as the write starts (an interrupt as a backup begins), Then no temp file is left beside the path', () => {
    // The exit hook removes the temp files it knows; a file an asynchronous open created on a
    // worker thread after the hook ran stayed behind (backup.test.ts saw one after a SIGTERM).
    const dir = mkdtempSync(join(tmpdir(), unique('stream')))
    const leftBehind: string[] = []
    for (let i = 0; i < 12; i++) {
      const [cmd, ...args] = tsxCommand('stream-write-exit-script.ts', [join(dir, `b${i}.ichor-backup`)])
      const r = spawnSync(cmd!, args, {cwd: PROJECT_ROOT, encoding: 'utf8'})
      expect(r.status, r.stderr).toBe(130)
      leftBehind.push(...readdirSync(dir))
    }
    expect(leftBehind).toEqual([])
    spawnSync('rm', ['-rf', dir])
  }, 120_000)
})
