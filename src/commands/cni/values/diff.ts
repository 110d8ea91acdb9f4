import {ciliumChangeFlags, ValuesCommand} from '../../../lib/cli/base.js'
import {kubeFlags} from '../../../lib/cli/flags.js'
import {VALUES_SYNTAX_HELP, valuesChangeFlags, valuesInputFrom, valuesUsage} from '../../../lib/cli/values-args.js'
import {diffCiliumValues} from '../../../lib/cilium/diff.js'
import {paintDiff} from '../../../lib/text/diff.js'
import {checkCiliumChartFlag, checkCiliumValuesInput} from '../../../lib/plans/local-input.js'
import {withSession} from '../../../lib/session/session.js'

export default class CniValuesDiff extends ValuesCommand {
  static override summary = 'Show what a values change would do: the effective-values diff and the rendered-manifest diff against the live release.'
  static override description =
    'With no arguments, the stored user layer is compared with what the release runs (drift). Validates like `cni values set`; changes nothing.\n' +
    VALUES_SYNTAX_HELP
  static override usage = valuesUsage('cni values diff')
  static override examples = [
    '<%= config.bin %> cni values diff hubble.relay.enabled=true --kubeconfig ./kubeconfig',
    '<%= config.bin %> cni values diff -f cilium-values.yaml --replace',
  ]
  static override flags = {...kubeFlags, ...valuesChangeFlags, ...ciliumChangeFlags}

  async run() {
    const {argv, flags} = await this.parse(CniValuesDiff)
    const input = valuesInputFrom(argv, flags)
    checkCiliumChartFlag(flags['cilium-chart'])
    checkCiliumValuesInput(input)
    const diff = await withSession({command: 'cni values diff', kubeconfig: flags.kubeconfig, context: flags.context}, async (session) =>
      diffCiliumValues(await session.kube(), input, {
        talosconfig: flags.talosconfig,
        stateDir: flags['state-dir'],
        chart: flags['cilium-chart'],
        mirror: flags.mirror,
      }),
    )
    if (!this.jsonEnabled()) {
      this.log(
        diff.changed ? paintDiff(`${diff.values}${diff.manifest}`).trimEnd() : `No change: release revision ${diff.revision ?? '-'} already runs these values.`,
      )
    }
    return diff
  }
}
