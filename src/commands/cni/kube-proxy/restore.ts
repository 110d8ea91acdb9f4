import {IchorCommand} from '../../../lib/cli/base.js'
import {kubeProxySwitchFlags} from '../../../lib/cli/kube-proxy-flags.js'
import {runCniKubeProxy} from '../../../lib/plans/cni-kube-proxy.js'
import {outputModeFor} from '../../../lib/tasks/engine.js'

export default class CniKubeProxyRestore extends IchorCommand {
  static override summary =
    "Bring kube-proxy back: kube-proxy on in the Talos machine configs and its DaemonSet ready first, then Cilium's kubeProxyReplacement off."
  static override description = `Runs under the ichor-system Lease and asks for confirmation unless --yes (without a terminal, --yes is required).
The old side is turned off only after the new side is verified; a run stopped anywhere is finished by running the same command again,
and \`ichor cni status\` shows a switch left half done. The mode is recorded in the IchorInstallation (spec.cni.kubeProxy).`
  static override examples = [
    '<%= config.bin %> cni kube-proxy restore --kubeconfig ./kubeconfig --dry-run',
    '<%= config.bin %> cni kube-proxy restore --kubeconfig ./kubeconfig --talosconfig ./talosconfig --yes',
  ]
  static override flags = kubeProxySwitchFlags

  async run() {
    const {flags} = await this.parse(CniKubeProxyRestore)
    const json = this.jsonEnabled()
    const result = await runCniKubeProxy({
      target: 'kube-proxy',
      kubeconfig: flags.kubeconfig,
      context: flags.context,
      talosconfig: flags.talosconfig,
      stateDir: flags['state-dir'],
      statePassphraseFile: flags['state-passphrase-file'],
      chart: flags['cilium-chart'],
      mirror: flags.mirror,
      timeoutMs: flags.timeout,
      dryRun: flags['dry-run'],
      breakLock: flags['break-lock'],
      yes: flags.yes,
      json,
      output: outputModeFor({json}),
    })
    if (!json) for (const w of result.warnings) this.warn(w)
    return result
  }
}
