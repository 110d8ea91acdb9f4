// Finding an external binary on disk before anything is spawned. A binary that is absent
// is reported from the file system, never learnt from a spawn that failed with ENOENT:
// such a ChildProcess has no pid yet holds a native handle until the next tick, and a
// kill() in that window signals whatever pid the handle's uninitialised memory holds
// (pid 0 = the caller's whole process group). See src/lib/exec/README.md.
import {accessSync, constants, statSync} from 'node:fs'
import {delimiter, isAbsolute, join, resolve, sep} from 'node:path'
import {IchorError} from '../errors/errors.js'

/** True for a regular file this process may execute. */
export function isExecutableFile(path: string): boolean {
  try {
    if (!statSync(path).isFile()) return false
    accessSync(path, constants.X_OK)
    return true
  } catch {
    return false
  }
}

export type Lookup = {found: true; path: string} | {found: false; reason: 'not-found' | 'not-executable' | 'relative-to-cwd'; path?: string}

/**
 * Looks a command up as Go's os/exec.LookPath does (what kubectl uses for exec credential
 * plugins): a name holding a path separator is used as given (made absolute against the
 * working directory); a bare name is searched in each PATH entry, an empty entry meaning
 * the working directory; a match found through a relative PATH entry is refused, as Go
 * 1.19+ refuses it (exec.ErrDot), so a file dropped into the working directory never runs.
 */
export function lookPath(command: string, pathEnv: string | undefined = process.env.PATH, cwd = process.cwd()): Lookup {
  if (command === '') return {found: false, reason: 'not-found'}
  if (command.includes(sep)) {
    const path = resolve(cwd, command)
    if (isExecutableFile(path)) return {found: true, path}
    return {found: false, reason: exists(path) ? 'not-executable' : 'not-found', path}
  }
  let notExecutable: string | undefined
  for (const entry of (pathEnv ?? '').split(delimiter)) {
    const dir = entry === '' ? '.' : entry
    const candidate = join(dir, command)
    if (isExecutableFile(resolve(cwd, candidate))) {
      if (!isAbsolute(dir)) return {found: false, reason: 'relative-to-cwd', path: candidate}
      return {found: true, path: candidate}
    }
    if (!notExecutable && exists(resolve(cwd, candidate))) notExecutable = candidate
  }
  return notExecutable ? {found: false, reason: 'not-executable', path: notExecutable} : {found: false, reason: 'not-found'}
}

function exists(path: string): boolean {
  try {
    statSync(path)
    return true
  } catch {
    return false
  }
}

export interface BinarySpec {
  /** What the binary is, for messages: "helm", "talosctl". */
  name: string
  /** The environment variable that names it (ICHOR_HELM); wins over PATH. */
  envVar: string
  /** Absolute paths tried, in order, when the variable is unset and PATH has none. */
  fallbacks?: string[]
  /** What to tell the user when none is found. */
  hint: string
}

/**
 * The absolute path of a configured binary: the environment variable's value (a path, or
 * a name looked up on PATH), else the name on PATH, else the fallbacks. Throws a clear
 * error naming every place looked at.
 */
export function resolveBinary(spec: BinarySpec, env: NodeJS.ProcessEnv = process.env): string {
  const configured = env[spec.envVar]
  if (configured) {
    const hit = lookPath(configured, env.PATH)
    if (hit.found) return hit.path
    throw new IchorError(`${spec.name} not found: ${spec.envVar}=${configured} ${describeMiss(hit)}`, {hint: spec.hint})
  }
  const hit = lookPath(spec.name, env.PATH)
  if (hit.found) return hit.path
  for (const fallback of spec.fallbacks ?? []) if (isExecutableFile(fallback)) return fallback
  throw new IchorError(`${spec.name} not found: ${describeMiss(hit)}, and ${spec.envVar} is not set`, {hint: spec.hint})
}

export function describeMiss(miss: Extract<Lookup, {found: false}>): string {
  switch (miss.reason) {
    case 'not-executable':
      return `(${miss.path} is not an executable file)`
    case 'relative-to-cwd':
      return `(found only as ${miss.path}, relative to the working directory, which is refused)`
    default:
      return miss.path ? `(${miss.path} does not exist)` : '(not on PATH)'
  }
}

/**
 * A check of a resolved binary (does it run, which version), made once per process for each
 * path it resolves to: a changed ICHOR_HELM or PATH is checked again, and a failed check (or
 * one `forget` drops, when the binary later failed to start) is made again by the next call.
 */
export function checkedOncePerPath<T>(resolvePath: () => string, check: (path: string) => Promise<T>): {get(): Promise<T>; forget(path: string): void} {
  let checked: {path: string; promise: Promise<T>} | undefined
  const forget = (path: string, promise?: Promise<T>) => {
    if (checked?.path === path && (!promise || checked.promise === promise)) checked = undefined
  }
  return {
    get() {
      let path: string
      try {
        path = resolvePath()
      } catch (error) {
        return Promise.reject(error)
      }
      if (checked?.path !== path) {
        const promise = check(path)
        checked = {path, promise}
        promise.catch(() => forget(path, promise))
      }
      return checked.promise
    },
    forget: (path) => forget(path),
  }
}
