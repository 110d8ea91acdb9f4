// `ichor cni upgrade` as one plan, in the order of Cilium's upgrade guide: under the Lease,
// the version step (no downgrade, one minor at a time), the stored values validated against
// the new chart, the pre-flight check (installed, checked ready, removed), helm upgrade with
// rollback on failure and a wait budget that grows with the nodes, the operator then the
// agents, and the new chart, revision and values hash recorded in the IchorInstallation.
import {CILIUM_RELEASE} from '../constants.js'
import {effectiveValuesDiff} from '../cilium/diff.js'
import {recordCiliumValuesTask, upgradeCiliumValuesTask, validateCiliumValuesTask, waitCiliumRolloutTask} from '../cilium/tasks.js'
import {prepareCiliumUpgrade, readUpgradePlan, type CiliumUpgradeChange, type CiliumUpgradePlan, type UpgradeSources} from '../cilium/upgrade.js'
import {checkUpgradeTask, installPreflightTask, removePreflightTask, waitPreflightTask} from '../cilium/upgrade-tasks.js'
import {upgradeWaitSeconds} from '../cilium/versions.js'
import {IchorError} from '../errors/errors.js'
import {readWorkloadRollout} from '../health/reads.js'
import {checkCiliumChartFlag, checkCiliumVersionFlag} from './local-input.js'
import {openSession, type Session} from '../session/session.js'
import {leaseTask} from '../session/tasks.js'
import {runTasks, type RunResult} from '../tasks/engine.js'
import type {Later, Task} from '../tasks/types.js'
import type {PlanOptions} from './options.js'

export interface CniUpgradeOptions extends UpgradeSources, PlanOptions {
  /** Asked once the plan is known (a terminal without --yes); false stops before anything runs. */
  confirm?: (plan: CiliumUpgradePlan, diff: string) => Promise<boolean>
}

export interface CniUpgradeResult extends RunResult {
  from: string
  to: string
  /** Which chart file was used and whether it is the pin. */
  chart: string
  warnings: string[]
  /** The effective-values diff against what the release runs ('' when equal). */
  diff: string
}

function upgradeSteps(session: Session, o: CniUpgradeOptions, change: Later<CiliumUpgradeChange>): Task[] {
  const {timeoutMs} = o
  // helm waits for every agent to be replaced: one batch time per group of nodes on top of --timeout.
  const helmTimeoutMs = async () => {
    const ds = await readWorkloadRollout(await session.kube(), 'DaemonSet', CILIUM_RELEASE.namespace, 'cilium')
    return upgradeWaitSeconds({baseSeconds: Math.ceil(timeoutMs / 1000), nodes: ds?.desired ?? 1}) * 1000
  }
  return [
    leaseTask({session, breakLock: o.breakLock}),
    checkUpgradeTask({change}),
    validateCiliumValuesTask({change}),
    installPreflightTask({session, change, timeoutMs}),
    waitPreflightTask({session, change, timeoutMs}),
    removePreflightTask({session, timeoutMs}),
    upgradeCiliumValuesTask({session, change, timeoutMs, helmTimeoutMs, title: `Upgrade Helm release ${CILIUM_RELEASE.namespace}/${CILIUM_RELEASE.name} to the new chart (rollback on failure)`}),
    waitCiliumRolloutTask({session, kind: 'Deployment', timeoutMs}),
    waitCiliumRolloutTask({session, kind: 'DaemonSet', timeoutMs}),
    recordCiliumValuesTask({session, change}),
  ]
}

export async function runCniUpgrade(o: CniUpgradeOptions): Promise<CniUpgradeResult> {
  const session = openSession({command: 'cni upgrade', kubeconfig: o.kubeconfig, context: o.context})
  try {
    checkCiliumVersionFlag(o.to) // this machine's input first: exit 2 even when the cluster is down
    checkCiliumChartFlag(o.chart)
    const kube = await session.kube() // a named cluster that does not answer is exit 1 before any step
    // The version policy before anything runs (no Lease taken): a refused step is exit 2 here.
    await readUpgradePlan(kube, o)
    if (o.confirm && !o.dryRun) {
      const preview = await prepareCiliumUpgrade(kube, o)
      const diff = effectiveValuesDiff(preview.context.release, preview.effective)
      if (!(await o.confirm(preview.plan, diff))) throw new IchorError('cancelled: nothing was changed', {exitCode: 1})
    }
    // Read again under the Lease (the first step): the release and stored layer cannot move under us.
    let prepared: Promise<CiliumUpgradeChange> | undefined
    const change = () => (prepared ??= prepareCiliumUpgrade(kube, o))
    const result = await runTasks(upgradeSteps(session, o, change), {output: o.output, dryRun: o.dryRun, stream: o.stream, guard: () => session.guard()})
    const c = await change()
    const diff = effectiveValuesDiff(c.context.release, c.effective)
    return {...result, from: c.plan.installed, to: c.chartVersion, chart: c.plan.target.describe, warnings: c.plan.warnings, diff}
  } finally {
    await session.close()
  }
}
