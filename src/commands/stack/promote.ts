import {Args, Flags} from '@oclif/core'
import {IchorCommand} from '../../lib/cli/base.js'
import {kubeFlags, lockFlags, timeoutFlag, yesFlag} from '../../lib/cli/flags.js'
import {runStackPromotePlan} from '../../lib/plans/stack-promote.js'
import type {StackComponent} from '../../lib/stack/policies.js'
import {outputModeFor} from '../../lib/tasks/engine.js'

export default class StackPromote extends IchorCommand {
  static override summary = "Serve a component's newest Preparation when its Order waits for approval (promotion Manual)."
  static override examples = ['<%= config.bin %> stack promote argocd', '<%= config.bin %> stack promote kokumi --json']
  static override args = {component: Args.string({description: 'the stack component', options: ['argocd', 'kokumi'], required: true})}
  static override flags = {
    ...kubeFlags,
    timeout: timeoutFlag(900),
    ...lockFlags,
    'dry-run': Flags.boolean({description: 'change nothing: probe and show what would run'}),
    ...yesFlag,
  }

  async run() {
    const {args, flags} = await this.parse(StackPromote)
    const json = this.jsonEnabled()
    const result = await runStackPromotePlan({
      component: args.component as StackComponent,
      kubeconfig: flags.kubeconfig,
      context: flags.context,
      timeoutMs: flags.timeout,
      output: outputModeFor({json}),
      dryRun: flags['dry-run'],
      breakLock: flags['break-lock'],
      yes: flags.yes,
      json,
    })
    if (!json)
      this.log(result.changed ? `\n${args.component}: the newest Preparation is served.` : `\n${args.component}: already serving its newest Preparation.`)
    return result
  }
}
