// `ichor cni kube-proxy replace|restore`: one command class, two targets. The flags, the
// description and the run are shared; each command names its target, summary and examples.
import {ciliumChartFlags, IchorCommand} from './base.js'
import {ciliumChartOptions, talosOptions} from './bind.js'
import {planFlags, statePassphraseFlags, talosAccessFlags} from './flags.js'
import {runCniKubeProxy, type CniKubeProxyResult} from '../plans/cni-kube-proxy.js'
import type {KubeProxyMode} from '../state/installation-types.js'

export const kubeProxySwitchFlags = {
  ...planFlags({timeout: 900, dryRun: 'probe every step and show the plan; change nothing'}),
  ...talosAccessFlags,
  ...statePassphraseFlags,
  ...ciliumChartFlags,
}

export abstract class KubeProxySwitchCommand extends IchorCommand {
  static override description = `Runs under the ichor-system Lease and asks for confirmation unless --yes (without a terminal, --yes is required).
The old side is turned off only after the new side is verified; a run stopped anywhere is finished by running the same command again,
and \`ichor cni status\` shows a switch left half done. The mode is recorded in the IchorInstallation (spec.cni.kubeProxy).`
  static override flags = kubeProxySwitchFlags

  /** Who handles Services when the command is done. */
  protected abstract readonly target: KubeProxyMode

  async run(): Promise<CniKubeProxyResult> {
    const {flags} = await this.parse(this.constructor as typeof KubeProxySwitchCommand)
    const result = await runCniKubeProxy({...this.planOptions(flags), ...talosOptions(flags), ...ciliumChartOptions(flags), target: this.target})
    if (result.leftover) this.warnAll([result.leftover.note])
    this.warnAll(result.warnings)
    return result
  }
}
