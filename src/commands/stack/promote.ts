import {IchorCommand} from '../../lib/cli/base.js'
import {planFlags, stackComponentArgs} from '../../lib/cli/flags.js'
import {runStackPromotePlan} from '../../lib/plans/stack-promote.js'
import type {StackComponent} from '../../lib/state/installation-types.js'

export default class StackPromote extends IchorCommand {
  static override summary = "Serve a component's newest Preparation when its Order waits for approval (promotion Manual)."
  static override examples = ['<%= config.bin %> stack promote argocd', '<%= config.bin %> stack promote kokumi --json']
  static override args = stackComponentArgs
  static override flags = planFlags({timeout: 900, dryRun: 'change nothing: probe and show what would run'})

  async run() {
    const {args, flags} = await this.parse(StackPromote)
    const json = this.jsonEnabled()
    const result = await runStackPromotePlan({...this.planOptions(flags), component: args.component as StackComponent})
    if (!json)
      this.log(result.changed ? `\n${args.component}: the newest Preparation is served.` : `\n${args.component}: already serving its newest Preparation.`)
    return result
  }
}
