// `ichor stack promote <component>`: approve the component's newest Preparation when its
// Order waits for a person (autoDeploy Disabled / promotion Manual), then wait for Argo CD.
import type {Session} from '../session/session.js'
import {COMPONENT_NAMESPACE} from '../stack/orders.js'
import type {StackComponent} from '../state/installation-types.js'
import {approveLatestPreparation, readPromotion} from '../stack/promote.js'
import {waitApplicationsTask} from '../stack/install-tasks.js'
import type {RunResult} from '../tasks/types.js'
import {holds, missing} from '../tasks/probe.js'
import type {Task} from '../tasks/types.js'
import type {PlanOptions} from './options.js'
import {runOptions, runPlan, type Plan} from './run.js'

export interface StackPromoteOptions extends PlanOptions {
  component: StackComponent
  yes: boolean
  json: boolean
}

function promoteTask(session: Session, component: StackComponent): Task {
  const ns = COMPONENT_NAMESPACE[component]
  return {
    id: 'approve-preparation',
    title: `Approve the newest Preparation of Order ${ns}/${component}`,
    async probe() {
      const s = await readPromotion(await session.kube(), ns, component)
      // An older approval left behind would re-point the Serving on Kokumi's next resync.
      if (s.otherApprovals.length > 0)
        return missing(
          `${s.otherApprovals.join(', ')} still carr${s.otherApprovals.length === 1 ? 'ies' : 'y'} the approval: one approved Preparation per Order`,
        )
      if (s.served) return holds(`the Serving serves ${s.preparation}`)
      return s.approved ? holds(`${s.preparation} is approved; Kokumi moves the Serving`) : missing(`${s.preparation} waits for approval`)
    },
    async run(progress) {
      progress(`approved ${await approveLatestPreparation(await session.kube(), ns, component)}`)
    },
  }
}

function stackPromotePlan(o: StackPromoteOptions): Plan<void, RunResult> {
  const ns = COMPONENT_NAMESPACE[o.component]
  return {
    command: 'stack promote',
    session: {kubeconfig: o.kubeconfig, context: o.context},
    consent: () => `Approve the newest Preparation of Order ${ns}/${o.component}, so Argo CD deploys it?`,
    steps: (_, {session}) => [promoteTask(session, o.component), waitApplicationsTask({session, components: [o.component], timeoutMs: o.timeoutMs})],
    result: (run) => run,
  }
}

export function runStackPromotePlan(o: StackPromoteOptions): Promise<RunResult> {
  return runPlan(stackPromotePlan(o), runOptions(o))
}
