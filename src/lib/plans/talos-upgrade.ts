// `ichor talos upgrade` as one plan under the Lease: the rules, the nodes' answers and etcd's
// health before anything runs (a refusal is exit 2, nothing touched), then one step per node,
// control planes first, each proving the node back before the next; after the last node
// Cilium's operator and agents and both Applications; the version recorded last.
import {waitCiliumRolloutTask} from '../cilium/tasks.js'
import {EXIT} from '../errors/exit-codes.js'
import {STACK_COMPONENTS} from '../state/installation-types.js'
import {waitApplicationsTask} from '../stack/install-tasks.js'
import {
  checkUpgradeTask,
  judgeTalosUpgrade,
  recordTalosVersionTask,
  upgradeNodeTask,
  type TalosUpgradeInput,
  type TalosUpgradeJudgement,
} from '../talos-upgrade/steps.js'
import type {RunResult, Task} from '../tasks/types.js'
import type {PlanOptions} from './options.js'
import {checkTalosUpgradeFlags} from './local-input.js'
import {runOptions, runPlan, type Plan} from './run.js'

export interface TalosUpgradeOptions extends PlanOptions {
  to: string
  nodes: string[]
  yes: boolean
  json: boolean
  talosconfig?: string
  stateDir?: string
  statePassphraseFile?: string
}

export interface TalosUpgradeResult extends RunResult {
  to: string
  nodes: {node: string; role: string; from: string; image: string}[]
  warnings: string[]
}

function talosUpgradeSteps(input: TalosUpgradeInput, j: TalosUpgradeJudgement): Task[] {
  const {session, timeoutMs} = input
  return [
    checkUpgradeTask(j),
    ...j.nodes.map((n) => upgradeNodeTask(input, j, n)),
    waitCiliumRolloutTask({session, kind: 'Deployment', timeoutMs}),
    waitCiliumRolloutTask({session, kind: 'DaemonSet', timeoutMs}),
    waitApplicationsTask({session, components: STACK_COMPONENTS, timeoutMs}),
    recordTalosVersionTask(input, j),
  ]
}

interface Prepared {
  input: TalosUpgradeInput
  judgement: TalosUpgradeJudgement
}

function preview(j: TalosUpgradeJudgement): string {
  const lines = j.nodes.map((n) =>
    j.behind.includes(n.node)
      ? `  ${n.role === 'controlplane' ? 'control plane' : 'worker'} ${n.node}: ${n.from} -> ${j.to} with ${n.image}`
      : `  ${n.node}: runs ${j.to} already`,
  )
  return `Talos upgrade, one node at a time:\n${lines.join('\n')}`
}

function talosUpgradePlan(o: TalosUpgradeOptions): Plan<Prepared, TalosUpgradeResult> {
  return {
    command: 'talos upgrade',
    session: {kubeconfig: o.kubeconfig, context: o.context},
    talos: {talosconfig: o.talosconfig, stateDir: o.stateDir, sealed: {statePassphraseFile: o.statePassphraseFile}, missingInstallationExit: EXIT.usage},
    checkLocal: () => checkTalosUpgradeFlags(o.to, o.nodes),
    async prepare({session, talos}) {
      const input: TalosUpgradeInput = {session, talos, to: o.to, only: o.nodes, timeoutMs: o.timeoutMs}
      return {input, judgement: await judgeTalosUpgrade(input)}
    },
    consent: ({judgement: j}) =>
      j.behind.length === 0
        ? undefined
        : {
            question: `Upgrade ${j.behind.length} node(s) to Talos ${j.to}, one at a time (each is drained and rebooted)?`,
            preview: preview(j),
            warnings: j.warnings,
          },
    steps: ({input, judgement}) => talosUpgradeSteps(input, judgement),
    result: (run, {judgement: j}, {talos}) => ({
      ...run,
      to: j.to,
      nodes: j.nodes.map((n) => ({node: n.node, role: n.role, from: n.from, image: n.image})),
      warnings: [...j.warnings, ...talos.warnings],
    }),
  }
}

export function runTalosUpgrade(o: TalosUpgradeOptions): Promise<TalosUpgradeResult> {
  return runPlan(talosUpgradePlan(o), runOptions(o))
}
