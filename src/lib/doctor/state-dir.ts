// The local state folder: where `ichor init` keeps the Talos secrets, talosconfig and
// kubeconfig until the cluster holds them. It must be writable and only its owner's (0700).
// Read-only: the folder is looked at, never created or fixed here (init does that).
import {accessSync, constants, readdirSync, statSync, type Stats} from 'node:fs'
import {dirname, join} from 'node:path'
import {stateRoot} from '../state/local.js'
import {fail, messageOf, ok, warn, type DoctorCheck} from './types.js'

const ID = 'state-dir'

/** `dir` is a --state-dir (one cluster's folder); without it the root of every cluster's folder. */
export function checkStateDir(dir?: string): DoctorCheck {
  const path = dir ?? stateRoot()
  const label = dir ? `--state-dir ${path}` : `state folder ${path}`
  try {
    return inspect(path, label, dir === undefined)
  } catch (error) {
    return fail(ID, `${label} cannot be read: ${messageOf(error)}`, 'pass --state-dir DIR of a folder you own')
  }
}

function inspect(path: string, label: string, isRoot: boolean): DoctorCheck {
  const st = statOrUndefined(path)
  if (st === undefined) {
    const parent = nearestExisting(dirname(path))
    if (!parent.isDirectory)
      return fail(ID, `${label} cannot be created: ${parent.path} is not a folder`, 'pass --state-dir DIR of a folder you own, or set XDG_STATE_HOME')
    if (!writable(parent.path))
      return fail(ID, `${label} cannot be created: ${parent.path} is not writable`, `make ${parent.path} writable, or pass --state-dir DIR`)
    return ok(ID, `${label} does not exist yet; \`ichor init\` creates it with permissions 0700`)
  }
  if (!st.isDirectory()) return fail(ID, `${label} exists and is not a folder`, 'remove it, or pass --state-dir DIR of another folder')
  const uid = process.getuid?.()
  if (uid !== undefined && st.uid !== uid)
    return fail(ID, `${label} is owned by uid ${st.uid}, not by this user (uid ${uid})`, 'pass --state-dir DIR of a folder of your own')
  if (!writable(path)) return fail(ID, `${label} is not writable`, `chmod 700 ${path}`)
  const mode = st.mode & 0o7777
  if ((mode & 0o1002) !== 0)
    return fail(
      ID,
      `${label} can be written by others (permissions ${octal(mode)}): what is in it cannot be trusted`,
      'pass --state-dir DIR of a folder of your own, or move the folder away and rerun `ichor init`',
    )
  const loose = [path, ...(isRoot ? clusterFolders(path) : [])].filter((p) => (modeOf(p) & 0o077) !== 0)
  if (loose.length > 0) {
    return warn(
      ID,
      `${loose.map((p) => `${p} (${octal(modeOf(p))})`).join(', ')}: others can read or enter`,
      `chmod 700 ${loose.join(' ')}  (ichor init also tightens it)`,
    )
  }
  return ok(ID, `${label} is writable, permissions ${octal(mode)}`)
}

function clusterFolders(root: string): string[] {
  try {
    return readdirSync(root, {withFileTypes: true})
      .filter((e) => e.isDirectory())
      .map((e) => join(root, e.name))
      .sort()
  } catch {
    return []
  }
}

function statOrUndefined(path: string): Stats | undefined {
  try {
    return statSync(path)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined // ENOTDIR: a file on the way, found below
    throw error
  }
}

function nearestExisting(path: string): {path: string; isDirectory: boolean} {
  for (let p = path; ; p = dirname(p)) {
    try {
      return {path: p, isDirectory: statSync(p).isDirectory()}
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if (code === 'ENOTDIR') return {path: p, isDirectory: false}
      if (dirname(p) === p) return {path: p, isDirectory: false}
    }
  }
}

function writable(path: string): boolean {
  try {
    accessSync(path, constants.W_OK | constants.X_OK)
    return true
  } catch {
    return false
  }
}

function modeOf(path: string): number {
  return statSync(path).mode & 0o7777
}

function octal(mode: number): string {
  return `0${(mode & 0o777).toString(8).padStart(3, '0')}`
}
