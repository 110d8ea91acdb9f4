// The real upstream artifacts live in ../shared/upstream beside the project (never copied in).
// ICHOR_UPSTREAM overrides the folder. A missing folder fails the tests that use it, loudly.
import {existsSync} from 'node:fs'
import {join, resolve} from 'node:path'
import {fileURLToPath} from 'node:url'
import {pinnedAssets} from '../../src/lib/assets/lock.js'

const root = resolve(fileURLToPath(new URL('../..', import.meta.url)))
const dir = process.env.ICHOR_UPSTREAM ?? resolve(root, '..', 'shared', 'upstream')

if (!existsSync(join(dir, 'SHA256SUMS'))) {
  throw new Error(`upstream artifacts not found at ${dir}: tests need ../shared/upstream (or ICHOR_UPSTREAM)`)
}

export const UPSTREAM = {
  dir,
  /** Cilium 1.18.0: the chart the day-2 tests' clusters start from (upgrades go on from it). */
  ciliumChart: join(dir, 'charts', 'cilium-1.18.0.tgz'),
  /** The mirror's copy of the pinned Cilium chart: what a default init installs. */
  pinnedCiliumChart: join(dir, pinnedAssets().cilium.file),
  cilium11812Chart: join(dir, 'charts', 'cilium-1.18.12.tgz'),
  cilium119Chart: join(dir, 'charts', 'cilium-1.19.6.tgz'),
  cilium120Chart: join(dir, 'charts', 'cilium-1.20.0.tgz'),
  argocdChart: join(dir, 'charts', 'argo-cd-10.1.1.tgz'),
  kokumiManifest: join(dir, 'kokumi-0.14.0', 'install.yaml'),
  kokumiCrdDir: join(dir, 'kokumi-0.14.0', 'crd'),
}
export const PROJECT_ROOT = root
