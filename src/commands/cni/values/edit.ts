import {ciliumChangeFlags, ValuesCommand} from '../../../lib/cli/base.js'
import {ciliumChangeOptions} from '../../../lib/cli/bind.js'
import {planFlags} from '../../../lib/cli/flags.js'
import {VALUES_SYNTAX_HELP, valuesChangeFlags, valuesInputFrom, valuesUsage} from '../../../lib/cli/values-args.js'
import {runCniValuesEdit} from '../../../lib/plans/cni-values-set.js'

export default class CniValuesEdit extends ValuesCommand {
  static override summary = "Edit the user layer of Cilium's values in $VISUAL or $EDITOR, then apply it as `cni values set` does."
  static override description =
    'Values that do not validate reopen the editor with the problems as comments at the top; a buffer left unchanged changes nothing.\n-f, --set and KEY=VALUE are the starting change: the editor opens with them applied to the stored layer, and saving applies them.\nSaving the buffer is the confirmation (without a terminal, --yes is required).\n' +
    VALUES_SYNTAX_HELP
  static override usage = valuesUsage('cni values edit')
  static override examples = [
    '<%= config.bin %> cni values edit --kubeconfig ./kubeconfig',
    '$ EDITOR="code --wait" <%= config.bin %> cni values edit',
    '<%= config.bin %> cni values edit hubble.relay.enabled=true',
  ]
  static override flags = {
    ...planFlags({timeout: 900}),
    ...valuesChangeFlags,
    ...ciliumChangeFlags,
  }

  async run() {
    const {argv, flags} = await this.parse(CniValuesEdit)
    const input = valuesInputFrom(argv, flags)
    const result = await runCniValuesEdit({...this.planOptions(flags), ...ciliumChangeOptions(flags), input})
    if (!('values' in result)) this.note('Edit cancelled: the values were left unchanged, nothing to apply.')
    return result
  }
}
