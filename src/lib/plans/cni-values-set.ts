// `ichor cni values set|edit` as one plan: under the Lease, validate with the live
// cluster's facts, helm upgrade with the full effective values (rollback on failure),
// wait for the operator then the agents, and only then record the user layer and the
// applied hash in the IchorInstallation. Same values twice: every step holds, no revision.
import {prepareValuesChange, type ChangeSources} from '../cilium/change.js'
import type {ReadValuesInput, ValuesInput} from '../values/layer.js'
import {diffCiliumValues, type CniValuesDiff} from '../cilium/diff.js'
import {effectiveValuesDiff} from '../cilium/diff.js'
import {editCiliumValues} from '../cilium/edit.js'
import {recordCiliumValuesTask, upgradeCiliumValuesTask, validateCiliumValuesTask, waitCiliumRolloutTask, type CiliumValuesChange} from '../cilium/tasks.js'
import {checkCiliumChartFlag, checkCiliumValuesInput} from './local-input.js'
import type {RunResult} from '../tasks/types.js'
import type {Later} from '../tasks/types.js'
import type {PlanOptions} from './options.js'
import {runOptions, runPlan, runReadPlan, type Plan, type ReadPlan} from './run.js'
import {once} from '../tasks/memo.js'

export interface CniValuesSetOptions extends ChangeSources, PlanOptions {
  input: ValuesInput
  breakLock?: boolean
  /** --yes: no question on a terminal; required without one and with --json. */
  yes: boolean
  json: boolean
}

export interface CniValuesSetResult extends RunResult {
  /** The user layer before and after, the applied hash. */
  values: {previous: Record<string, unknown>; user: Record<string, unknown>; hash: string}
  /** --dry-run: the effective-values diff against what the release runs ('' when equal). */
  diff?: string
}

type Change = Awaited<ReturnType<typeof prepareValuesChange>>

/** What set, edit and diff share: the cluster, the nodes, and this machine's input checked first. */
function valuesChangeAccess(o: Pick<CniValuesSetOptions, 'input' | 'kubeconfig' | 'context' | 'talosconfig' | 'stateDir' | 'chart'>) {
  return {
    session: {kubeconfig: o.kubeconfig, context: o.context},
    talos: {talosconfig: o.talosconfig, stateDir: o.stateDir},
    checkLocal(): ReadValuesInput {
      // A bad file or an owned key is exit 2 even when the cluster is down.
      checkCiliumChartFlag(o.chart)
      return checkCiliumValuesInput(o.input)
    },
  }
}

function cniValuesSetPlan(o: CniValuesSetOptions): Plan<Later<Change>, CniValuesSetResult, ReadValuesInput> {
  const {timeoutMs} = o
  return {
    command: 'cni values set',
    ...valuesChangeAccess(o),
    async prepare({session, talos}, input) {
      // Read once, after the Lease step (the first) has run: the stored layer cannot move under us.
      return once((): Promise<Change> => session.kube().then((kube) => prepareValuesChange(kube, input, {...o, talos})))
    },
    consent: () => 'Apply the new Cilium values with helm upgrade of kube-system/cilium? (--dry-run shows the diff)',
    steps: (change: Later<CiliumValuesChange>, {session}) => [
      validateCiliumValuesTask({change}),
      upgradeCiliumValuesTask({session, change, timeoutMs}),
      waitCiliumRolloutTask({session, kind: 'Deployment', timeoutMs}),
      waitCiliumRolloutTask({session, kind: 'DaemonSet', timeoutMs}),
      recordCiliumValuesTask({session, change}),
    ],
    async result(run, change) {
      const c = await change()
      const diff = o.dryRun ? effectiveValuesDiff(c.context.release, c.effective) : undefined
      return {...run, values: {previous: c.previousUser, user: c.user, hash: c.hash}, diff}
    },
  }
}

export function runCniValuesSet(o: CniValuesSetOptions): Promise<CniValuesSetResult> {
  return runPlan(cniValuesSetPlan(o), runOptions(o))
}

/**
 * `ichor cni values edit`: the set plan with an editor first, in its session (no Lease held while
 * it is open); `input` (-f/--set/KEY=VALUE) is the starting change the editor opens with. Each
 * saved buffer is checked as the set checks it, with the run's node reads.
 */
export function runCniValuesEdit(o: Omit<CniValuesSetOptions, 'dryRun'>): Promise<CniValuesSetResult | {changed: false}> {
  const options = {...o, dryRun: false}
  const plan: Plan<Later<Change>, CniValuesSetResult, ReadValuesInput, {changed: false}> = {
    ...cniValuesSetPlan(options),
    command: 'cni values edit',
    edit: {
      async open({session, talos}, seed) {
        const edited = await editCiliumValues(await session.kube(), {...options, talos}, seed)
        return edited.user && {kind: 'layer', user: edited.user, base: edited.base}
      },
      unchanged: () => ({changed: false}),
    },
  }
  return runPlan(plan, runOptions(options))
}

/** `ichor cni values diff`: validated as a set is, against the live release; changes nothing. */
export function runCniValuesDiff(o: {
  input: ValuesInput
  kubeconfig?: string
  context?: string
  talosconfig?: string
  stateDir?: string
  chart?: string
  mirror?: string
  json: boolean
}): Promise<CniValuesDiff> {
  const plan: ReadPlan<CniValuesDiff, ReadValuesInput> = {
    command: 'cni values diff',
    ...valuesChangeAccess(o),
    read: async ({session, talos}, input) => diffCiliumValues(await session.kube(), input, {chart: o.chart, mirror: o.mirror, talos}),
  }
  return runReadPlan(plan, o)
}
