// `ichor cni upgrade` as one plan, in the order of Cilium's upgrade guide: under the Lease,
// the version step (no downgrade, one minor at a time), the stored values validated against
// the new chart, the pre-flight check (installed, checked ready, removed), helm upgrade with
// rollback on failure and a wait budget that grows with the nodes, the operator then the
// agents, and the new chart, revision and values hash recorded in the IchorInstallation.
import {CILIUM_RELEASE} from '../constants.js'
import {effectiveValuesDiff} from '../cilium/diff.js'
import {paintDiff} from '../text/diff.js'
import {recordCiliumValuesTask, upgradeCiliumValuesTask, validateCiliumValuesTask, waitCiliumRolloutTask} from '../cilium/tasks.js'
import {prepareCiliumUpgrade, readUpgradePlan, type CiliumUpgradeChange, type UpgradeSources} from '../cilium/upgrade.js'
import {checkUpgradeTask, installPreflightTask, removePreflightTask, waitPreflightTask} from '../cilium/upgrade-tasks.js'
import {upgradeWaitSeconds} from '../cilium/versions.js'
import type {RemovedApiReport} from '../cilium/removed-apis.js'
import {readWorkloadRollout} from '../kube/reads.js'
import type {Kube} from '../kube/client.js'
import {readCniContext, type CniContext} from '../cilium/context.js'
import {checkCiliumChartFlag, checkCiliumVersionFlag} from './local-input.js'
import type {Session} from '../session/session.js'
import type {RunResult} from '../tasks/types.js'
import type {Later, Task} from '../tasks/types.js'
import type {PlanOptions} from './options.js'
import {runOptions, runPlan, type Plan} from './run.js'
import {once} from '../tasks/memo.js'

export interface CniUpgradeOptions extends UpgradeSources, PlanOptions {
  yes: boolean
  json: boolean
}

export interface CniUpgradeResult extends RunResult {
  from: string
  to: string
  /** Which chart file was used and whether it is the pin. */
  chart: string
  warnings: string[]
  /** The effective-values diff against what the release runs ('' when equal). */
  diff: string
  /** The live objects the target minor's upgrade notes remove or reject (gone on with --skip-removed-api-check) and deprecate. */
  removedApis: RemovedApiReport
}

function upgradeSteps(session: Session, o: CniUpgradeOptions, change: Later<CiliumUpgradeChange>): Task[] {
  const {timeoutMs} = o
  // helm waits for every agent to be replaced: one batch time per group of nodes on top of --timeout.
  const helmTimeoutMs = async () => {
    const ds = await readWorkloadRollout(await session.kube(), 'DaemonSet', CILIUM_RELEASE.namespace, 'cilium')
    return upgradeWaitSeconds({baseSeconds: Math.ceil(timeoutMs / 1000), nodes: ds?.desired ?? 1}) * 1000
  }
  return [
    checkUpgradeTask({change}),
    validateCiliumValuesTask({change}),
    installPreflightTask({session, change, timeoutMs}),
    waitPreflightTask({session, change, timeoutMs}),
    removePreflightTask({session, timeoutMs}),
    upgradeCiliumValuesTask({
      session,
      change,
      timeoutMs,
      helmTimeoutMs,
      title: `Upgrade Helm release ${CILIUM_RELEASE.namespace}/${CILIUM_RELEASE.name} to the new chart (rollback on failure)`,
    }),
    waitCiliumRolloutTask({session, kind: 'Deployment', timeoutMs}),
    waitCiliumRolloutTask({session, kind: 'DaemonSet', timeoutMs}),
    recordCiliumValuesTask({session, change}),
  ]
}

/** What the plan prepared: the change shown at the question (on a terminal), and the one the steps apply. */
interface Prepared {
  preview(): Promise<CiliumUpgradeChange>
  change: Later<CiliumUpgradeChange>
}

function cniUpgradePlan(o: CniUpgradeOptions): Plan<Prepared, CniUpgradeResult> {
  return {
    command: 'cni upgrade',
    session: {kubeconfig: o.kubeconfig, context: o.context},
    talos: {talosconfig: o.talosconfig, stateDir: o.stateDir},
    checkLocal() {
      checkCiliumVersionFlag(o.to) // this machine's input first: exit 2 even when the cluster is down
      checkCiliumChartFlag(o.chart)
    },
    async prepare({session, talos}) {
      const kube = await session.kube()
      // The version policy and the live objects the target minor removes or rejects, before
      // anything runs (no Lease taken): a refused step is exit 2 here.
      await readUpgradePlan(kube, o)
      const prepareNow = () => prepareCiliumUpgrade(kube, {...o, talos})
      let shown: CiliumUpgradeChange | undefined
      return {
        preview: async () => (shown = await prepareNow()),
        // Read again under the Lease (the first step): the release and the stored layer cannot
        // move under us. The change shown at the question (values validated, chart rendered) is
        // reused when neither the IchorInstallation nor the release moved since.
        change: once(async (): Promise<CiliumUpgradeChange> => (shown && (await unmoved(kube, shown.context)) ? shown : prepareNow())),
      }
    },
    // The question comes with the plan: the target, its warnings and the values diff.
    async consent({preview}) {
      const c = await preview()
      const diff = effectiveValuesDiff(c.context.release, c.effective)
      return {
        question: `Upgrade Cilium from ${c.plan.installed} to ${c.plan.target.chart.version}?`,
        preview: `${c.plan.target.describe}\n${diff ? paintDiff(diff).trimEnd() : 'The effective values would not change.'}`,
        warnings: c.plan.warnings,
      }
    },
    steps: ({change}, {session}) => upgradeSteps(session, o, change),
    async result(run, {change}) {
      const c = await change()
      const diff = effectiveValuesDiff(c.context.release, c.effective)
      return {
        ...run,
        from: c.plan.installed,
        to: c.chartVersion,
        chart: c.plan.target.describe,
        warnings: c.plan.warnings,
        diff,
        removedApis: c.plan.removedApis,
      }
    },
  }
}

/** Neither the IchorInstallation nor the Cilium release changed since `then` was read. */
async function unmoved(kube: Kube, then: CniContext): Promise<boolean> {
  const now = await readCniContext(kube)
  return (
    now.installation.metadata.resourceVersion === then.installation.metadata.resourceVersion &&
    now.release?.revision === then.release?.revision &&
    now.release?.status === then.release?.status
  )
}

export function runCniUpgrade(o: CniUpgradeOptions): Promise<CniUpgradeResult> {
  return runPlan(cniUpgradePlan(o), runOptions(o))
}
