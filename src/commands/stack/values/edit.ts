import {stackValuesFlags, ValuesCommand} from '../../../lib/cli/base.js'
import {stackValuesOptions} from '../../../lib/cli/bind.js'
import {planFlags, stackComponentArgs} from '../../../lib/cli/flags.js'
import {VALUES_SYNTAX_HELP, valuesUsage} from '../../../lib/cli/values-args.js'
import {runStackValuesEdit} from '../../../lib/plans/stack-values.js'
import {valuesChangeLine} from '../../../lib/stack/promote.js'

export default class StackValuesEdit extends ValuesCommand {
  static override summary = "Edit the user layer of Argo CD's or Kokumi's values in $VISUAL or $EDITOR, then apply it as `stack values set` does."
  static override description =
    'Values that do not validate reopen the editor with the problems as comments at the top; a buffer left unchanged changes nothing. Saving the buffer is the confirmation.\n-f, --set and KEY=VALUE are the starting change: the editor opens with them applied to the stored layer, and saving applies them.\n' +
    VALUES_SYNTAX_HELP
  static override usage = valuesUsage('stack values edit', true)
  static override examples = [
    '<%= config.bin %> stack values edit argocd --kubeconfig ./kubeconfig',
    '$ EDITOR="code --wait" <%= config.bin %> stack values edit kokumi',
    '<%= config.bin %> stack values edit argocd server.replicas=2',
  ]
  static override args = stackComponentArgs
  static override flags = {
    ...planFlags({timeout: 900}),
    ...stackValuesFlags,
  }

  async run() {
    const {args, argv, flags} = await this.parse(StackValuesEdit)
    const json = this.jsonEnabled()
    const result = await runStackValuesEdit({
      ...this.planOptions(flags),
      ...stackValuesOptions(args.component, argv, flags, 'stack values edit'),
    })
    if (!('tag' in result)) this.note('Edit cancelled: the values were left unchanged, nothing to apply.')
    else if (!json) this.log(valuesChangeLine(result))
    return result
  }
}
