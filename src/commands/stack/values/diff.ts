import {assetFlags, ValuesCommand} from '../../../lib/cli/base.js'
import {kubeFlags, registryEndpointFlag, stackComponentArgs} from '../../../lib/cli/flags.js'
import {VALUES_SYNTAX_HELP, valuesChangeFlags, valuesInputFrom, valuesUsage} from '../../../lib/cli/values-args.js'
import {paintDiff} from '../../../lib/text/diff.js'
import {runStackValuesDiff} from '../../../lib/plans/stack-values.js'
import type {StackComponent} from '../../../lib/state/installation-types.js'

export default class StackValuesDiff extends ValuesCommand {
  static override summary =
    "Show what a values change of Argo CD or Kokumi would do: the effective-values diff and the bundle's objects against what ichor last published."
  static override description =
    'With no KEY=VALUE or -f, the stored user layer is compared with the published bundle (a change stored but not published shows). Validates like `stack values set`; changes nothing.\n' +
    VALUES_SYNTAX_HELP
  static override usage = valuesUsage('stack values diff', true)
  static override examples = [
    '<%= config.bin %> stack values diff argocd server.replicas=2 --kubeconfig ./kubeconfig',
    '<%= config.bin %> stack values diff kokumi -f kokumi-values.yaml --replace',
  ]
  static override args = stackComponentArgs
  static override flags = {
    ...kubeFlags,
    ...registryEndpointFlag,
    ...valuesChangeFlags,
    'argocd-chart': assetFlags['argocd-chart'],
    'kokumi-manifest': assetFlags['kokumi-manifest'],
    mirror: assetFlags.mirror,
  }

  async run() {
    const {args, argv, flags} = await this.parse(StackValuesDiff)
    const input = valuesInputFrom(argv.slice(1), flags)
    const diff = await runStackValuesDiff({
      component: args.component as StackComponent,
      input,
      kubeconfig: flags.kubeconfig,
      context: flags.context,
      registryEndpoint: flags['registry-endpoint'],
      sources: {argocdChart: flags['argocd-chart'], kokumiManifest: flags['kokumi-manifest'], mirror: flags.mirror},
    })
    if (!this.jsonEnabled()) {
      this.log(
        diff.changed
          ? paintDiff(`${diff.values}${diff.manifest}`).trimEnd()
          : `No change: ${diff.component} ${diff.published?.tag ?? '-'} already holds these values.`,
      )
    }
    return diff
  }
}
