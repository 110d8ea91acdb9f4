import {Flags} from '@oclif/core'
import {assetFlags, IchorCommand} from '../../../lib/cli/base.js'
import {kubeFlags, talosAccessFlags, timeoutFlag, lockFlags} from '../../../lib/cli/flags.js'
import {VALUES_SYNTAX_HELP, valuesChangeFlags, valuesInputFrom, valuesUsage} from '../../../lib/cli/values-args.js'
import {editCiliumValues} from '../../../lib/cilium/edit.js'
import {runCniValuesSet} from '../../../lib/plans/cni-values-set.js'
import {checkCiliumChartFlag, checkCiliumValuesInput} from '../../../lib/plans/local-input.js'
import {openSession} from '../../../lib/session/session.js'
import {outputModeFor} from '../../../lib/tasks/engine.js'

export default class CniValuesEdit extends IchorCommand {
  static override summary = "Edit the user layer of Cilium's values in $VISUAL or $EDITOR, then apply it as `cni values set` does."
  static override description = 'Values that do not validate reopen the editor with the problems as comments at the top; a buffer left unchanged changes nothing.\n-f, --set and KEY=VALUE are the starting change: the editor opens with them applied to the stored layer, and saving applies them.\n' + VALUES_SYNTAX_HELP
  static override strict = false
  static override usage = valuesUsage('cni values edit')
  static override examples = [
    '<%= config.bin %> cni values edit --kubeconfig ./kubeconfig',
    'EDITOR="code --wait" <%= config.bin %> cni values edit',
    '<%= config.bin %> cni values edit hubble.relay.enabled=true',
  ]
  static override flags = {
    ...kubeFlags,
    ...valuesChangeFlags,
    ...talosAccessFlags,
    timeout: timeoutFlag(900),
    ...lockFlags,
    'cilium-chart': assetFlags['cilium-chart'],
    mirror: assetFlags.mirror,
  }

  async run() {
    const {argv, flags} = await this.parse(CniValuesEdit)
    const input = valuesInputFrom(argv, flags)
    const sources = {talosconfig: flags.talosconfig, stateDir: flags['state-dir'], chart: flags['cilium-chart'], mirror: flags.mirror}
    checkCiliumChartFlag(sources.chart)
    checkCiliumValuesInput(input) // this machine's input first, before the cluster and the editor
    const session = openSession({command: 'cni values edit', kubeconfig: flags.kubeconfig, context: flags.context})
    let edited
    try {
      edited = await editCiliumValues(await session.kube(), sources, input)
    } finally {
      await session.close()
    }
    if (!edited.user) {
      this.note('Edit cancelled: the values were left unchanged, nothing to apply.')
      return {changed: false}
    }
    const json = this.jsonEnabled()
    return runCniValuesSet({
      input: {kind: 'layer', user: edited.user, base: edited.base}, kubeconfig: flags.kubeconfig, context: flags.context, ...sources,
      // Saving the buffer was the confirmation.
      timeoutMs: flags.timeout, dryRun: false, breakLock: flags['break-lock'], yes: true, output: outputModeFor({json}),
    })
  }
}
