import {IchorCommand} from '../lib/cli/base.js'
import {talosOptions} from '../lib/cli/bind.js'
import {kubeFlags, outputFormatFlag, talosAccessFlags} from '../lib/cli/flags.js'
import {printResult} from '../lib/cli/output.js'
import {formatClusterStatus} from '../lib/overview/report.js'
import {runStatus} from '../lib/plans/status.js'

export default class Status extends IchorCommand {
  static override summary = 'Show the whole cluster at a glance: nodes, Kubernetes, Cilium, the stack, the Lease and the next upgrade.'
  static override description = `Read-only and fast: no Lease, no helm, no registry, and no passphrase (the Talos versions come from this machine's talosconfig when it has one).
Exit code 0 when healthy, 1 when something is not, each problem named with the command that shows it in depth (ichor cni status, ichor stack status, ichor talos status).`
  static override examples = ['<%= config.bin %> status', '<%= config.bin %> status --kubeconfig ./kubeconfig -o json']
  static override flags = {...kubeFlags, ...talosAccessFlags, ...outputFormatFlag}

  async run() {
    const {flags} = await this.parse(Status)
    const json = this.jsonEnabled()
    const report = await runStatus({kubeconfig: flags.kubeconfig, context: flags.context, ...talosOptions(flags), json})
    await printResult(report, {format: flags.output, json, human: formatClusterStatus, failed: (r) => !r.healthy})
    return report
  }
}
