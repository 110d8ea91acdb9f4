// The local lock on a state folder: one `ichor init` per folder on this machine (issue 12 point 11).
import {spawnSync} from 'node:child_process'
import {existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {hostname, tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterEach, beforeEach, describe, expect, it} from 'vitest'
import {IchorError} from '../../src/lib/errors/errors.js'
import {lockStateDir, STATE_LOCK_FILE} from '../../src/lib/state/lock.js'

describe('lockStateDir', () => {
  let dir: string
  beforeEach(() => void (dir = mkdtempSync(join(tmpdir(), 'ichor-lock-'))))
  afterEach(() => rmSync(dir, {recursive: true, force: true}))

  it('given a folder locked by a live process, a second lock is refused with exit 3 naming the holder; after release it is free', () => {
    const first = lockStateDir(dir, 'init')
    let error: unknown
    try {
      lockStateDir(dir, 'init')
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(IchorError)
    expect((error as IchorError).exitCode).toBe(3)
    expect((error as IchorError).message).toMatch(new RegExp(`another ichor init \\(pid ${process.pid}, since .*\\) is using the state folder ${dir}`))
    expect((error as IchorError).hint).toContain(join(dir, STATE_LOCK_FILE))
    first.release()
    expect(existsSync(join(dir, STATE_LOCK_FILE))).toBe(false)
    lockStateDir(dir, 'init').release()
  })

  it('given a lock left by a process that is gone (SIGKILL), the next run takes it over', () => {
    const gone = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString()
    writeFileSync(join(dir, STATE_LOCK_FILE), JSON.stringify({pid: Number(gone), host: hostname(), command: 'init', since: 'earlier'}))
    const lock = lockStateDir(dir, 'init')
    expect(JSON.parse(readFileSync(join(dir, STATE_LOCK_FILE), 'utf8')).pid).toBe(process.pid)
    lock.release()
  })

  it('given a lock file cut short while written, it is stale', () => {
    writeFileSync(join(dir, STATE_LOCK_FILE), '{"pid": 12')
    const lock = lockStateDir(dir, 'init')
    expect(JSON.parse(readFileSync(join(dir, STATE_LOCK_FILE), 'utf8')).pid).toBe(process.pid)
    lock.release()
  })
})
