// `ichor node replace OLD NEW` as one plan under the Lease: NEW added as an init rerun would add
// it and proven Ready with its Cilium agent (a control plane: a voting etcd member), then OLD
// removed by node remove's steps. A refusal is exit 2 before anything runs.
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import {
  addToInstallationTask,
  checkReplaceTask,
  configureNewNodeTask,
  judgeNodeReplace,
  newMemberVotingTask,
  newNodeReadyTask,
  type NodeReplaceInput,
  type NodeReplaceJudgement,
} from '../nodes/replace.js'
import {nodeProblem} from '../talos/node-address.js'
import type {RunResult, Task} from '../tasks/types.js'
import {removalSummary} from '../nodes/remove.js'
import {removalSteps, type NodeRemoveOptions} from './node-remove.js'
import {runOptions, runPlan, type Plan} from './run.js'

/** node remove's options, OLD in place of its address, and NEW. */
export interface NodeReplaceOptions extends Omit<NodeRemoveOptions, 'node'> {
  old: string
  newNode: string
  movePatches: boolean
}

export interface NodeReplaceResult extends RunResult {
  old: string
  new: string
  role: string
  warnings: string[]
}

function nodeReplaceSteps(input: NodeReplaceInput, j: NodeReplaceJudgement): Task[] {
  if (!j.old) return [checkReplaceTask(input, j)]
  return [
    checkReplaceTask(input, j),
    addToInstallationTask(input, j),
    configureNewNodeTask(input, j),
    newNodeReadyTask(input, j),
    ...(j.role === 'controlplane' ? [newMemberVotingTask(input, j)] : []),
    ...removalSteps(input, j.old),
  ]
}

interface Prepared {
  input: NodeReplaceInput
  judgement: NodeReplaceJudgement
}

const roleName = (role: string) => (role === 'controlplane' ? 'control plane' : 'worker')

function nodeReplacePlan(o: NodeReplaceOptions): Plan<Prepared, NodeReplaceResult> {
  return {
    command: 'node replace',
    session: {kubeconfig: o.kubeconfig, context: o.context},
    talos: {talosconfig: o.talosconfig, stateDir: o.stateDir, sealed: {statePassphraseFile: o.statePassphraseFile}, missingInstallationExit: EXIT.usage},
    checkLocal: () => {
      for (const [name, value] of [
        ['OLD', o.old],
        ['NEW', o.newNode],
      ] as const) {
        const problem = nodeProblem(value)
        if (problem) throw new IchorError(`${name}: ${problem}`, {exitCode: EXIT.usage})
      }
    },
    async prepare({session, talos}) {
      const input: NodeReplaceInput = {
        session,
        talos,
        node: o.old,
        newNode: o.newNode,
        movePatches: o.movePatches,
        timeoutMs: o.timeoutMs,
        unreachable: o.unreachable,
      }
      return {input, judgement: await judgeNodeReplace(input)}
    },
    consent: ({judgement: j}) => ({
      question: `Replace ${roleName(j.role)} ${o.old} by ${o.newNode}? ${o.newNode} is configured and joins first; then ${o.old} goes: ${j.old ? removalSummary(j.old) : 'it is gone already'}.`,
      preview: [
        `Node replacement: ${roleName(j.role)} ${o.old}${j.old?.nodeName ? ` (Node ${j.old.nodeName})` : ''} → ${o.newNode} (${j.newState})`,
        ...(j.movedPatches ? [`  ${j.movedPatches} per-node patch(es) of ${o.old} move to ${o.newNode}`] : []),
        ...(j.old && j.role === 'controlplane' ? [`  etcd members after: ${j.old.remainingControlPlanes.join(', ')}`] : []),
      ].join('\n'),
      warnings: j.warnings,
    }),
    steps: ({input, judgement}) => nodeReplaceSteps(input, judgement),
    result: (run, {judgement: j}, {talos}) => ({...run, old: o.old, new: o.newNode, role: j.role, warnings: [...j.warnings, ...talos.warnings]}),
  }
}

export function runNodeReplace(o: NodeReplaceOptions): Promise<NodeReplaceResult> {
  return runPlan(nodeReplacePlan(o), runOptions(o))
}
