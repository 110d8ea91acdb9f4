// `ichor doctor`: everything a command needs on this machine, checked read-only and at
// once, each with its verdict and the one line that fixes it.
import {requireSupportedTalosVersion} from '../talos/versions.js'
import {checkAssets, type AssetOverrides} from './assets.js'
import {checkHelm, checkTalosctl} from './binaries.js'
import {checkKube} from './kube.js'
import {checkStateDir} from './state-dir.js'
import {checkTalosconfigExpiry} from './talosconfig.js'
import {testedArtifacts} from './tested.js'
import type {DoctorCheck, DoctorReport} from './types.js'

export interface DoctorOptions {
  /** The Talos version targeted (--talos-version); talosctl is compared with it. */
  talosVersion: string
  kubeconfig?: string
  context?: string
  stateDir?: string
  assets: AssetOverrides
}

export async function runDoctor(options: DoctorOptions): Promise<DoctorReport> {
  const target = requireSupportedTalosVersion(options.talosVersion) // bad input: exit 2 before any check
  // The cluster is checked only when the user named one: a laptop with an unrelated
  // ~/.kube/config is not a problem of ichor's.
  const kubeGiven = options.kubeconfig !== undefined || options.context !== undefined || Boolean(process.env.KUBECONFIG)
  const [talosctl, helm, kube] = await Promise.all([
    checkTalosctl(target),
    checkHelm(),
    kubeGiven ? checkKube({kubeconfig: options.kubeconfig, context: options.context}) : Promise.resolve([]),
  ])
  const checks: DoctorCheck[] = [
    talosctl,
    helm,
    ...kube,
    ...checkAssets(options.assets),
    checkStateDir(options.stateDir),
    ...checkTalosconfigExpiry(options.stateDir),
  ]
  return {
    ok: checks.every((c) => c.status !== 'fail'),
    checks,
    skipped: kubeGiven ? [] : ['kubeconfig, kube-api: no cluster named (pass --kubeconfig FILE or --context NAME, or set KUBECONFIG)'],
    tested: testedArtifacts(),
  }
}
