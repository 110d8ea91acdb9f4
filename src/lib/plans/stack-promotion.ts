// `ichor stack promotion set Automatic|Manual`: the promotion mode of an existing cluster, the
// day-2 command an init rerun names instead of switching it. The mode is stored in the
// IchorInstallation, each Order moves to it (in the installed Kokumi's shape), every existing
// Preparation is relabelled (Kokumi stamps the mode on a Preparation only when it renders it,
// and its Preparation controller reads that label, not the Order), and with Manual the served
// Preparation becomes the one approval, so the Serving stays where it is. Automatic then waits
// for Argo CD to serve each Order's newest Preparation; Manual has nothing to wait for.
import {FIELD_MANAGER} from '../constants.js'
import type {Session} from '../session/session.js'
import {orderPromotion, readKokumiOrderApi} from '../stack/kokumi-api.js'
import {type PromotionMode, STACK_COMPONENTS, type StackComponent} from '../state/installation-types.js'
import {COMPONENT_NAMESPACE, ORDER_API_VERSION} from '../stack/orders.js'
import {relabelPreparations, relabelState} from '../stack/promote.js'
import {waitApplicationsTask} from '../stack/install-tasks.js'
import {readOrder} from '../stack/delivery.js'
import {requireInstallation, writeInstallationSpec} from '../state/installation.js'
import {IchorError} from '../errors/errors.js'
import type {RunResult} from '../tasks/types.js'
import {holds, missing} from '../tasks/probe.js'
import type {Task} from '../tasks/types.js'
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

function storePromotionTask(session: Session, mode: PromotionMode): Task {
  return {
    id: 'store-promotion',
    title: `Store promotion ${mode} in the IchorInstallation`,
    async probe() {
      const cr = await requireInstallation(await session.kube())
      return cr.spec.stack.promotion === mode ? holds(`promotion ${mode}`) : missing(`promotion ${cr.spec.stack.promotion}`)
    },
    async run() {
      const cr = await requireInstallation(await session.kube())
      await writeInstallationSpec(await session.kube(), {...cr.spec, stack: {...cr.spec.stack, promotion: mode}}, {crd: false})
    },
  }
}

function orderModeTask(session: Session, mode: PromotionMode): Task {
  return {
    id: 'order-promotion',
    title: `Move both Orders to promotion ${mode}`,
    async probe() {
      const kube = await session.kube()
      for (const c of STACK_COMPONENTS) {
        const order = await readOrder(kube, c)
        if (!order) return missing(`no Order ${COMPONENT_NAMESPACE[c]}/${c}: run ichor init first`)
        if (orderPromotion(order.spec) !== mode) return missing(`Order ${COMPONENT_NAMESPACE[c]}/${c} is ${orderPromotion(order.spec)}`)
      }
      return holds(`both Orders are ${mode}`)
    },
    async run() {
      const kube = await session.kube()
      // Only the promotion field: the Order's source stays what the last publish set.
      const api = await readKokumiOrderApi(kube)
      const spec = api.field === 'autoDeploy' ? {autoDeploy: mode === 'Automatic' ? 'Enabled' : 'Disabled'} : {promotion: {mode}}
      for (const c of STACK_COMPONENTS) {
        if (!(await readOrder(kube, c))) throw new IchorError(`no Order ${COMPONENT_NAMESPACE[c]}/${c}`, {hint: 'run ichor init first'})
        await kube.request('PATCH', `/apis/${ORDER_API_VERSION}/namespaces/${COMPONENT_NAMESPACE[c]}/orders/${c}`, {
          body: {spec},
          contentType: 'application/merge-patch+json',
          query: {fieldManager: FIELD_MANAGER, fieldValidation: 'Strict'},
        })
      }
    },
  }
}

function relabelTask(session: Session, mode: PromotionMode): Task {
  return {
    id: 'relabel-preparations',
    title: `Relabel every Preparation for promotion ${mode}${mode === 'Manual' ? ' and keep the served one as the only approval' : ''}`,
    async probe() {
      const kube = await session.kube()
      for (const c of STACK_COMPONENTS) {
        const s = await relabelState(kube, COMPONENT_NAMESPACE[c], c, mode)
        if (!s.done) return missing(`${c}: ${s.state}`)
      }
      return holds(`every Preparation carries promotion ${mode}`)
    },
    async run(progress) {
      const kube = await session.kube()
      for (const c of STACK_COMPONENTS) {
        const changed = await relabelPreparations(kube, COMPONENT_NAMESPACE[c], c, mode)
        if (changed.length > 0) progress(`${c}: ${changed.join(', ')}`)
      }
    },
  }
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
