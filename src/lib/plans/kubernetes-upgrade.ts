// `ichor kubernetes upgrade` as one plan under the Lease: the version rules (also checked
// before the Lease: a refusal is exit 2 with nothing run), talosctl's own dry run read for
// what Talos would prune or change (refused when it touches Cilium, the stack or ichor), then
// `talosctl upgrade-k8s`, then the proof that everything survived it: the Cilium release's
// objects intact and Helm's, no Cilium key in Talos's inventory, the agents and operator
// ready, both Applications Synced and Healthy; the version recorded last.
import {confirmOrAbort} from '../cli/consent.js'
import {waitCiliumRolloutTask} from '../cilium/tasks.js'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import {withPrivateTempDir} from '../fs/private-files.js'
import {canPrompt, requireConsent} from '../init/prompts.js'
import {checkVersionsTask, judgeUpgrade, pruneGuardTask, recordKubernetesVersionTask, upgradeKubernetesTask, verifyCiliumObjectsTask, verifyInventoryTask, type KubernetesUpgradeInput} from '../kubernetes/upgrade.js'
import {checkKubernetesVersionFlag} from './local-input.js'
import {openSession} from '../session/session.js'
import {leaseTask} from '../session/tasks.js'
import {STACK_COMPONENTS} from '../stack/status.js'
import {waitApplicationsTask} from '../stack/tasks.js'
import {readInstallation, type Installation} from '../state/installation.js'
import {givenStateKey, missingStateKeyError, promptStateKey} from '../state/state-key.js'
import {resolveTalosconfig} from '../talos/access.js'
import {runTasks, type RunResult} from '../tasks/engine.js'
import type {Task} from '../tasks/types.js'
import type {PlanOptions} from './options.js'

export interface KubernetesUpgradeOptions extends PlanOptions {
  to: string
  allowUntested: boolean
  yes: boolean
  json: boolean
  talosconfig?: string
  stateDir?: string
  statePassphraseFile?: string
}

export interface KubernetesUpgradeResult extends RunResult {
  from: string
  to: string
  warnings: string[]
}

export function kubernetesUpgradeSteps(p: KubernetesUpgradeInput & {breakLock?: boolean}): Task[] {
  const {session, timeoutMs} = p
  return [
    leaseTask({session, breakLock: p.breakLock}),
    checkVersionsTask(p),
    pruneGuardTask(p),
    upgradeKubernetesTask(p),
    verifyCiliumObjectsTask({session}),
    verifyInventoryTask({session}),
    waitCiliumRolloutTask({session, kind: 'Deployment', timeoutMs}),
    waitCiliumRolloutTask({session, kind: 'DaemonSet', timeoutMs}),
    waitApplicationsTask({session, components: STACK_COMPONENTS, timeoutMs}),
    recordKubernetesVersionTask(p),
  ]
}

export async function runKubernetesUpgrade(o: KubernetesUpgradeOptions): Promise<KubernetesUpgradeResult> {
  checkKubernetesVersionFlag(o.to) // this machine's input first: exit 2 even when the cluster is down
  if (!o.dryRun) requireConsent({yes: o.yes, tty: !o.json && canPrompt()})
  const givenKey = await givenStateKey(o.statePassphraseFile)
  const stateKey = async () => {
    if (givenKey) return givenKey
    if (!o.json && !o.yes && canPrompt()) return promptStateKey({confirm: false})
    throw missingStateKeyError(`no talosconfig in ${o.stateDir ?? "init's state directory"} and --talosconfig not given, so the copy in the cluster is needed`)
  }
  const session = openSession({command: 'kubernetes upgrade', kubeconfig: o.kubeconfig, context: o.context})
  try {
    return await withPrivateTempDir('ichor-k8s-upgrade-', async (dir) => {
      const kube = await session.kube() // a named cluster that does not answer is exit 1 before any step
      const cr = await readInstallation(kube)
      if (!cr) throw new IchorError('this cluster has no IchorInstallation "ichor": it was not set up by ichor init', {exitCode: EXIT.usage, hint: 'run `ichor init` first'})
      let talosconfig: Promise<string> | undefined
      const input: KubernetesUpgradeInput & {breakLock?: boolean} = {
        session, to: o.to, allowUntested: o.allowUntested, timeoutMs: o.timeoutMs, breakLock: o.breakLock,
        installation: async (): Promise<Installation> => cr,
        talosconfig: () => (talosconfig ??= resolveTalosconfig(kube, cr, o, dir, stateKey)),
      }
      // Before anything runs (no Lease taken): a refused target is exit 2, nothing changed.
      const verdict = await judgeUpgrade(input)
      await confirmOrAbort(o, `Upgrade Kubernetes from ${verdict.from} to ${verdict.to} with talosctl upgrade-k8s, then verify Cilium and the stack?`)
      const result = await runTasks(kubernetesUpgradeSteps(input), {output: o.output, dryRun: o.dryRun, stream: o.stream, guard: () => session.guard()})
      return {...result, from: verdict.from, to: verdict.to, warnings: verdict.warnings}
    })
  } finally {
    await session.close()
  }
}
