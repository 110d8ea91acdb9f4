// `ichor stack promote <component>`: approve the component's newest Preparation when its
// Order waits for a person (autoDeploy Disabled / promotion Manual), then wait for Argo CD.
import {openSession, type Session} from '../session/session.js'
import {leaseTask} from '../session/tasks.js'
import {COMPONENT_NAMESPACE} from '../stack/orders.js'
import type {StackComponent} from '../stack/policies.js'
import {approveLatestPreparation, readPromotion} from '../stack/promote.js'
import {waitApplicationsTask} from '../stack/tasks.js'
import {runTasks, type OutputMode, type RunResult} from '../tasks/engine.js'
import {holds, missing} from '../tasks/probe.js'
import type {Task} from '../tasks/types.js'

export interface StackPromoteOptions {
  component: StackComponent
  kubeconfig?: string
  context?: string
  timeoutMs: number
  output: OutputMode
  dryRun: boolean
  breakLock?: boolean
}

function promoteTask(session: Session, component: StackComponent): Task {
  const ns = COMPONENT_NAMESPACE[component]
  return {
    id: 'approve-preparation',
    title: `Approve the newest Preparation of Order ${ns}/${component}`,
    async probe() {
      const s = await readPromotion(await session.kube(), ns, component)
      // An older approval left behind would re-point the Serving on Kokumi's next resync.
      if (s.otherApprovals.length > 0) return missing(`${s.otherApprovals.join(', ')} still carr${s.otherApprovals.length === 1 ? 'ies' : 'y'} the approval: one approved Preparation per Order`)
      if (s.served) return holds(`the Serving serves ${s.preparation}`)
      return s.approved ? holds(`${s.preparation} is approved; Kokumi moves the Serving`) : missing(`${s.preparation} waits for approval`)
    },
    async run(progress) {
      progress(`approved ${await approveLatestPreparation(await session.kube(), ns, component)}`)
    },
  }
}

export async function runStackPromotePlan(o: StackPromoteOptions): Promise<RunResult> {
  const session = openSession({command: 'stack promote', kubeconfig: o.kubeconfig, context: o.context})
  try {
    await session.clusterAnswers()
    const steps = [leaseTask({session, breakLock: o.breakLock}), promoteTask(session, o.component), waitApplicationsTask({session, components: [o.component], timeoutMs: o.timeoutMs})]
    return await runTasks(steps, {output: o.output, dryRun: o.dryRun, guard: () => session.guard()})
  } finally {
    await session.close()
  }
}
