// `ichor cni kube-proxy replace|restore` (ADR-0099 decision 9) as one plan under the Lease.
// The new side is turned on and verified before the old side is turned off:
//   replace: Cilium's replacement on (helm upgrade through the values engine), cilium-config
//            and the rollout verified, then kube-proxy off on Talos and its DaemonSet gone;
//   restore: kube-proxy on in Talos and its DaemonSet ready, then Cilium's replacement off.
// The mode is recorded in the IchorInstallation first (the switch's intent), so a run that
// stops anywhere leaves a state `cni status` names and the same command completes.
import {prepareKubeProxySwitch, recordKubeProxyModeTask, verifyCiliumConfigTask} from '../cilium/kube-proxy.js'
import type {ChangeSources} from '../cilium/change.js'
import type {KubeProxyMode} from '../state/installation-types.js'
import {recordCiliumValuesTask, upgradeCiliumValuesTask, validateCiliumValuesTask, waitCiliumRolloutTask} from '../cilium/tasks.js'
import {EXIT} from '../errors/exit-codes.js'
import {checkCiliumChartFlag} from './local-input.js'
import type {Session} from '../session/session.js'
import type {Installation} from '../state/installation.js'
import {kubeProxyNftablesLeftover, kubeProxyNodes, type KubeProxyLeftover} from '../talos/kube-proxy.js'
import {removeKubeProxyTask, switchKubeProxyOnTalosTask, waitKubeProxyTask, type KubeProxyTalosInput} from '../talos/tasks.js'
import type {RunResult} from '../tasks/types.js'
import type {Task} from '../tasks/types.js'
import type {PlanOptions} from './options.js'
import {runOptions, runPlan, type Plan} from './run.js'
import {once} from '../tasks/memo.js'

export interface CniKubeProxyOptions extends ChangeSources, PlanOptions {
  target: KubeProxyMode
  /** --yes: no confirmation. Without it a real run asks on a terminal and refuses without one. */
  yes: boolean
  /** --json: never prompt. */
  json: boolean
  /** --state-passphrase-file: the key of the Talos bundle in the cluster, needed when no talosconfig is at hand. */
  statePassphraseFile?: string
}

export interface CniKubeProxyResult extends RunResult {
  /** The mode the IchorInstallation held when the command started, and the one it switches to. */
  from: KubeProxyMode
  to: KubeProxyMode
  /** The effective values hash of the new mode. */
  hash: string
  /** replace: what the removed kube-proxy left on the nodes (its nftables tables until a reboot). */
  leftover?: KubeProxyLeftover
  /** Accepted but unwise: a passphrase under 12 characters opened the sealed Talos bundle. */
  warnings: string[]
}

type Change = ReturnType<typeof prepareKubeProxySwitch>

function kubeProxySteps(session: Session, o: CniKubeProxyOptions, change: () => Change, talos: KubeProxyTalosInput): Task[] {
  const {timeoutMs, target} = o
  const cilium = [
    upgradeCiliumValuesTask({session, change, timeoutMs}),
    waitCiliumRolloutTask({session, kind: 'Deployment', timeoutMs}),
    waitCiliumRolloutTask({session, kind: 'DaemonSet', timeoutMs}),
    verifyCiliumConfigTask({session, target, timeoutMs}),
  ]
  const start = [validateCiliumValuesTask({change}), recordKubeProxyModeTask({session, target})]
  const record = recordCiliumValuesTask({session, change})
  if (target === 'replaced') {
    return [...start, ...cilium, switchKubeProxyOnTalosTask({...talos, enabled: false}), removeKubeProxyTask(talos), record]
  }
  return [...start, switchKubeProxyOnTalosTask({...talos, enabled: true}), waitKubeProxyTask({session, timeoutMs}), ...cilium, record]
}

interface Prepared {
  from: KubeProxyMode
  cr: Installation
  nodes: string
  change: () => Change
  talos: KubeProxyTalosInput
}

function cniKubeProxyPlan(o: CniKubeProxyOptions): Plan<Prepared, CniKubeProxyResult> {
  return {
    command: `cni kube-proxy ${o.target === 'replaced' ? 'replace' : 'restore'}`,
    session: {kubeconfig: o.kubeconfig, context: o.context},
    talos: {talosconfig: o.talosconfig, stateDir: o.stateDir, sealed: {statePassphraseFile: o.statePassphraseFile}, missingInstallationExit: EXIT.usage},
    checkLocal: () => checkCiliumChartFlag(o.chart), // this machine's input first: exit 2 even when the cluster is down
    async prepare({session, talos}) {
      const kube = await session.kube()
      const cr = await talos.installation()
      return {
        from: cr.spec.cni.kubeProxy,
        cr,
        nodes: kubeProxyNodes(cr.spec.talos)
          .map((n) => n.node)
          .join(', '),
        change: once(() => prepareKubeProxySwitch(kube, o.target, {...o, talos})),
        talos: {session, talos},
      }
    },
    consent({from, nodes}) {
      const what =
        o.target === 'replaced'
          ? `Cilium replaces kube-proxy, then kube-proxy is turned off on ${nodes}`
          : `kube-proxy is turned on on ${nodes}, then Cilium stops replacing it`
      return `Switch the kube-proxy mode from "${from}" to "${o.target}": ${what}?`
    },
    // The cluster's sealed copy is opened before any step: a missing or wrong key is exit 2, nothing changed.
    afterConsent: async (_, {talos}) => void (await talos.talosconfig()),
    steps: ({change, talos}, {session}) => kubeProxySteps(session, o, change, talos),
    async result(run, {from, cr, change}, {talos}) {
      // A run that turned kube-proxy off says what it could not remove from the nodes.
      const leftover = o.target === 'replaced' && !o.dryRun && run.changed ? kubeProxyNftablesLeftover(cr.spec.talos) : undefined
      return {...run, from, to: o.target, hash: (await change()).hash, warnings: talos.warnings, ...(leftover ? {leftover} : {})}
    },
  }
}

export function runCniKubeProxy(o: CniKubeProxyOptions): Promise<CniKubeProxyResult> {
  return runPlan(cniKubeProxyPlan(o), runOptions(o))
}
