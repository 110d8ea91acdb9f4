// `ichor talos status`: a read plan. The runner opens the session and the Talos access from the
// flags (the talosconfig by the one rule, the sealed copy when this machine has none); the plan
// only says what it reads.
import {readTalosStatus, type TalosStatusReport} from '../talos/status.js'
import type {ReadAccessOptions} from './options.js'
import {runReadPlan, type ReadPlan} from './run.js'

export type TalosStatusOptions = ReadAccessOptions

export type TalosStatusResult = TalosStatusReport & {
  /** Accepted but unwise (a short passphrase opened the sealed copy). */
  warnings: string[]
}

export function talosStatusPlan(o: TalosStatusOptions): ReadPlan<TalosStatusResult> {
  return {
    command: 'talos status',
    session: {kubeconfig: o.kubeconfig, context: o.context},
    talos: {talosconfig: o.talosconfig, stateDir: o.stateDir, sealed: {statePassphraseFile: o.statePassphraseFile}},
    read: async ({talos}) => ({...(await readTalosStatus(talos)), warnings: talos.warnings}),
  }
}

export function runTalosStatus(o: TalosStatusOptions): Promise<TalosStatusResult> {
  return runReadPlan(talosStatusPlan(o), o)
}
