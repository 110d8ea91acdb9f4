import {stackValuesFlags, ValuesCommand} from '../../../lib/cli/base.js'
import {stackValuesOptions} from '../../../lib/cli/bind.js'
import {planFlags, stackComponentArgs} from '../../../lib/cli/flags.js'
import {VALUES_SYNTAX_HELP, valuesUsage} from '../../../lib/cli/values-args.js'
import {runStackValuesSetPlan} from '../../../lib/plans/stack-values.js'
import {valuesChangeLine} from '../../../lib/stack/promote.js'

export default class StackValuesSet extends ValuesCommand {
  static override summary = "Change Argo CD's or Kokumi's user values: republish the bundle and move the component's Order."
  static override description = `-f files, --set and KEY=VALUE arguments are merged onto the stored user layer (with --replace they replace it).
${VALUES_SYNTAX_HELP}`
  static override usage = valuesUsage('stack values set', true)
  static override examples = [
    '<%= config.bin %> stack values set argocd server.replicas=2',
    '<%= config.bin %> stack values set kokumi -f kokumi-values.yaml --json',
    '<%= config.bin %> stack values set argocd --set configs.params.server\\.insecure=null',
  ]
  static override args = stackComponentArgs
  static override flags = {
    ...planFlags({timeout: 900, dryRun: 'change nothing: validate, probe and show what would run'}),
    ...stackValuesFlags,
  }

  async run() {
    const {args, argv, flags} = await this.parse(StackValuesSet)
    const json = this.jsonEnabled()
    const result = await runStackValuesSetPlan({
      ...this.planOptions(flags),
      ...stackValuesOptions(args.component, argv, flags, 'stack values set'),
    })
    if (!json) this.log(valuesChangeLine(result))
    return result
  }
}
