import {Args, Flags} from '@oclif/core'
import {allowUnpinnedFlag, assetFlags, IchorCommand} from '../../../lib/cli/base.js'
import {kubeFlags, lockFlags, registryEndpointFlag, timeoutFlag, yesFlag} from '../../../lib/cli/flags.js'
import {VALUES_SYNTAX_HELP, valuesChangeFlags, valuesInputFrom, valuesUsage} from '../../../lib/cli/values-args.js'
import {runStackValuesSetPlan} from '../../../lib/plans/stack-values.js'
import type {StackComponent} from '../../../lib/stack/policies.js'
import {awaitingLines} from '../../../lib/stack/promote.js'
import {outputModeFor} from '../../../lib/tasks/engine.js'

export default class StackValuesSet extends IchorCommand {
  static override summary = "Change Argo CD's or Kokumi's user values: republish the bundle and move the component's Order."
  static override description = `-f files, --set and KEY=VALUE arguments are merged onto the stored user layer (with --replace they replace it).
${VALUES_SYNTAX_HELP}`
  static override strict = false
  static override usage = valuesUsage('stack values set', true)
  static override examples = [
    '<%= config.bin %> stack values set argocd server.replicas=2',
    '<%= config.bin %> stack values set kokumi -f kokumi-values.yaml --json',
    '<%= config.bin %> stack values set argocd --set configs.params.server\\.insecure=null',
  ]
  static override args = {component: Args.string({description: 'the stack component', options: ['argocd', 'kokumi'], required: true})}
  static override flags = {
    ...valuesChangeFlags,
    ...kubeFlags,
    ...registryEndpointFlag,
    timeout: timeoutFlag(900),
    ...lockFlags,
    'dry-run': Flags.boolean({description: 'change nothing: validate, probe and show what would run'}),
    'argocd-chart': assetFlags['argocd-chart'],
    'kokumi-manifest': assetFlags['kokumi-manifest'],
    mirror: assetFlags.mirror,
    ...allowUnpinnedFlag,
    ...yesFlag,
  }

  async run() {
    const {args, argv, flags} = await this.parse(StackValuesSet)
    const json = this.jsonEnabled()
    const result = await runStackValuesSetPlan({
      component: args.component as StackComponent,
      input: valuesInputFrom(argv.slice(1), flags),
      kubeconfig: flags.kubeconfig,
      context: flags.context,
      registryEndpoint: flags['registry-endpoint'],
      sources: {
        argocdChart: flags['argocd-chart'],
        kokumiManifest: flags['kokumi-manifest'],
        mirror: flags.mirror,
        pinning: {command: 'ichor stack values set', dryRun: flags['dry-run'], allowUnpinned: flags['allow-unpinned']},
      },
      timeoutMs: flags.timeout,
      output: outputModeFor({json}),
      dryRun: flags['dry-run'],
      breakLock: flags['break-lock'],
      yes: flags.yes,
      json,
    })
    if (!json)
      this.log(
        result.changed
          ? `\n${result.component} is at ${result.tag} (${result.digest.slice(0, 19)}).${awaitingLines(result.awaitingApproval)}`
          : `\n${result.component} already has these values: nothing changed.${awaitingLines(result.awaitingApproval)}`,
      )
    return result
  }
}
