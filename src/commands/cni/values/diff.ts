import {ciliumChangeOptions} from '../../../lib/cli/bind.js'
import {runCniValuesDiff} from '../../../lib/plans/cni-values-set.js'
import {ciliumChangeFlags, ValuesCommand} from '../../../lib/cli/base.js'
import {kubeFlags} from '../../../lib/cli/flags.js'
import {VALUES_SYNTAX_HELP, valuesChangeFlags, valuesInputFrom, valuesUsage} from '../../../lib/cli/values-args.js'
import {paintDiff} from '../../../lib/text/diff.js'

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
    const diff = await runCniValuesDiff({
      input: valuesInputFrom(argv, flags),
      kubeconfig: flags.kubeconfig,
      context: flags.context,
      ...ciliumChangeOptions(flags),
      json: this.jsonEnabled(),
    })
    if (!this.jsonEnabled()) {
      for (const note of diff.notes) process.stderr.write(`note: ${note}\n`)
      this.log(
        diff.changed ? paintDiff(`${diff.values}${diff.manifest}`).trimEnd() : `No change: release revision ${diff.revision ?? '-'} already runs these values.`,
      )
    }
    return diff
  }
}
