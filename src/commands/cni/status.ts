import {IchorCommand} from '../../lib/cli/base.js'
import {kubeFlags, outputFormatFlag, talosAccessFlags} from '../../lib/cli/flags.js'
import {printResult} from '../../lib/cli/output.js'
import {readCniStatus} from '../../lib/cilium/status.js'
import {formatCniStatus} from '../../lib/cilium/status-text.js'
import {withSession} from '../../lib/session/session.js'

export default class CniStatus extends IchorCommand {
  static override summary = 'Show the Cilium release against the desired state: values, chart, kube-proxy mode, readiness and the Talos hand-over.'
  static override description = 'Exit code 0 when healthy, 1 when degraded; every problem is shown with the command that fixes it.'
  static override examples = ['<%= config.bin %> cni status --kubeconfig ./kubeconfig', '<%= config.bin %> cni status --talosconfig ./talosconfig -o yaml']
  static override flags = {...kubeFlags, ...talosAccessFlags, ...outputFormatFlag}

  async run() {
    const {flags} = await this.parse(CniStatus)
    const report = await withSession({command: 'cni status', kubeconfig: flags.kubeconfig, context: flags.context}, async (session) =>
      readCniStatus(await session.kube(), {talosconfig: flags.talosconfig, stateDir: flags['state-dir']}),
    )
    await printResult(report, {format: flags.output, json: this.jsonEnabled(), human: formatCniStatus, failed: (r) => !r.healthy})
    return report
  }
}
