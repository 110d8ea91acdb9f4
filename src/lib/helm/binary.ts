// Locates the helm binary and checks its version once. Helm 3.18+ and Helm 4.0.1+ are
// supported: --take-ownership patches adopted objects properly only from 3.18, and Helm
// 4.0.0 cannot take ownership with server-side apply (helm/helm#31510, fixed in 4.0.1).
// The binary is resolved on disk first (ICHOR_HELM, then `helm` on PATH, then the helm
// `npm run setup` unpacks into .cache/bin): absence never shows up as a failed spawn.
import {join} from 'node:path'
import {PACKAGE_ROOT} from '../assets/lock.js'
import {IchorError} from '../errors/errors.js'
import {resolveBinary} from '../exec/resolve.js'
import {runProcess, startError} from '../exec/run.js'
import {helmEnv} from './env.js'

export interface HelmBinary {
  /** Absolute path. */
  path: string
  version: string
  major: number
  minor: number
}

export const MIN_HELM = {major: 3, minor: 18}

const HINT = 'install Helm 3.18 or newer (Helm 4: 4.0.1 or newer), or set ICHOR_HELM to its path'

/** Why ichor cannot run this helm version, with the version it needs; undefined when it can. */
export function helmVersionProblem(version: {major: number; minor: number; patch: number}): {needed: string; why: string} | undefined {
  const {major, minor, patch} = version
  if (major < MIN_HELM.major || (major === MIN_HELM.major && minor < MIN_HELM.minor)) {
    return {needed: 'Helm 3.18 or newer', why: 'older Helm 3 releases patch objects adopted with --take-ownership incorrectly'}
  }
  if (major === 4 && minor === 0 && patch === 0) {
    return {needed: 'Helm 4.0.1 or newer (or 3.18+)', why: 'Helm 4.0.0 cannot take ownership of objects with server-side apply (helm/helm#31510, fixed in 4.0.1)'}
  }
  return undefined
}

let detected: {key: string; promise: Promise<HelmBinary>} | undefined

/** The absolute path of the helm ichor runs; throws when there is none. */
export function helmPath(): string {
  return resolveBinary({name: 'helm', envVar: 'ICHOR_HELM', fallbacks: [join(PACKAGE_ROOT, '.cache', 'bin', 'helm')], hint: HINT})
}

/** The resolved helm and its version, checked once per process (per resolved path). */
export function findHelm(): Promise<HelmBinary> {
  let path: string
  try {
    path = helmPath()
  } catch (error) {
    return Promise.reject(error)
  }
  if (detected?.key !== path) {
    const promise = detect(path)
    detected = {key: path, promise}
    promise.catch(() => {
      if (detected?.promise === promise) detected = undefined // a later call retries after a fix
    })
  }
  return detected.promise
}

async function detect(path: string): Promise<HelmBinary> {
  let result
  try {
    result = await runProcess(path, ['version', '--template', '{{.Version}}'], {timeoutMs: 20_000, env: helmEnv()})
  } catch (error) {
    throw startError('helm', path, error, HINT)
  }
  const out = result.stdout.trim()
  if (result.exitCode !== 0) {
    const why = result.timedOut ? 'no answer within 20s' : (result.stderr || result.stdout).trim().split('\n')[0]
    throw new IchorError(`cannot run helm at "${path}": ${why}`, {hint: HINT})
  }
  const match = /^v?(\d+)\.(\d+)\.(\d+)/.exec(out)
  if (!match) throw new IchorError(`cannot read helm's version from "${out}" (${path})`)
  const major = Number(match[1])
  const minor = Number(match[2])
  const problem = helmVersionProblem({major, minor, patch: Number(match[3])})
  if (problem) throw new IchorError(`helm ${out} at ${path} cannot be used: ichor needs ${problem.needed}`, {hint: problem.why})
  return {path, version: out, major, minor}
}
