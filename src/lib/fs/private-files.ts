// Files on the operator's machine that may hold a secret: a folder only its owner can
// enter (0700), files only its owner can read (0600), whatever existed before, and
// writes that never leave a half-written file behind (a full disk once truncated a
// Talos secrets bundle that every later run reused).
import {randomBytes} from 'node:crypto'
import {
  chmodSync,
  closeSync,
  fsyncSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
  writeSync,
  type Stats,
} from 'node:fs'
import {open} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {basename, dirname, join} from 'node:path'
import {onExit} from 'signal-exit'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'

const PRIVATE_DIR_MODE = 0o700
const PRIVATE_FILE_MODE = 0o600

/** A mode ichor tightened, for the message that says so. */
export interface ModeFix {
  path: string
  was: number
  now: number
}

export function describeModeFix(fix: ModeFix): string {
  return `${fix.path}: permissions ${octal(fix.was)} → ${octal(fix.now)}`
}

/** A folder or file ichor cannot use as a private place: bad input, exit 2. */
export class PrivatePathError extends IchorError {
  constructor(
    readonly path: string,
    message: string,
    options: {label?: string; hint?: string; cause?: unknown} = {},
  ) {
    super(`${options.label ? `${options.label} ` : ''}${path}: ${message}`, {exitCode: EXIT.usage, hint: options.hint, cause: options.cause})
    this.name = 'PrivatePathError'
  }
}

export interface EnsurePrivateDirOptions {
  /** Names the source of the path in errors, e.g. `--state-dir`. */
  label?: string
  /** Create missing parent folders too (each 0700); otherwise a missing parent is an error. */
  createParents?: boolean
  /**
   * An existing folder that others can read or enter: 'fix' sets it to 0700 and reports
   * the change, 'refuse' throws naming the folder, 'keep' leaves it (a folder the user
   * chose for files that are private on their own). One that anyone can write in (or a
   * sticky one like /tmp) is always refused.
   */
  loose?: 'fix' | 'refuse' | 'keep'
}

/**
 * Makes `dir` a folder only this user can enter: created 0700 when missing, an existing
 * one checked (a folder, owned by this user, writable) and fixed or refused when others
 * could read it. Every failure is a PrivatePathError naming the folder (exit 2).
 */
export function ensurePrivateDir(dir: string, opts: EnsurePrivateDirOptions = {}): {created: boolean; fixed: ModeFix[]} {
  const label = opts.label
  const existing = statOrUndefined(dir, label)
  if (existing === undefined) {
    const parent = dirname(dir)
    if (!opts.createParents) {
      const p = statOrUndefined(parent, label)
      if (p === undefined) throw new PrivatePathError(dir, `its parent folder ${parent} does not exist; create it first or choose another folder`, {label})
      if (!p.isDirectory()) throw new PrivatePathError(dir, `its parent ${parent} is not a folder`, {label})
    }
    try {
      mkdirSync(dir, {recursive: opts.createParents ?? false, mode: PRIVATE_DIR_MODE})
      chmodSync(dir, PRIVATE_DIR_MODE) // the umask may have changed what mkdir set
    } catch (err) {
      throw new PrivatePathError(dir, `cannot create the folder: ${reasonOf(err)}`, {label, cause: err})
    }
    return {created: true, fixed: []}
  }
  if (!existing.isDirectory()) throw new PrivatePathError(dir, 'exists and is not a folder', {label})
  const uid = process.getuid?.()
  if (uid !== undefined && existing.uid !== uid) {
    throw new PrivatePathError(dir, `is owned by uid ${existing.uid}, not by this user (uid ${uid}); secrets are kept only in a folder of one's own`, {label})
  }
  const fixed: ModeFix[] = []
  const mode = existing.mode & 0o7777
  if ((mode & 0o1002) !== 0) {
    // Anyone could have put or replaced files in it: nothing in it can be trusted. (A
    // group-writable folder is tightened instead: with user private groups, umask 002 makes
    // every new folder so.)
    throw new PrivatePathError(
      dir,
      `others can write in this folder (permissions ${octal(mode)}), so they could have replaced what is in it; use a folder of its own`,
      {label},
    )
  }
  if ((mode & 0o077) !== 0 && opts.loose !== 'keep') {
    if (opts.loose === 'refuse') {
      throw new PrivatePathError(dir, `others can read or enter this folder (permissions ${octal(mode)}); use a folder of its own with permissions 0700`, {
        label,
      })
    }
    try {
      chmodSync(dir, PRIVATE_DIR_MODE)
    } catch (err) {
      throw new PrivatePathError(dir, `cannot restrict the folder to its owner: ${reasonOf(err)}`, {label, cause: err})
    }
    fixed.push({path: dir, was: mode, now: PRIVATE_DIR_MODE})
  }
  assertWritable(dir, label)
  return {created: false, fixed}
}

/**
 * Sets every listed file that exists to 0600 (talosctl writes its configs 0644) and
 * returns what it changed. A path that is not a regular file is an error naming it.
 */
export function securePrivateFiles(paths: readonly string[]): ModeFix[] {
  const fixed: ModeFix[] = []
  for (const path of paths) {
    let st: Stats
    try {
      st = lstatSync(path)
    } catch (err) {
      if (codeOf(err) === 'ENOENT') continue
      throw new PrivatePathError(path, `cannot read its permissions: ${reasonOf(err)}`, {cause: err})
    }
    if (!st.isFile()) throw new PrivatePathError(path, 'is not a regular file (a link or a folder where ichor keeps a private file)')
    const mode = st.mode & 0o7777
    if (mode === PRIVATE_FILE_MODE) continue
    try {
      chmodSync(path, PRIVATE_FILE_MODE)
    } catch (err) {
      throw new PrivatePathError(path, `cannot restrict the file to its owner: ${reasonOf(err)}`, {cause: err})
    }
    fixed.push({path, was: mode, now: PRIVATE_FILE_MODE})
  }
  return fixed
}

/**
 * Writes `content` to `path` so that a crash or a full disk leaves either the old file or
 * the new one, never a part: a 0600 temp file in the same folder, written and fsynced,
 * renamed over the target, then the folder fsynced so the rename itself survives a crash.
 */
export function writePrivateFileAtomic(path: string, content: string | Uint8Array): void {
  const dir = dirname(path)
  const tmp = join(dir, `.${basename(path)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`)
  const bytes = typeof content === 'string' ? Buffer.from(content, 'utf8') : content
  let fd: number | undefined
  try {
    fd = openSync(tmp, 'wx', PRIVATE_FILE_MODE)
    let written = 0
    while (written < bytes.length) written += writeSync(fd, bytes, written, bytes.length - written)
    fsyncSync(fd)
    closeSync(fd)
    fd = undefined
    chmodSync(tmp, PRIVATE_FILE_MODE) // the umask cannot loosen it, but a stricter one must not hide it from its owner
    renameSync(tmp, path)
  } catch (err) {
    if (fd !== undefined) closeSync(fd)
    rmSync(tmp, {force: true})
    const full = codeOf(err) === 'ENOSPC' || codeOf(err) === 'EDQUOT'
    throw new IchorError(`cannot write ${path}: ${full ? 'the disk is full' : reasonOf(err)}; the previous file, if any, is unchanged`, {cause: err})
  }
  fsyncDir(dir)
}

/**
 * writePrivateFileAtomic for content too large to hold in memory (a backup): streamed into the
 * same kind of 0600 temp file beside `path`, fsynced, renamed over it. The temp file is removed
 * on every way out of the process (signal-exit); one a SIGKILL left is removed by the next write
 * of the same path (its name carries the dead pid). Resolves to the bytes written.
 */
export async function writePrivateFileFromStream(path: string, source: AsyncIterable<Uint8Array>): Promise<number> {
  const dir = dirname(path)
  sweepDeadTempFiles(dir, basename(path))
  const tmp = join(dir, `.${basename(path)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`)
  liveTempFiles.add(tmp)
  installExitHook()
  let written = 0
  try {
    // Created synchronously: an asynchronous open runs on a worker thread, so a SIGTERM handled
    // meanwhile removed nothing and the file appeared after the exit hook had run. Opened again
    // without O_CREAT, so a removal by the exit hook is never undone.
    closeSync(openSync(tmp, 'wx', PRIVATE_FILE_MODE))
    const file = await open(tmp, 'r+')
    try {
      for await (const chunk of source) {
        await file.write(chunk)
        written += chunk.byteLength
      }
      await file.sync()
    } finally {
      await file.close()
    }
    chmodSync(tmp, PRIVATE_FILE_MODE)
    renameSync(tmp, path)
  } catch (err) {
    rmSync(tmp, {force: true})
    if (err instanceof IchorError) throw err
    const full = codeOf(err) === 'ENOSPC' || codeOf(err) === 'EDQUOT'
    throw new IchorError(`cannot write ${path}: ${full ? 'the disk is full' : reasonOf(err)}; the previous file, if any, is unchanged`, {cause: err})
  } finally {
    liveTempFiles.delete(tmp)
  }
  fsyncDir(dir)
  return written
}

/** Temp files of writes to `name` in `dir` (`.<name>.<pid>.<hex>.tmp`) whose process no longer runs. */
function sweepDeadTempFiles(dir: string, name: string): void {
  let names: string[]
  try {
    names = readdirSync(dir)
  } catch {
    return
  }
  const pattern = new RegExp(`^\\.${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\.(\\d+)\\.[0-9a-f]{8}\\.tmp$`)
  for (const entry of names) {
    const pid = Number(pattern.exec(entry)?.[1] ?? Number.NaN)
    if (!Number.isSafeInteger(pid) || pid === process.pid || isAlive(pid)) continue
    rmSync(join(dir, entry), {force: true})
  }
}

export type PrivateFileRead = {status: 'absent'; path: string} | {status: 'corrupt'; path: string; reason: string} | {status: 'ok'; path: string; text: string}

/**
 * Reads a text file and runs `check` on it (it returns why the content is unusable, or
 * undefined). An empty file is corrupt; a missing one is absent; any other read error
 * (permissions, a folder) is thrown, naming the file.
 */
export function readCheckedFile(path: string, check: (text: string) => string | undefined): PrivateFileRead {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    if (codeOf(err) === 'ENOENT') return {status: 'absent', path}
    throw new IchorError(`cannot read ${path}: ${reasonOf(err)}`, {cause: err})
  }
  if (text.trim() === '') return {status: 'corrupt', path, reason: 'the file is empty'}
  let reason: string | undefined
  try {
    reason = check(text)
  } catch (err) {
    reason = err instanceof Error ? err.message : String(err)
  }
  return reason === undefined ? {status: 'ok', path, text} : {status: 'corrupt', path, reason}
}

const liveTempDirs = new Set<string>()
const liveTempFiles = new Set<string>()
let exitHookInstalled = false
const swept = new Set<string>()

function installExitHook(): void {
  if (exitHookInstalled) return
  exitHookInstalled = true
  onExit(() => {
    for (const d of liveTempDirs) rmSync(d, {recursive: true, force: true})
    for (const f of liveTempFiles) rmSync(f, {force: true})
  })
}

/**
 * A fresh 0700 folder under the system temp dir, removed by `remove()` and on every way out
 * of the process: exit, SIGINT/SIGTERM/SIGHUP (signal-exit re-raises the signal when nothing
 * else handles it). A SIGKILL cannot be caught: the folder's name carries the pid, and the
 * next folder with the same prefix removes those of dead pids.
 */
export function openPrivateTempDir(prefix: string): {dir: string; remove(): void} {
  sweepDeadTempDirs(prefix)
  const dir = mkdtempSync(join(tmpdir(), `${prefix}${process.pid}-`))
  liveTempDirs.add(dir)
  installExitHook()
  return {
    dir,
    remove() {
      liveTempDirs.delete(dir)
      rmSync(dir, {recursive: true, force: true})
    },
  }
}

/** Runs `fn` with a folder from openPrivateTempDir, removed however `fn` ends. */
export async function withPrivateTempDir<T>(prefix: string, fn: (dir: string) => Promise<T>): Promise<T> {
  const temp = openPrivateTempDir(prefix)
  try {
    return await fn(temp.dir)
  } finally {
    temp.remove()
  }
}

/** Removes `<prefix><pid>-*` folders of this user whose process no longer runs. */
function sweepDeadTempDirs(prefix: string): void {
  if (swept.has(prefix)) return
  swept.add(prefix)
  const base = tmpdir()
  let names: string[]
  try {
    names = readdirSync(base)
  } catch {
    return
  }
  const pattern = new RegExp(`^${prefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(\\d+)-[A-Za-z0-9]{6}$`)
  for (const name of names) {
    const pid = Number(pattern.exec(name)?.[1] ?? Number.NaN)
    if (!Number.isSafeInteger(pid) || pid === process.pid || isAlive(pid)) continue
    const path = join(base, name)
    try {
      const st = lstatSync(path)
      if (st.isDirectory() && st.uid === process.getuid?.()) rmSync(path, {recursive: true, force: true})
    } catch {
      // gone already, or not ours to remove
    }
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return codeOf(err) === 'EPERM' // alive, another user's
  }
}

function fsyncDir(dir: string): void {
  let fd: number | undefined
  try {
    fd = openSync(dir, 'r')
    fsyncSync(fd)
  } catch {
    // some file systems refuse fsync on a folder; the file itself is already on disk
  } finally {
    if (fd !== undefined) closeSync(fd)
  }
}

function statOrUndefined(path: string, label?: string): Stats | undefined {
  try {
    return statSync(path)
  } catch (err) {
    if (codeOf(err) === 'ENOENT') return undefined
    throw new PrivatePathError(path, `cannot be read: ${reasonOf(err)}`, {label, cause: err})
  }
}

/** A probe file, because access(W_OK) says nothing about a read-only mount for root. */
function assertWritable(dir: string, label?: string): void {
  const probe = join(dir, `.ichor-write-test.${process.pid}.${randomBytes(4).toString('hex')}`)
  try {
    closeSync(openSync(probe, 'wx', PRIVATE_FILE_MODE))
    unlinkSync(probe)
  } catch (err) {
    throw new PrivatePathError(dir, `cannot write in this folder: ${reasonOf(err)}`, {label, cause: err})
  }
}

function codeOf(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code
}

const REASONS: Record<string, string> = {
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EROFS: 'the file system is read-only',
  ENOENT: 'a folder on the way does not exist',
  ENOTDIR: 'a part of the path is a file, not a folder',
  ENOSPC: 'the disk is full',
  EDQUOT: 'the disk quota is exhausted',
  EEXIST: 'it already exists',
  EISDIR: 'it is a folder',
}

function reasonOf(err: unknown): string {
  const code = codeOf(err)
  if (code && REASONS[code]) return `${REASONS[code]} (${code})`
  return err instanceof Error ? err.message : String(err)
}

function octal(mode: number): string {
  return `0${(mode & 0o7777).toString(8).padStart(3, '0')}`
}
