// The steps of `stack promotion set` (the mode stored, both Orders moved, every Preparation
// relabelled) and of `stack promote` (the newest Preparation approved).
import {FIELD_MANAGER} from '../constants.js'
import {IchorError} from '../errors/errors.js'
import type {Session} from '../session/session.js'
import {requireInstallation, writeInstallationSpec} from '../state/installation.js'
import {STACK_COMPONENTS, type PromotionMode, type StackComponent} from '../state/installation-types.js'
import {holds, missing} from '../tasks/probe.js'
import type {Task} from '../tasks/types.js'
import {readOrder} from './delivery.js'
import {orderPromotion, readKokumiOrderApi} from './kokumi-api.js'
import {COMPONENT_NAMESPACE, ORDER_API_VERSION} from './orders.js'
import {approveLatestPreparation, readPromotion, relabelPreparations, relabelState} from './promote.js'

/** The mode in the IchorInstallation first: an init rerun keeps it. */
export function storePromotionTask(session: Session, mode: PromotionMode): Task {
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

/** Each Order to the mode, in the installed Kokumi's shape (autoDeploy or promotion.mode); its source untouched. */
export function orderModeTask(session: Session, mode: PromotionMode): Task {
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

/** Kokumi's Preparation controller reads the mode from each Preparation's label, not the Order. */
export function relabelTask(session: Session, mode: PromotionMode): Task {
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

/** `stack promote`: the newest Preparation approved, the only approval of its Order. */
export function approvePreparationTask(session: Session, component: StackComponent): Task {
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
