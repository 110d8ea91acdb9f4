import {Flags} from '@oclif/core'
import {IchorCommand} from '../../../lib/cli/base.js'
import {kubeFlags, outputFormatFlag} from '../../../lib/cli/flags.js'
import {printResult} from '../../../lib/cli/output.js'
import {getCiliumValues} from '../../../lib/cilium/values-get.js'
import {withSession} from '../../../lib/session/session.js'
import {toYaml} from '../../../lib/yaml/emit.js'

export default class CniValuesGet extends IchorCommand {
  static override summary = "Print the user layer of Cilium's values as the IchorInstallation stores it, or the effective values."
  static override examples = ['<%= config.bin %> cni values get --kubeconfig ./kubeconfig', '<%= config.bin %> cni values get --effective -o json']
  static override flags = {
    ...kubeFlags,
    effective: Flags.boolean({description: 'the effective values: ichor defaults, then the user layer, then the ichor-owned keys'}),
    ...outputFormatFlag,
  }

  async run() {
    const {flags} = await this.parse(CniValuesGet)
    const values = await withSession({command: 'cni values get', kubeconfig: flags.kubeconfig, context: flags.context}, async (session) =>
      getCiliumValues(await session.kube(), {effective: flags.effective}),
    )
    await printResult(values, {format: flags.output, json: this.jsonEnabled(), human: (v) => toYaml(v)})
    return values
  }
}
