// `ichor stack promotion set Automatic|Manual`: the promotion mode of an existing cluster, the
// day-2 command an init rerun names instead of switching it. The mode is stored in the
// IchorInstallation, each Order moves to it (in the installed Kokumi's shape), every existing
// Preparation is relabelled (Kokumi stamps the mode on a Preparation only when it renders it,
// and its Preparation controller reads that label, not the Order), and with Manual the served
// Preparation becomes the one approval, so the Serving stays where it is. Automatic then waits
// for Argo CD to serve each Order's newest Preparation; Manual has nothing to wait for.
import {orderModeTask, relabelTask, storePromotionTask} from '../stack/promotion-tasks.js'
import {type PromotionMode, STACK_COMPONENTS, type StackComponent} from '../state/installation-types.js'
import {waitApplicationsTask} from '../stack/install-tasks.js'
import {requireInstallation} from '../state/installation.js'
import type {RunResult} from '../tasks/types.js'
import type {PlanOptions} from './options.js'
import {runOptions, runPlan, type Plan} from './run.js'

export interface StackPromotionSetOptions extends PlanOptions {
  mode: PromotionMode
  yes: boolean
  json: boolean
}

export interface StackPromotionSetResult extends RunResult {
  promotion: PromotionMode
  /** Manual: what waits for `ichor stack promote`, one line per component. */
  awaitingApproval: string[]
}

function stackPromotionSetPlan(o: StackPromotionSetOptions): Plan<void, StackPromotionSetResult> {
  const awaiting = new Map<StackComponent, string>()
  return {
    command: 'stack promotion set',
    session: {kubeconfig: o.kubeconfig, context: o.context},
    async prepare({session}) {
      await requireInstallation(await session.kube())
    },
    consent: () =>
      `Switch the promotion of both Orders to ${o.mode}${o.mode === 'Automatic' ? ' (Kokumi then serves each newest bundle)' : ' (each new bundle then waits for ichor stack promote)'}?`,
    steps: (_, {session}) => [
      storePromotionTask(session, o.mode),
      orderModeTask(session, o.mode),
      relabelTask(session, o.mode),
      waitApplicationsTask({session, components: STACK_COMPONENTS, timeoutMs: o.timeoutMs, awaiting}),
    ],
    result: (run) => ({...run, promotion: o.mode, awaitingApproval: [...awaiting.values()]}),
  }
}

export function runStackPromotionSetPlan(o: StackPromotionSetOptions): Promise<StackPromotionSetResult> {
  return runPlan(stackPromotionSetPlan(o), runOptions(o))
}
