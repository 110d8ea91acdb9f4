import {IchorCommand, stackSourceFlags} from '../../lib/cli/base.js'
import {stackSourceOptions} from '../../lib/cli/bind.js'
import {planFlags, registryEndpointFlag} from '../../lib/cli/flags.js'
import {runStackSyncPlan} from '../../lib/plans/stack-sync.js'
import {awaitingLines} from '../../lib/stack/promote.js'

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
    ...planFlags({timeout: 900, dryRun: 'change nothing: probe and show what would run'}),
    ...registryEndpointFlag,
    ...stackSourceFlags,
  }

  async run() {
    const {flags} = await this.parse(StackSync)
    const json = this.jsonEnabled()
    const result = await runStackSyncPlan({
      ...this.planOptions(flags),
      registryEndpoint: flags['registry-endpoint'],
      sources: stackSourceOptions(flags, 'stack sync'),
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
