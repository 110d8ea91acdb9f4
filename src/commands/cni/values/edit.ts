import {Flags} from '@oclif/core'
import {assetFlags, IchorCommand} from '../../../lib/cli/base.js'
import {kubeFlags, talosAccessFlags, timeoutFlag, lockFlags} from '../../../lib/cli/flags.js'
import {editCiliumValues} from '../../../lib/cilium/edit.js'
import {runCniValuesSet} from '../../../lib/plans/cni-values-set.js'
import {checkCiliumChartFlag} from '../../../lib/plans/local-input.js'
import {openSession} from '../../../lib/session/session.js'
import {outputModeFor} from '../../../lib/tasks/engine.js'

export default class CniValuesEdit extends IchorCommand {
  static override summary = "Edit the user layer of Cilium's values in $VISUAL or $EDITOR, then apply it as `cni values set` does."
  static override description = 'Values that do not validate reopen the editor with the problems as comments at the top; a buffer left unchanged changes nothing.'
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
  }

  async run() {
    const {flags} = await this.parse(CniValuesEdit)
    const sources = {talosconfig: flags.talosconfig, stateDir: flags['state-dir'], chart: flags['cilium-chart'], mirror: flags.mirror}
    checkCiliumChartFlag(sources.chart)
    const session = openSession({command: 'cni values edit', kubeconfig: flags.kubeconfig, context: flags.context})
    let edited
    try {
      edited = await editCiliumValues(await session.kube(), sources)
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
