// `ichor stack repair-secrets`: after ichor's copy of a generated password was deleted (or no
// longer matches), write a new password to both sides, restart what reads it, wait for those
// rollouts and for both Applications to be Synced and Healthy again (a status right after must
// not read them Progressing), and show the Kokumi admin password once. A no-op when both sides
// agree.
import {repairSecretTask, waitSecretConsumersTask, type RepairOutcome} from '../stack/generated-secrets.js'
import {STACK_COMPONENTS} from '../state/installation-types.js'
import {waitApplicationsTask} from '../stack/install-tasks.js'
import type {RunResult} from '../tasks/types.js'
import type {PlanOptions} from './options.js'
import {runOptions, runPlan, type Plan} from './run.js'

export interface StackRepairSecretsResult extends RunResult {
  /** The new Kokumi admin password, present only on the run that set it (shown once). */
  kokumiAdminPassword?: string
  /** The ichor-system Secrets given a new password. */
  repaired: string[]
}

function stackRepairSecretsPlan(o: PlanOptions): Plan<void, StackRepairSecretsResult> {
  const outcome: RepairOutcome = {repaired: []}
  return {
    command: 'stack repair-secrets',
    session: {kubeconfig: o.kubeconfig, context: o.context},
    consent: () => 'Set a new password on both sides of every generated Secret that no longer matches, and restart the workloads that read it?',
    steps: (_, {session}) => [
      repairSecretTask({session, component: 'kokumi', outcome}),
      repairSecretTask({session, component: 'argocd', outcome}),
      waitSecretConsumersTask({session, timeoutMs: o.timeoutMs}),
      waitApplicationsTask({session, components: STACK_COMPONENTS, timeoutMs: o.timeoutMs}),
    ],
    result: (run) => ({...run, ...outcome}),
  }
}

export function runStackRepairSecretsPlan(o: PlanOptions & {yes: boolean; json: boolean}): Promise<StackRepairSecretsResult> {
  return runPlan(stackRepairSecretsPlan(o), runOptions(o))
}
