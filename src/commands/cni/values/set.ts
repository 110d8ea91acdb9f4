import {stringify} from 'yaml'
import {ciliumChangeFlags, ValuesCommand} from '../../../lib/cli/base.js'
import {ciliumChartOptions, talosOptions} from '../../../lib/cli/bind.js'
import {planFlags} from '../../../lib/cli/flags.js'
import {VALUES_SYNTAX_HELP, valuesChangeFlags, valuesInputFrom, valuesUsage} from '../../../lib/cli/values-args.js'
import {paintDiff} from '../../../lib/text/diff.js'
import {runCniValuesSet} from '../../../lib/plans/cni-values-set.js'

export default class CniValuesSet extends ValuesCommand {
  static override summary =
    "Change Cilium's values: validate with the live cluster's facts, helm upgrade (rollback on failure), wait, record in the IchorInstallation."
  static override description = `-f files, --set and KEY=VALUE arguments (helm's --set syntax) are merged onto the stored user layer (with --replace they replace it).
With no arguments the stored user layer is applied again: this recovers a release an interrupted run left pending and records the applied hash.
The same values twice change nothing (no new Helm revision).
${VALUES_SYNTAX_HELP}`
  static override usage = valuesUsage('cni values set')
  static override examples = [
    '<%= config.bin %> cni values set hubble.relay.enabled=true hubble.ui.enabled=true --kubeconfig ./kubeconfig',
    '<%= config.bin %> cni values set -f cilium-values.yaml --set hubble.ui.enabled=true --replace --dry-run',
  ]
  static override flags = {
    ...planFlags({timeout: 900, dryRun: 'validate and show the plan; change nothing'}),
    ...valuesChangeFlags,
    ...ciliumChangeFlags,
  }

  async run() {
    const {argv, flags} = await this.parse(CniValuesSet)
    const json = this.jsonEnabled()
    const result = await runCniValuesSet({
      ...this.planOptions(flags),
      ...talosOptions(flags),
      ...ciliumChartOptions(flags),
      input: valuesInputFrom(argv, flags),
    })
    if (!json && flags['dry-run']) {
      this.log(`\nThe user layer would become:\n${stringify(result.values.user).trimEnd()}\n`)
      this.log(result.diff ? paintDiff(result.diff).trimEnd() : 'The effective values would not change.')
    }
    return result
  }
}
