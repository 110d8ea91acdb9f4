import {IchorCommand} from '../../lib/cli/base.js'
import {talosOptions} from '../../lib/cli/bind.js'
import {kubeFlags, outputFormatFlag, statePassphraseFlags, talosAccessFlags} from '../../lib/cli/flags.js'
import {printResult} from '../../lib/cli/output.js'
import {runTalosStatus} from '../../lib/plans/talos-status.js'
import {formatTalosStatus} from '../../lib/talos/status-text.js'

export default class TalosStatus extends IchorCommand {
  static override summary = "Show each Talos node's Talos and Kubernetes versions against what the IchorInstallation records."
  static override description = `Asks every node the IchorInstallation names, in one talosctl call for the versions and one for the machine configs.
Exit code 0 when every node answers, 1 when one does not; a node that runs another version than the recorded one (changed with talosctl alone) is a warning with what to do.`
  static override examples = ['<%= config.bin %> talos status --kubeconfig ./kubeconfig', '<%= config.bin %> talos status --talosconfig ./talosconfig -o yaml']
  static override flags = {...kubeFlags, ...talosAccessFlags, ...statePassphraseFlags, ...outputFormatFlag}

  async run() {
    const {flags} = await this.parse(TalosStatus)
    const json = this.jsonEnabled()
    const report = await runTalosStatus({kubeconfig: flags.kubeconfig, context: flags.context, ...talosOptions(flags), json})
    this.warnAll(report.warnings)
    await printResult(report, {format: flags.output, json, human: formatTalosStatus, failed: (r) => !r.healthy})
    return report
  }
}
