import {assetFlags, IchorCommand} from '../../../lib/cli/base.js'
import {kubeFlags, talosAccessFlags, timeoutFlag, lockFlags, yesFlag} from '../../../lib/cli/flags.js'
import {runCniValuesEdit} from '../../../lib/plans/cni-values-set.js'
import {outputModeFor} from '../../../lib/tasks/engine.js'

export default class CniValuesEdit extends IchorCommand {
  static override summary = "Edit the user layer of Cilium's values in $VISUAL or $EDITOR, then apply it as `cni values set` does."
  static override description = 'Values that do not validate reopen the editor with the problems as comments at the top; a buffer left unchanged changes nothing. Saving the buffer is the confirmation (without a terminal, --yes is required).'
  static override examples = [
    '<%= config.bin %> cni values edit --kubeconfig ./kubeconfig',
    'EDITOR="code --wait" <%= config.bin %> cni values edit',
  ]
  static override flags = {
    ...kubeFlags,
    ...talosAccessFlags,
    timeout: timeoutFlag(900),
    ...lockFlags,
    'cilium-chart': assetFlags['cilium-chart'],
    mirror: assetFlags.mirror,
    ...yesFlag,
  }

  async run() {
    const {flags} = await this.parse(CniValuesEdit)
    const json = this.jsonEnabled()
    const result = await runCniValuesEdit({
      kubeconfig: flags.kubeconfig, context: flags.context, talosconfig: flags.talosconfig, stateDir: flags['state-dir'], chart: flags['cilium-chart'], mirror: flags.mirror,
      timeoutMs: flags.timeout, breakLock: flags['break-lock'], yes: flags.yes, json, output: outputModeFor({json}),
    })
    if (!('values' in result)) this.note('Edit cancelled: the values were left unchanged, nothing to apply.')
    return result
  }
}
