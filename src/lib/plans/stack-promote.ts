// `ichor stack promote <component>`: approve the component's newest Preparation when its
// Order waits for a person (autoDeploy Disabled / promotion Manual), then wait for Argo CD.
import {approvePreparationTask} from '../stack/promotion-tasks.js'
import {COMPONENT_NAMESPACE} from '../stack/orders.js'
import type {StackComponent} from '../state/installation-types.js'
import {waitApplicationsTask} from '../stack/install-tasks.js'
import type {RunResult} from '../tasks/types.js'
import type {PlanOptions} from './options.js'
import {runOptions, runPlan, type Plan} from './run.js'

export interface StackPromoteOptions extends PlanOptions {
  component: StackComponent
  yes: boolean
  json: boolean
}

function stackPromotePlan(o: StackPromoteOptions): Plan<void, RunResult> {
  const ns = COMPONENT_NAMESPACE[o.component]
  return {
    command: 'stack promote',
    session: {kubeconfig: o.kubeconfig, context: o.context},
    consent: () => `Approve the newest Preparation of Order ${ns}/${o.component}, so Argo CD deploys it?`,
    steps: (_, {session}) => [approvePreparationTask(session, o.component), waitApplicationsTask({session, components: [o.component], timeoutMs: o.timeoutMs})],
    result: (run) => run,
  }
}

export function runStackPromotePlan(o: StackPromoteOptions): Promise<RunResult> {
  return runPlan(stackPromotePlan(o), runOptions(o))
}
