import {Flags} from '@oclif/core'
import {ciliumChangeFlags, IchorCommand} from '../../lib/cli/base.js'
import {ciliumChartOptions, talosOptions} from '../../lib/cli/bind.js'
import {planFlags} from '../../lib/cli/flags.js'
import {paintDiff} from '../../lib/text/diff.js'
import {runCniUpgrade} from '../../lib/plans/cni-upgrade.js'

export default class CniUpgrade extends IchorCommand {
  static override summary =
    'Upgrade Cilium as its upgrade guide requires: one minor at a time, values checked against the new chart, the pre-flight check, helm upgrade with rollback, recorded in the IchorInstallation.'
  static override description = `The target chart: --cilium-chart FILE, else --to VERSION from the fetched assets or the mirror (--mirror / ICHOR_MIRROR), else the chart this ichor pins.
A downgrade or a step over a minor version is refused (exit 2) before anything runs, naming the versions in between.
A minor step from an older patch than the newest one ichor knows of the current minor is refused too (Cilium's upgrade guide: latest patch first), unless --skip-patch-check.
Live Cilium objects the target minor removes or rejects (its upgrade notes: for 1.19 CiliumBGPPeeringPolicy, policies with fromRequires/toRequires) are refused too (exit 2), each named, unless --skip-removed-api-check; what it deprecates is a warning.
The stored user layer is kept; upgradeCompatibility stays the minor first installed.`
  static override examples = [
    '<%= config.bin %> cni upgrade --to 1.19.6 --mirror ./charts --kubeconfig ./kubeconfig --dry-run',
    '<%= config.bin %> cni upgrade --cilium-chart cilium-1.19.6.tgz --yes',
  ]
  static override flags = {
    ...planFlags({timeout: 900, dryRun: 'check and show the plan and the values diff; change nothing'}),
    ...ciliumChangeFlags,
    to: Flags.string({description: 'the Cilium version to upgrade to (found in the fetched assets or the mirror)', helpValue: 'VERSION'}),
    'skip-patch-check': Flags.boolean({
      description:
        "allow a minor upgrade from an older patch than the newest ichor knows of the current minor (Cilium's upgrade guide moves to that patch first)",
    }),
    'skip-removed-api-check': Flags.boolean({
      description: "go on with a minor upgrade over live Cilium objects the target minor's upgrade notes remove or reject (each is named in a warning)",
    }),
  }

  async run() {
    const {flags} = await this.parse(CniUpgrade)
    const json = this.jsonEnabled()
    const result = await runCniUpgrade({
      ...this.planOptions(flags),
      ...talosOptions(flags),
      ...ciliumChartOptions(flags),
      to: flags.to,
      skipPatchCheck: flags['skip-patch-check'],
      skipRemovedApiCheck: flags['skip-removed-api-check'],
    })
    if (!json) {
      this.log(`\n${result.chart}`)
      this.warnAll(result.warnings)
      if (flags['dry-run']) this.log(result.diff ? paintDiff(result.diff).trimEnd() : 'The effective values would not change.')
    }
    return result
  }
}
