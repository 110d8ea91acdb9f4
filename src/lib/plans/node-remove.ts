// `ichor node remove ADDR` as one plan under the Lease: the rules, the node's answer and etcd's
// quorum before anything runs (a refusal is exit 2, nothing touched), then drain, leave etcd
// (control planes), reset, delete the Node, Cilium and the stack checked, the address forgotten.
import {waitCiliumRolloutTask} from '../cilium/tasks.js'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import {
  checkRemovalTask,
  deleteNodeTask,
  drainTask,
  forgetNodeTask,
  judgeNodeRemoval,
  leaveEtcdTask,
  removalSummary,
  removeMemberTask,
  resetTask,
  type NodeRemovalInput,
  type NodeRemovalJudgement,
} from '../nodes/remove.js'
import {STACK_COMPONENTS} from '../state/installation-types.js'
import {waitApplicationsTask} from '../stack/install-tasks.js'
import {nodeProblem} from '../talos/node-address.js'
import type {RunResult, Task} from '../tasks/types.js'
import type {PlanOptions} from './options.js'
import {runOptions, runPlan, type Plan} from './run.js'

export interface NodeRemoveOptions extends PlanOptions {
  node: string
  yes: boolean
  json: boolean
  /** --unreachable: the machine that goes is gone. */
  unreachable: boolean
  talosconfig?: string
  stateDir?: string
  statePassphraseFile?: string
}

export interface NodeRemoveResult extends RunResult {
  node: string
  role: string
  nodeName?: string
  warnings: string[]
}

function nodeRemoveSteps(input: NodeRemovalInput, j: NodeRemovalJudgement): Task[] {
  return [checkRemovalTask(j), ...removalSteps(input, j)]
}

/** The steps that take a node out, after its checks (node replace runs them once NEW has joined). */
export function removalSteps(input: NodeRemovalInput, j: NodeRemovalJudgement): Task[] {
  const {session, timeoutMs} = input
  const cp = j.role === 'controlplane'
  // A gone machine cannot drain, leave or reset: its member goes through a control plane that
  // stays, and deleting its Node lets the pod garbage collector take what ran there.
  const takeOut =
    j.state === 'unreachable' ? (cp ? [removeMemberTask(input, j)] : []) : [drainTask(input, j), ...(cp ? [leaveEtcdTask(input, j)] : []), resetTask(input, j)]
  return [
    ...takeOut,
    deleteNodeTask(input, j),
    waitCiliumRolloutTask({session, kind: 'Deployment', timeoutMs}),
    waitCiliumRolloutTask({session, kind: 'DaemonSet', timeoutMs}),
    waitApplicationsTask({session, components: STACK_COMPONENTS, timeoutMs}),
    forgetNodeTask(input, j),
  ]
}

interface Prepared {
  input: NodeRemovalInput
  judgement: NodeRemovalJudgement
}

function nodeRemovePlan(o: NodeRemoveOptions): Plan<Prepared, NodeRemoveResult> {
  return {
    command: 'node remove',
    session: {kubeconfig: o.kubeconfig, context: o.context},
    talos: {talosconfig: o.talosconfig, stateDir: o.stateDir, sealed: {statePassphraseFile: o.statePassphraseFile}, missingInstallationExit: EXIT.usage},
    checkLocal: () => {
      const problem = nodeProblem(o.node)
      if (problem) throw new IchorError(`ADDR: ${problem}`, {exitCode: EXIT.usage})
    },
    async prepare({session, talos}) {
      const input: NodeRemovalInput = {session, talos, node: o.node, timeoutMs: o.timeoutMs, unreachable: o.unreachable}
      return {input, judgement: await judgeNodeRemoval(input)}
    },
    consent: ({judgement: j}) => ({
      question: `Remove ${j.role === 'controlplane' ? 'control plane' : 'worker'} ${j.node} from the cluster? ${removalSummary(j)}.`,
      preview: [
        `Node removal: ${j.node}${j.nodeName ? ` (Node ${j.nodeName})` : ''}, ${j.role === 'controlplane' ? 'control plane' : 'worker'}, ${j.state}`,
        ...(j.role === 'controlplane' ? [`  etcd members after: ${j.remainingControlPlanes.join(', ')}`] : []),
      ].join('\n'),
      warnings: j.warnings,
    }),
    steps: ({input, judgement}) => nodeRemoveSteps(input, judgement),
    result: (run, {judgement: j}, {talos}) => ({
      ...run,
      node: j.node,
      role: j.role,
      ...(j.nodeName ? {nodeName: j.nodeName} : {}),
      warnings: [...j.warnings, ...talos.warnings],
    }),
  }
}

export function runNodeRemove(o: NodeRemoveOptions): Promise<NodeRemoveResult> {
  return runPlan(nodeRemovePlan(o), runOptions(o))
}
