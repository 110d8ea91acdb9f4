// One `ichor init` at a time per state folder on this machine. The Lease guards the cluster,
// but before the cluster exists two runs with the same folder would both generate and write
// the Talos secrets. The lock is a file created with O_EXCL holding the owner's pid; a lock
// whose process is gone (SIGKILL, power loss) is stale and taken over.
import {closeSync, openSync, readFileSync, rmSync, writeSync} from 'node:fs'
import {hostname} from 'node:os'
import {join} from 'node:path'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'

export const STATE_LOCK_FILE = 'ichor.lock'

export interface StateLock {
  path: string
  release(): void
}

interface Holder {
  pid: number
  host: string
  command: string
  since: string
}

export function lockStateDir(dir: string, command: string): StateLock {
  const path = join(dir, STATE_LOCK_FILE)
  const me: Holder = {pid: process.pid, host: hostname(), command, since: new Date().toISOString()}
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, 'wx', 0o600)
      try {
        writeSync(fd, `${JSON.stringify(me)}\n`)
      } finally {
        closeSync(fd)
      }
      return {path, release: () => releaseIfOurs(path)}
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
    }
    const holder = readHolder(path)
    if (holder && isAlive(holder)) {
      throw new IchorError(`another ichor ${holder.command} (pid ${holder.pid}, since ${holder.since}) is using the state folder ${dir}`, {
        exitCode: EXIT.lease,
        hint: `wait for it to finish; if no such process runs, delete ${path}`,
      })
    }
    rmSync(path, {force: true}) // stale: its process is gone
  }
  throw new IchorError(`could not lock the state folder ${dir}: ${path} keeps coming back`, {
    exitCode: EXIT.lease,
    hint: 'another ichor run is starting on this folder; try again',
  })
}

function readHolder(path: string): Holder | undefined {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as Holder
  } catch {
    return undefined // cut short while written: treated as stale
  }
}

/** Another host's pid cannot be checked: a folder shared over the network stays locked until removed by hand. */
function isAlive(h: Holder): boolean {
  if (h.host !== hostname()) return true
  try {
    process.kill(h.pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

function releaseIfOurs(path: string): void {
  if (readHolder(path)?.pid === process.pid) rmSync(path, {force: true})
}
