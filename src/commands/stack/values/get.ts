import {IchorCommand} from '../../../lib/cli/base.js'
import {kubeFlags, outputFormatFlag, stackComponentArgs} from '../../../lib/cli/flags.js'
import {printResult} from '../../../lib/cli/output.js'
import {getStackValues} from '../../../lib/plans/stack-values.js'
import type {StackComponent} from '../../../lib/state/installation-types.js'
import {toYaml} from '../../../lib/yaml/emit.js'

export default class StackValuesGet extends IchorCommand {
  static override summary = "Print the user layer of Argo CD's or Kokumi's values stored in the IchorInstallation."
  static override examples = ['<%= config.bin %> stack values get argocd', '<%= config.bin %> stack values get kokumi -o json']
  static override args = stackComponentArgs
  static override flags = {...kubeFlags, ...outputFormatFlag}

  async run() {
    const {args, flags} = await this.parse(StackValuesGet)
    const values = await getStackValues({component: args.component as StackComponent, kubeconfig: flags.kubeconfig, context: flags.context})
    await printResult(values, {format: flags.output, json: this.jsonEnabled(), human: (v) => toYaml(v)})
    return values
  }
}
