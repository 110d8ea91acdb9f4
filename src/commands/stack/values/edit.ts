import {Args} from '@oclif/core'
import {allowUnpinnedFlag, assetFlags, IchorCommand} from '../../../lib/cli/base.js'
import {kubeFlags, lockFlags, registryEndpointFlag, timeoutFlag, yesFlag} from '../../../lib/cli/flags.js'
import {VALUES_SYNTAX_HELP, valuesChangeFlags, valuesInputFrom, valuesUsage} from '../../../lib/cli/values-args.js'
import {runStackValuesEdit} from '../../../lib/plans/stack-values.js'
import type {StackComponent} from '../../../lib/stack/policies.js'
import {awaitingLines} from '../../../lib/stack/promote.js'
import {outputModeFor} from '../../../lib/tasks/engine.js'

export default class StackValuesEdit extends IchorCommand {
  static override summary = "Edit the user layer of Argo CD's or Kokumi's values in $VISUAL or $EDITOR, then apply it as `stack values set` does."
  static override description =
    'Values that do not validate reopen the editor with the problems as comments at the top; a buffer left unchanged changes nothing. Saving the buffer is the confirmation.\n-f, --set and KEY=VALUE are the starting change: the editor opens with them applied to the stored layer, and saving applies them.\n' +
    VALUES_SYNTAX_HELP
  static override strict = false
  static override usage = valuesUsage('stack values edit', true)
  static override examples = [
    '<%= config.bin %> stack values edit argocd --kubeconfig ./kubeconfig',
    'EDITOR="code --wait" <%= config.bin %> stack values edit kokumi',
    '<%= config.bin %> stack values edit argocd server.replicas=2',
  ]
  static override args = {component: Args.string({description: 'the stack component', options: ['argocd', 'kokumi'], required: true})}
  static override flags = {
    ...kubeFlags,
    ...registryEndpointFlag,
    ...valuesChangeFlags,
    timeout: timeoutFlag(900),
    ...lockFlags,
    'argocd-chart': assetFlags['argocd-chart'],
    'kokumi-manifest': assetFlags['kokumi-manifest'],
    mirror: assetFlags.mirror,
    ...allowUnpinnedFlag,
    ...yesFlag,
  }

  async run() {
    const {args, argv, flags} = await this.parse(StackValuesEdit)
    const json = this.jsonEnabled()
    const result = await runStackValuesEdit({
      component: args.component as StackComponent,
      input: valuesInputFrom(argv.slice(1), flags),
      kubeconfig: flags.kubeconfig,
      context: flags.context,
      registryEndpoint: flags['registry-endpoint'],
      sources: {
        argocdChart: flags['argocd-chart'],
        kokumiManifest: flags['kokumi-manifest'],
        mirror: flags.mirror,
        pinning: {command: 'ichor stack values edit', dryRun: false, allowUnpinned: flags['allow-unpinned']},
      },
      timeoutMs: flags.timeout,
      output: outputModeFor({json}),
      breakLock: flags['break-lock'],
      yes: flags.yes,
      json,
    })
    if (!('tag' in result)) this.note('Edit cancelled: the values were left unchanged, nothing to apply.')
    else if (!json)
      this.log(
        result.changed
          ? `\n${result.component} is at ${result.tag} (${result.digest.slice(0, 19)}).${awaitingLines(result.awaitingApproval)}`
          : `\n${result.component} already has these values: nothing changed.${awaitingLines(result.awaitingApproval)}`,
      )
    return result
  }
}
