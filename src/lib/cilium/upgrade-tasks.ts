// Steps of `ichor cni upgrade` beyond a values change: the version policy, and Cilium's
// pre-flight check (its upgrade guide): a separate release `cilium-preflight` whose
// DaemonSet pulls the new image on every node, checked ready against cilium's own
// DaemonSet, then removed. Once the release runs the target, the pre-flight is not needed.
import {CILIUM_RELEASE} from '../constants.js'
import {readCiliumRelease} from './reads.js'
import {readWorkloadRollout} from '../kube/reads.js'
import {settlePendingRelease} from '../helm/pending.js'
import {helmInstall, helmUninstall, helmUpgrade} from '../helm/release.js'
import {readReleaseRecord, valuesHash} from '../helm/release-record.js'
import type {Kube} from '../kube/client.js'
import {waitFor, type Observation} from '../kube/wait.js'
import type {Session} from '../session/session.js'
import {holds, missing} from '../tasks/probe.js'
import type {Later, Task} from '../tasks/types.js'
import type {CiliumUpgradeChange} from './upgrade.js'

const PREFLIGHT_RELEASE = {name: 'cilium-preflight', namespace: CILIUM_RELEASE.namespace}
/** The name the chart gives the pre-flight DaemonSet and Deployment. */
const PREFLIGHT_WORKLOAD = 'cilium-pre-flight-check'

/** Cilium's upgrade guide: never down, one minor at a time; warns when the installed patch is not the newest known. */
export function checkUpgradeTask(p: {change: Later<CiliumUpgradeChange>}): Task {
  return {
    id: 'check-upgrade',
    title: "Check the version step against Cilium's upgrade guide (no downgrade, one minor at a time)",
    mutating: false,
    check: true,
    async probe() {
      const {plan} = await p.change()
      const what =
        plan.verdict.kind === 'same' ? `the release already runs ${plan.installed}` : `${plan.installed} → ${plan.target.chart.version} (${plan.verdict.kind})`
      return holds([what, ...plan.warnings.map((w) => `warning: ${w}`)].join('; '))
    },
    async run() {},
  }
}

/** True when the cilium release already runs the target chart with the target values: the upgrade is done. */
async function upgradeDone(kube: Kube, c: CiliumUpgradeChange): Promise<boolean> {
  const r = await readCiliumRelease(kube)
  return r?.status === 'deployed' && r.chartVersion === c.chartVersion && valuesHash(r.config) === c.hash
}

export function installPreflightTask(p: {session: Session; change: Later<CiliumUpgradeChange>; timeoutMs: number}): Task {
  const {name, namespace} = PREFLIGHT_RELEASE
  return {
    id: 'preflight-install',
    title: `Install the pre-flight check of the new Cilium as release ${namespace}/${name}`,
    async probe() {
      const kube = await p.session.kube()
      const c = await p.change()
      if (await upgradeDone(kube, c)) return holds(`the release already runs Cilium ${c.chartVersion}: no pre-flight check needed`)
      const r = await readReleaseRecord(kube, name, namespace)
      if (r?.status === 'deployed' && r.chartVersion === c.chartVersion && valuesHash(r.config) === valuesHash(c.preflightValues))
        return holds(`release ${name} revision ${r.revision} (chart ${r.chartVersion})`)
      return missing(r ? `release ${name} is ${r.status} with chart ${r.chartVersion}` : `no release ${name}`)
    },
    async run(progress) {
      const kube = await p.session.kube()
      const c = await p.change()
      // A run killed inside helm leaves a pending record: drop it (its objects carry this release's name, so helm takes them again).
      const left = await settlePendingRelease(kube, name, namespace, {progress})
      const opts = {
        ...(await p.session.helmTarget()),
        release: name,
        namespace,
        chartPath: c.chartPath,
        values: c.preflightValues,
        wait: false,
        timeoutSeconds: Math.ceil(p.timeoutMs / 1000),
      }
      if (left) await helmUpgrade({...opts, rollbackOnFailure: false})
      else await helmInstall(opts)
    },
  }
}

/** The guide's check: the pre-flight DaemonSet's ready count equals cilium's, and the pre-flight Deployment is ready. */
async function observePreflight(kube: Kube): Promise<Observation> {
  const ns = PREFLIGHT_RELEASE.namespace
  const [pre, cilium, deploy] = await Promise.all([
    readWorkloadRollout(kube, 'DaemonSet', ns, PREFLIGHT_WORKLOAD),
    readWorkloadRollout(kube, 'DaemonSet', ns, 'cilium'),
    readWorkloadRollout(kube, 'Deployment', ns, PREFLIGHT_WORKLOAD),
  ])
  if (!pre || !deploy) return {done: false, state: `the pre-flight ${pre ? 'Deployment' : 'DaemonSet'} ${ns}/${PREFLIGHT_WORKLOAD} does not exist`}
  const state = `pre-flight DaemonSet ${pre.ready} ready (cilium ${cilium?.ready ?? 0}); pre-flight Deployment ${deploy.ready}/${deploy.desired} ready`
  const done = pre.rolledOut && pre.ready > 0 && pre.ready === (cilium?.ready ?? -1) && deploy.rolledOut
  return {done, state}
}

export function waitPreflightTask(p: {session: Session; change: Later<CiliumUpgradeChange>; timeoutMs: number}): Task {
  return {
    id: 'preflight-wait',
    title: "Wait until the pre-flight DaemonSet is ready on as many nodes as cilium's, and the pre-flight Deployment is ready",
    mutating: false,
    hint: `see why the pre-flight pods are not ready: kubectl -n ${PREFLIGHT_RELEASE.namespace} get pods -l k8s-app=${PREFLIGHT_WORKLOAD}; the running Cilium was not changed`,
    async probe() {
      const kube = await p.session.kube()
      const c = await p.change()
      if (await upgradeDone(kube, c)) return holds(`the release already runs Cilium ${c.chartVersion}`)
      const o = await observePreflight(kube)
      return o.done ? holds(o.state) : missing(o.state)
    },
    async run(progress) {
      const kube = await p.session.kube()
      await waitFor('the Cilium pre-flight check', () => observePreflight(kube), {timeoutMs: p.timeoutMs, onProgress: progress})
    },
  }
}

export function removePreflightTask(p: {session: Session; timeoutMs: number}): Task {
  const {name, namespace} = PREFLIGHT_RELEASE
  return {
    id: 'preflight-remove',
    title: `Remove the pre-flight release ${namespace}/${name}`,
    async probe() {
      const kube = await p.session.kube()
      const [r, ds] = await Promise.all([readReleaseRecord(kube, name, namespace), readWorkloadRollout(kube, 'DaemonSet', namespace, PREFLIGHT_WORKLOAD)])
      if (r) return missing(`release ${name} revision ${r.revision} is ${r.status}`)
      return ds ? missing(`the DaemonSet ${namespace}/${PREFLIGHT_WORKLOAD} is still there`) : holds(`no release ${name}`)
    },
    async run() {
      await helmUninstall({...(await p.session.helmTarget()), release: name, namespace, timeoutSeconds: Math.ceil(p.timeoutMs / 1000)})
    },
  }
}
