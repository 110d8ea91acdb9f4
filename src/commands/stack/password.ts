import {Args} from '@oclif/core'
import {IchorCommand} from '../../lib/cli/base.js'
import {kubeFlags} from '../../lib/cli/flags.js'
import {readKokumiAdminPassword} from '../../lib/stack/password.js'

export default class StackPassword extends IchorCommand {
  static override summary = "Print a stack component's generated admin password (Kokumi's UI login) to stdout, and nothing else."
  static override description =
    'The password is shown once in the summary of the first successful ichor init; this prints it on demand. It goes to stdout only, never to a log.'
  static override examples = ['<%= config.bin %> stack password kokumi', '<%= config.bin %> stack password kokumi --kubeconfig ./kubeconfig | pbcopy']
  static override args = {component: Args.string({description: 'the component whose admin password ichor generated', options: ['kokumi'], required: true})}
  static override flags = {...kubeFlags}

  async run() {
    const {flags} = await this.parse(StackPassword)
    const password = await readKokumiAdminPassword({kubeconfig: flags.kubeconfig, context: flags.context})
    if (!this.jsonEnabled()) process.stdout.write(`${password}\n`)
    return {component: 'kokumi', password}
  }
}
