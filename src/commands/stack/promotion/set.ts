import {Args} from '@oclif/core'
import {IchorCommand} from '../../../lib/cli/base.js'
import {planFlags} from '../../../lib/cli/flags.js'
import {runStackPromotionSetPlan} from '../../../lib/plans/stack-promotion.js'
import type {PromotionMode} from '../../../lib/state/installation-types.js'
import {awaitingLines} from '../../../lib/stack/promote.js'

export default class StackPromotionSet extends IchorCommand {
  static override summary = 'Switch how Kokumi promotes new bundles on an existing cluster: Automatic, or Manual (each waits for ichor stack promote).'
  static override description =
    'Stores the mode, moves both Orders and relabels their Preparations so Kokumi keeps to it after a restart. Manual keeps serving what is served now; Automatic serves each newest bundle and waits for Argo CD.'
  static override examples = ['<%= config.bin %> stack promotion set Manual', '<%= config.bin %> stack promotion set Automatic --json']
  static override args = {mode: Args.string({description: 'the promotion mode', options: ['Automatic', 'Manual'], required: true})}
  static override flags = planFlags({timeout: 900, dryRun: 'change nothing: probe and show what would run'})

  async run() {
    const {args, flags} = await this.parse(StackPromotionSet)
    const json = this.jsonEnabled()
    const result = await runStackPromotionSetPlan({...this.planOptions(flags), mode: args.mode as PromotionMode})
    if (!json) this.log(`\n${result.changed ? 'Promotion is now' : 'Promotion is already'} ${result.promotion}.${awaitingLines(result.awaitingApproval)}`)
    return result
  }
}
