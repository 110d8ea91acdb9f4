import {Args} from '@oclif/core'
import {IchorCommand} from '../../lib/cli/base.js'
import {kubeFlags} from '../../lib/cli/flags.js'
import {PASSWORD_COMPONENTS, readAdminPassword, type PasswordComponent} from '../../lib/stack/password.js'

export default class StackPassword extends IchorCommand {
  static override summary = "Print a stack UI's admin password (user admin) to stdout, and nothing else."
  static override description =
    'kokumi: the password ichor generated, also shown once in the summary of the first successful ichor init. argocd: the first admin password Argo CD generated (its argocd-initial-admin-secret), until someone changes it and deletes that Secret. It goes to stdout only, never to a log.'
  static override examples = ['<%= config.bin %> stack password kokumi', '<%= config.bin %> stack password argocd --kubeconfig ./kubeconfig | pbcopy']
  static override args = {
    component: Args.string({description: 'the component whose admin password to print', options: [...PASSWORD_COMPONENTS], required: true}),
  }
  static override flags = {...kubeFlags}

  async run() {
    const {args, flags} = await this.parse(StackPassword)
    const component = args.component as PasswordComponent
    const password = await readAdminPassword(component, {kubeconfig: flags.kubeconfig, context: flags.context})
    if (!this.jsonEnabled()) process.stdout.write(`${password}\n`)
    return {component, password}
  }
}
