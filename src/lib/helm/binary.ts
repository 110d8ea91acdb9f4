// Locates the helm binary and checks its version once. Helm 3.18+ and Helm 4 are
// supported: --take-ownership patches adopted objects properly only from 3.18.
// The binary is resolved on disk first (ICHOR_HELM, then `helm` on PATH): absence never
// shows up as a failed spawn.
import {IchorError} from '../errors/errors.js'
import {checkedOncePerPath, resolveBinary} from '../exec/resolve.js'
import {runProcess, startError} from '../exec/run.js'
import {helmEnv} from './env.js'

export interface HelmBinary {
  /** Absolute path. */
  path: string
  version: string
  major: number
  minor: number
}

const MIN_HELM = {major: 3, minor: 18}

const HINT = 'install Helm 3.18 or newer (or 4.0.1 or newer), or set ICHOR_HELM to its path'

/** MAJOR.MINOR.PATCH of `helm version --template {{.Version}}` (v4.1.4, v3.18.0-rc.1), or undefined. */
export function parseHelmVersion(text: string): {major: number; minor: number; patch: number} | undefined {
  const match = /^v?(\d+)\.(\d+)\.(\d+)/.exec(text.trim())
  return match ? {major: Number(match[1]), minor: Number(match[2]), patch: Number(match[3])} : undefined
}

/**
 * Why this helm cannot adopt the bootstrapped Cilium objects, or undefined when it can:
 * older Helm 3 patches objects adopted with --take-ownership incorrectly (fixed in 3.18),
 * and Helm 4.0.0 refuses the server-side take-over with "metadata.managedFields must be
 * nil" (helm/helm#31510, fixed in 4.0.1).
 */
export function helmVersionProblem(v: {major: number; minor: number; patch: number}): {message: string; hint: string} | undefined {
  if (v.major < MIN_HELM.major || (v.major === MIN_HELM.major && v.minor < MIN_HELM.minor)) {
    return {
      message: 'is too old: ichor needs Helm 3.18 or newer (Helm 4.0.1 or newer works)',
      hint: 'older Helm 3 releases patch objects adopted with --take-ownership incorrectly',
    }
  }
  if (v.major === 4 && v.minor === 0 && v.patch === 0) {
    return {message: 'cannot adopt objects: Helm 4.0.0 fails the server-side --take-ownership (helm/helm#31510); use Helm 4.0.1 or newer, or 3.18+', hint: HINT}
  }
  return undefined
}

/** The absolute path of the helm ichor runs; throws when there is none. */
export function helmPath(): string {
  return resolveBinary({name: 'helm', envVar: 'ICHOR_HELM', hint: HINT})
}

/** The resolved helm and its version, checked once per process (per resolved path). */
export const findHelm: () => Promise<HelmBinary> = checkedOncePerPath(helmPath, detect).get

async function detect(path: string): Promise<HelmBinary> {
  const out = await helmVersionOf(path)
  const parsed = parseHelmVersion(out)
  if (!parsed) throw new IchorError(`cannot read helm's version from "${out}" (${path})`)
  const problem = helmVersionProblem(parsed)
  if (problem) throw new IchorError(`helm ${out} at ${path} ${problem.message}`, {hint: problem.hint})
  const {major, minor} = parsed
  return {path, version: out, major, minor}
}

/** What `helm version --template {{.Version}}` prints; an IchorError when helm does not run. */
export async function helmVersionOf(path: string): Promise<string> {
  let result
  try {
    result = await runProcess(path, ['version', '--template', '{{.Version}}'], {timeoutMs: 20_000, env: helmEnv()})
  } catch (error) {
    throw startError('helm', path, error, HINT)
  }
  if (result.exitCode !== 0 || result.timedOut) {
    const why = result.timedOut ? 'no answer within 20s' : (result.stderr || result.stdout).trim().split('\n')[0]
    throw new IchorError(`cannot run helm at "${path}": ${why}`, {hint: HINT})
  }
  return result.stdout.trim()
}
