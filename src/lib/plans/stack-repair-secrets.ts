// `ichor stack repair-secrets`: after ichor's copy of a generated password was deleted (or no
// longer matches), write a new password to both sides, restart what reads it, wait for those
// rollouts and for both Applications to be Synced and Healthy again (a status right after must
// not read them Progressing), and show the Kokumi admin password once. A no-op when both sides
// agree.
import {openSession} from '../session/session.js'
import {leaseTask} from '../session/tasks.js'
import {repairSecretTask, waitSecretConsumersTask, type RepairOutcome} from '../stack/generated-secrets.js'
import {STACK_COMPONENTS} from '../stack/status.js'
import {waitApplicationsTask} from '../stack/tasks.js'
import {runTasks, type RunResult} from '../tasks/engine.js'
import type {PlanOptions} from './options.js'

export interface StackRepairSecretsResult extends RunResult {
  /** The new Kokumi admin password, present only on the run that set it (shown once). */
  kokumiAdminPassword?: string
  /** The ichor-system Secrets given a new password. */
  repaired: string[]
}

export async function runStackRepairSecretsPlan(o: PlanOptions): Promise<StackRepairSecretsResult> {
  const session = openSession({command: 'stack repair-secrets', kubeconfig: o.kubeconfig, context: o.context})
  const outcome: RepairOutcome = {repaired: []}
  try {
    await session.clusterAnswers()
    const steps = [
      leaseTask({session, breakLock: o.breakLock}),
      repairSecretTask({session, component: 'kokumi', outcome}),
      repairSecretTask({session, component: 'argocd', outcome}),
      waitSecretConsumersTask({session, timeoutMs: o.timeoutMs}),
      waitApplicationsTask({session, components: STACK_COMPONENTS, timeoutMs: o.timeoutMs}),
    ]
    const result = await runTasks(steps, {output: o.output, dryRun: o.dryRun, guard: () => session.guard()})
    return {...result, ...outcome}
  } finally {
    await session.close()
  }
}
