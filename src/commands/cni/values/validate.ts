import {Flags} from '@oclif/core'
import {resolveAsset, describeAsset} from '../../../lib/assets/resolve.js'
import {assetFlags, ciliumChartFlags, ValuesCommand} from '../../../lib/cli/base.js'
import {ciliumModeFlags} from '../../../lib/cli/values-flags.js'
import {VALUES_SYNTAX_HELP, valuesFlags, valuesInputFrom, valuesUsage} from '../../../lib/cli/values-args.js'
import type {KubeProxyMode, TunnelProtocol} from '../../../lib/state/installation-types.js'
import {newUserLayer} from '../../../lib/values/layer.js'
import {validateCiliumValues} from '../../../lib/cilium/validate.js'
import {ValidationError} from '../../../lib/errors/errors.js'

export default class CniValuesValidate extends ValuesCommand {
  static override summary = 'Check a user layer of Cilium values offline: owned keys, unknown keys, chart schema, size, guards, and a chart render.'
  static override description = VALUES_SYNTAX_HELP
  static override usage = valuesUsage('cni values validate')
  static override examples = [
    '<%= config.bin %> cni values validate -f my-values.yaml',
    '<%= config.bin %> cni values validate --set hubble.relay.enabled=true hubble.ui.enabled=true',
    '<%= config.bin %> cni values validate -f v.yaml --kube-proxy kube-proxy --forward-kube-dns-to-host false --json',
  ]
  static override flags = {
    ...valuesFlags,
    ...ciliumModeFlags,
    'forward-kube-dns-to-host': Flags.string({
      description: "Talos's hostDNS.forwardKubeDNSToHost (unknown when omitted: its guard passes with a note)",
      options: ['true', 'false'],
    }),
    'gateway-api-crds': Flags.string({description: 'whether the Gateway API CRDs are installed (unknown when omitted)', options: ['present', 'absent']}),
    ...ciliumChartFlags,
    'assets-dir': assetFlags['assets-dir'],
    'show-effective': Flags.boolean({description: 'print the effective values (YAML) on stdout when valid; the verdict goes to stderr'}),
  }

  async run() {
    const {argv, flags} = await this.parse(CniValuesValidate)
    const input = valuesInputFrom(argv, flags)
    const chart = resolveAsset('cilium', {override: flags['cilium-chart'], mirror: flags.mirror, assetsDir: flags['assets-dir']})
    this.note(describeAsset(chart))
    const user = newUserLayer({}, input)
    const report = await validateCiliumValues({
      chartPath: chart.path,
      user,
      facts: {
        kubeProxy: flags['kube-proxy'] as KubeProxyMode,
        tunnel: flags.tunnel as TunnelProtocol,
        forwardKubeDNSToHost: flags['forward-kube-dns-to-host'] === undefined ? undefined : flags['forward-kube-dns-to-host'] === 'true',
        gatewayApiCrds: flags['gateway-api-crds'] as 'present' | 'absent' | undefined,
      },
    })
    const result = {valid: report.valid, chart: report.chart, issues: report.issues, notes: report.notes, effective: report.effective}
    for (const note of report.notes) this.note(`note: ${note}`)
    // Invalid values are bad input: the one error shape (README, "JSON output"), with and without --json.
    if (!report.valid) throw new ValidationError('Cilium values are invalid', report.issues)
    if (this.jsonEnabled()) return result
    const verdict = `Cilium values are valid for ${report.chart.name} ${report.chart.version} (${flags['kube-proxy']}, ${flags.tunnel}).`
    if (!flags['show-effective']) {
      this.log(verdict)
      return result
    }
    // stdout holds only the effective values, so `> effective.yaml` or a pipe gets one document.
    this.note(verdict)
    const {stringify} = await import('yaml')
    process.stdout.write(stringify(report.effective))
    return result
  }
}
