// `ichor kubernetes upgrade` as one plan under the Lease: the version rules (also checked
// before the Lease: a refusal is exit 2 with nothing run), talosctl's own dry run read for
// what Talos would prune or change (refused when it touches Cilium, the stack or ichor), then
// `talosctl upgrade-k8s`, then the proof that everything survived it: the Cilium release's
// objects intact and Helm's, no Cilium key in Talos's inventory, the agents and operator
// ready, both Applications Synced and Healthy; the version recorded last.
import {waitCiliumRolloutTask} from '../cilium/tasks.js'
import {EXIT} from '../errors/exit-codes.js'
import {
  checkVersionsTask,
  judgeUpgrade,
  pruneGuardTask,
  recordKubernetesVersionTask,
  upgradeKubernetesTask,
  verifyCiliumObjectsTask,
  verifyInventoryTask,
  type KubernetesUpgradeInput,
} from '../kubernetes/upgrade.js'
import {checkKubernetesVersionFlag} from './local-input.js'
import {STACK_COMPONENTS} from '../state/installation-types.js'
import {waitApplicationsTask} from '../stack/install-tasks.js'
import type {RunResult} from '../tasks/types.js'
import type {Task} from '../tasks/types.js'
import type {PlanOptions} from './options.js'
import {runOptions, runPlan, type Plan} from './run.js'

export interface KubernetesUpgradeOptions extends PlanOptions {
  to: string
  allowUntested: boolean
  yes: boolean
  json: boolean
  talosconfig?: string
  stateDir?: string
  statePassphraseFile?: string
}

export interface KubernetesUpgradeResult extends RunResult {
  from: string
  to: string
  warnings: string[]
}

/** The steps after the Lease, in order. */
function kubernetesUpgradeSteps(p: KubernetesUpgradeInput): Task[] {
  const {session, timeoutMs} = p
  return [
    checkVersionsTask(p),
    pruneGuardTask(p),
    upgradeKubernetesTask(p),
    verifyCiliumObjectsTask({session}),
    verifyInventoryTask({session}),
    waitCiliumRolloutTask({session, kind: 'Deployment', timeoutMs}),
    waitCiliumRolloutTask({session, kind: 'DaemonSet', timeoutMs}),
    waitApplicationsTask({session, components: STACK_COMPONENTS, timeoutMs}),
    recordKubernetesVersionTask(p),
  ]
}

interface Prepared {
  input: KubernetesUpgradeInput
  verdict: Awaited<ReturnType<typeof judgeUpgrade>>
}

function kubernetesUpgradePlan(o: KubernetesUpgradeOptions): Plan<Prepared, KubernetesUpgradeResult> {
  return {
    command: 'kubernetes upgrade',
    session: {kubeconfig: o.kubeconfig, context: o.context},
    talos: {talosconfig: o.talosconfig, stateDir: o.stateDir, sealed: {statePassphraseFile: o.statePassphraseFile}, missingInstallationExit: EXIT.usage},
    checkLocal: () => checkKubernetesVersionFlag(o.to), // this machine's input first: exit 2 even when the cluster is down
    async prepare({session, talos}) {
      const input: KubernetesUpgradeInput = {session, to: o.to, allowUntested: o.allowUntested, timeoutMs: o.timeoutMs, talos}
      // Before anything runs (no Lease taken): a refused target is exit 2, nothing changed.
      return {input, verdict: await judgeUpgrade(input)}
    },
    consent: ({verdict}) => `Upgrade Kubernetes from ${verdict.from} to ${verdict.to} with talosctl upgrade-k8s, then verify Cilium and the stack?`,
    steps: ({input}) => kubernetesUpgradeSteps(input),
    result: (run, {verdict}, {talos}) => ({...run, from: verdict.from, to: verdict.to, warnings: [...verdict.warnings, ...talos.warnings]}),
  }
}

export function runKubernetesUpgrade(o: KubernetesUpgradeOptions): Promise<KubernetesUpgradeResult> {
  return runPlan(kubernetesUpgradePlan(o), runOptions(o))
}
