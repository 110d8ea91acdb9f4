// A second, unprivileged Unix user (`nobody`, via setpriv) and a private mount namespace
// (via unshare) for the tests of files on the operator's machine: what another local user
// can read, and what a read-only or full file system does to a write. Both need root,
// which the test machine has; without it they fail loudly rather than skip.
import {spawnSync, type SpawnSyncReturns} from 'node:child_process'
import {join} from 'node:path'
import {PROJECT_ROOT} from './upstream.js'

export const NOBODY = {uid: 65534, gid: 65534}

/** Runs `cmd args` as the unprivileged user nobody. */
export function asNobody(cmd: string, args: string[]): SpawnSyncReturns<string> {
  const r = spawnSync('setpriv', [`--reuid=${NOBODY.uid}`, `--regid=${NOBODY.gid}`, '--clear-groups', cmd, ...args], {encoding: 'utf8'})
  if (r.error) throw r.error
  return r
}

/** Whether nobody can read the file (cat succeeds). */
export function nobodyCanRead(path: string): boolean {
  return asNobody('cat', [path]).status === 0
}

/** Whether nobody can list the folder. */
export function nobodyCanList(path: string): boolean {
  return asNobody('ls', [path]).status === 0
}

/** Runs a TypeScript file of test/support with node + tsx: `[node, --import, tsx, file, ...args]`. */
export function tsxCommand(script: string, args: string[]): string[] {
  return [process.execPath, '--import', 'tsx', join(PROJECT_ROOT, 'test', 'support', script), ...args]
}

/**
 * Runs `command` in a private mount namespace where `mountpoint` is a fresh tmpfs with
 * `options` (for example `ro` or `size=64k`); the host's mounts are not touched.
 */
export function withTmpfs(mountpoint: string, options: string, command: string[], input?: string): SpawnSyncReturns<string> {
  const r = spawnSync('unshare', ['-m', 'sh', '-c', 'mount -t tmpfs -o "$1" ichor-test "$2" && shift 2 && exec "$@"', 'sh', options, mountpoint, ...command], {
    encoding: 'utf8',
    cwd: PROJECT_ROOT,
    input,
  })
  if (r.error) throw r.error
  return r
}

/** Parses the one JSON line a support script prints. */
export function scriptResult<T>(r: SpawnSyncReturns<string>): T {
  const line = r.stdout.trim().split('\n').at(-1)
  if (!line) throw new Error(`the script printed nothing (exit ${r.status}): ${r.stderr}`)
  return JSON.parse(line) as T
}
