import {Flags} from '@oclif/core'
import {IchorCommand} from '../../lib/cli/base.js'
import {talosOptions} from '../../lib/cli/bind.js'
import {kubeFlags, outputFormatFlag, statePassphraseFlags, talosAccessFlags} from '../../lib/cli/flags.js'
import {printResult} from '../../lib/cli/output.js'
import {runUpgradePlan} from '../../lib/plans/upgrade-plan.js'
import {formatUpgradePlan} from '../../lib/upgrade-plan/report.js'

export default class UpgradePlan extends IchorCommand {
  static override summary = 'Show the ordered upgrades (Talos, Cilium, Kubernetes) from what the cluster runs to a tested combination.'
  static override description = `Read-only: reads the Talos version of every node, the Kubernetes version of the control planes' configs and the Cilium release, takes no Lease and changes nothing.
Each hop is one command (ichor talos upgrade, ichor cni upgrade, ichor kubernetes upgrade) with why it comes where it does and the source of its rule, from the compatibility data (assets/compatibility.json, or a newer revision ichor assets fetch --from DIR stored).
The target is this ichor's tested default set (what a fresh init installs); --to-latest plans to the newest combination the data allows. A component already newer than the target stays where it is: nothing goes down.
Under a Cilium hop that crosses a minor it names the live objects that minor removes or rejects (ichor cni upgrade refuses them) or deprecates; -o json has them under removedApis.
Exit code 0 with a plan (or nothing to do), 1 when the cluster cannot be read.`
  static override examples = ['<%= config.bin %> upgrade plan --kubeconfig ./kubeconfig', '<%= config.bin %> upgrade plan --to-latest -o json']
  static override flags = {
    ...kubeFlags,
    ...talosAccessFlags,
    ...statePassphraseFlags,
    ...outputFormatFlag,
    'to-latest': Flags.boolean({description: "plan to the newest combination the compatibility data allows, not this ichor's default set"}),
  }

  async run() {
    const {flags} = await this.parse(UpgradePlan)
    const json = this.jsonEnabled()
    const report = await runUpgradePlan({kubeconfig: flags.kubeconfig, context: flags.context, ...talosOptions(flags), json, toLatest: flags['to-latest']})
    this.warnAll(report.warnings)
    await printResult(report, {format: flags.output, json, human: formatUpgradePlan})
    return report
  }
}
