// `ichor cni values set|edit` as one plan: under the Lease, validate with the live
// cluster's facts, helm upgrade with the full effective values (rollback on failure),
// wait for the operator then the agents, and only then record the user layer and the
// applied hash in the IchorInstallation. Same values twice: every step holds, no revision.
import {prepareValuesChange, type ChangeSources, type ValuesInput} from '../cilium/change.js'
import {effectiveValuesDiff} from '../cilium/diff.js'
import {confirmOrAbort} from '../cli/consent.js'
import {recordCiliumValuesTask, upgradeCiliumValuesTask, validateCiliumValuesTask, waitCiliumRolloutTask, type CiliumValuesChange} from '../cilium/tasks.js'
import {openSession, type Session} from '../session/session.js'
import {checkCiliumChartFlag, checkCiliumValuesInput} from './local-input.js'
import {leaseTask} from '../session/tasks.js'
import {runTasks, type OutputMode, type RunResult} from '../tasks/engine.js'
import type {Later, Task} from '../tasks/types.js'
import type {PlanOptions} from './options.js'

export interface CniValuesSetOptions extends ChangeSources, PlanOptions {
  input: ValuesInput
  breakLock?: boolean
  /** --yes / --json: no confirmation on a terminal (there is none without one). */
  yes?: boolean
  json?: boolean
}

export interface CniValuesSetResult extends RunResult {
  /** The user layer before and after, the applied hash. */
  values: {previous: Record<string, unknown>; user: Record<string, unknown>; hash: string}
  /** --dry-run: the effective-values diff against what the release runs ('' when equal). */
  diff?: string
}

function valuesSetSteps(session: Session, o: CniValuesSetOptions, change: Later<CiliumValuesChange>): Task[] {
  const {timeoutMs} = o
  return [
    leaseTask({session, breakLock: o.breakLock}),
    validateCiliumValuesTask({change}),
    upgradeCiliumValuesTask({session, change, timeoutMs}),
    waitCiliumRolloutTask({session, kind: 'Deployment', timeoutMs}),
    waitCiliumRolloutTask({session, kind: 'DaemonSet', timeoutMs}),
    recordCiliumValuesTask({session, change}),
  ]
}

export async function runCniValuesSet(o: CniValuesSetOptions): Promise<CniValuesSetResult> {
  const session = openSession({command: 'cni values set', kubeconfig: o.kubeconfig, context: o.context})
  try {
    // Read once, after the Lease step (the first) has run: the stored layer cannot move under us.
    let prepared: ReturnType<typeof prepareValuesChange> | undefined
    const change = () => (prepared ??= session.kube().then((kube) => prepareValuesChange(kube, o.input, o)))
    // This machine's input first: a bad file or an owned key is exit 2 even when the cluster is down.
    checkCiliumChartFlag(o.chart)
    checkCiliumValuesInput(o.input)
    await session.kube() // a named cluster that does not answer is exit 1 before any step
    await confirmOrAbort({yes: o.yes ?? false, dryRun: o.dryRun, json: o.json ?? false}, 'Apply the new Cilium values with helm upgrade of kube-system/cilium? (--dry-run shows the diff)')
    const result = await runTasks(valuesSetSteps(session, o, change), {output: o.output, dryRun: o.dryRun, stream: o.stream, guard: () => session.guard()})
    const c = await change()
    const diff = o.dryRun ? effectiveValuesDiff(c.context.release, c.effective) : undefined
    return {...result, values: {previous: c.previousUser, user: c.user, hash: c.hash}, diff}
  } finally {
    await session.close()
  }
}
