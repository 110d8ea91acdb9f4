import {Flags} from '@oclif/core'
import {allowUnpinnedFlag, assetFlags, IchorCommand} from '../../lib/cli/base.js'
import {kubeFlags, lockFlags, registryEndpointFlag, timeoutFlag, yesFlag} from '../../lib/cli/flags.js'
import {runStackSyncPlan} from '../../lib/plans/stack-sync.js'
import {awaitingLines} from '../../lib/stack/promote.js'
import {outputModeFor} from '../../lib/tasks/engine.js'

export default class StackSync extends IchorCommand {
  static override summary = "Republish the bundles Kokumi's registry lost (same digests) and have Kokumi render them again."
  static override description =
    'A no-op when the registry holds everything (changed: false with --json). Pass the artifacts the cluster was installed with when they are not the pinned ones.'
  static override examples = [
    '<%= config.bin %> stack sync',
    '<%= config.bin %> stack sync --dry-run',
    '<%= config.bin %> stack sync --kubeconfig ./kubeconfig --registry-endpoint http://127.0.0.1:5000 --json',
  ]
  static override flags = {
    ...kubeFlags,
    ...registryEndpointFlag,
    timeout: timeoutFlag(900),
    ...lockFlags,
    'dry-run': Flags.boolean({description: 'change nothing: probe and show what would run'}),
    'argocd-chart': assetFlags['argocd-chart'],
    'kokumi-manifest': assetFlags['kokumi-manifest'],
    mirror: assetFlags.mirror,
    ...allowUnpinnedFlag,
    ...yesFlag,
  }

  async run() {
    const {flags} = await this.parse(StackSync)
    const json = this.jsonEnabled()
    const result = await runStackSyncPlan({
      kubeconfig: flags.kubeconfig,
      context: flags.context,
      registryEndpoint: flags['registry-endpoint'],
      sources: {
        argocdChart: flags['argocd-chart'],
        kokumiManifest: flags['kokumi-manifest'],
        mirror: flags.mirror,
        pinning: {command: 'ichor stack sync', dryRun: flags['dry-run'], allowUnpinned: flags['allow-unpinned']},
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
        (result.changed
          ? result.dryRun
            ? '\nDry run: the steps marked "would run" are what a real run changes.'
            : '\nThe stack is back in line.'
          : '\nNothing to do: the registry holds everything and Kokumi serves it.') + awaitingLines(result.awaitingApproval),
      )
    return result
  }
}
