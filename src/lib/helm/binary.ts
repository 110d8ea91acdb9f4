// Locates the helm binary (ICHOR_HELM or `helm` on PATH) and checks its version once.
// Helm 3.18+ and Helm 4 are supported: --take-ownership patches adopted objects
// properly only from 3.18.
import {existsSync} from 'node:fs'
import {join} from 'node:path'
import {execa} from 'execa'
import {PACKAGE_ROOT} from '../assets/lock.js'
import {IchorError} from '../errors/errors.js'

export interface HelmBinary {
  path: string
  version: string
  major: number
  minor: number
}

export const MIN_HELM = {major: 3, minor: 18}

let detected: Promise<HelmBinary> | undefined

export function helmPath(): string {
  return process.env.ICHOR_HELM || 'helm'
}

/** The helm `npm run setup` unpacks into the project's .cache, used only when none is configured or on PATH. */
const SETUP_HELM = join(PACKAGE_ROOT, '.cache', 'bin', 'helm')

export function findHelm(): Promise<HelmBinary> {
  detected ??= detect(helmPath()).catch((error: unknown) => {
    if (!process.env.ICHOR_HELM && existsSync(SETUP_HELM)) return detect(SETUP_HELM)
    throw error
  })
  return detected
}

async function detect(path: string): Promise<HelmBinary> {
  let out: string
  try {
    const result = await execa(path, ['version', '--template', '{{.Version}}'], {timeout: 20_000})
    out = result.stdout.trim()
  } catch (error) {
    const code = (error as {code?: string}).code
    throw new IchorError(
      code === 'ENOENT'
        ? `helm not found (looked for "${path}")`
        : `cannot run helm at "${path}": ${(error as Error).message.split('\n')[0]}`,
      {hint: 'install Helm 3.18 or newer, or set ICHOR_HELM to its path'},
    )
  }
  const match = /^v?(\d+)\.(\d+)\.(\d+)/.exec(out)
  if (!match) throw new IchorError(`cannot read helm's version from "${out}" (${path})`)
  const major = Number(match[1])
  const minor = Number(match[2])
  if (major < MIN_HELM.major || (major === MIN_HELM.major && minor < MIN_HELM.minor)) {
    throw new IchorError(`helm ${out} at ${path} is too old: ichor needs Helm 3.18 or newer (Helm 4 works)`, {
      hint: 'older Helm 3 releases patch objects adopted with --take-ownership incorrectly',
    })
  }
  return {path, version: out, major, minor}
}
