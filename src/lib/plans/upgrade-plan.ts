// `ichor upgrade plan`: a read plan (no Lease, nothing changes). It reads the nodes, the control
// planes' configs and the Cilium release, and prints the hops to the target combination.
import {readUpgradePlan, type UpgradePlanReport} from '../upgrade-plan/read.js'
import type {ReadAccessOptions} from './options.js'
import {runReadPlan, type ReadPlan} from './run.js'

export type UpgradePlanOptions = ReadAccessOptions & {
  /** --to-latest: the newest combination the compatibility data allows, not this ichor's default set. */
  toLatest: boolean
}

export type UpgradePlanResult = UpgradePlanReport & {warnings: string[]}

export function upgradePlanPlan(o: UpgradePlanOptions): ReadPlan<UpgradePlanResult> {
  return {
    command: 'upgrade plan',
    session: {kubeconfig: o.kubeconfig, context: o.context},
    talos: {talosconfig: o.talosconfig, stateDir: o.stateDir, sealed: {statePassphraseFile: o.statePassphraseFile}},
    read: async ({session, talos}) => ({...(await readUpgradePlan({kube: await session.kube(), talos, toLatest: o.toLatest})), warnings: talos.warnings}),
  }
}

export function runUpgradePlan(o: UpgradePlanOptions): Promise<UpgradePlanResult> {
  return runReadPlan(upgradePlanPlan(o), o)
}
