import {Flags} from '@oclif/core'
import {IchorCommand} from '../../lib/cli/base.js'
import {kubeFlags, lockFlags, statePassphraseFlags, talosAccessFlags, timeoutFlag, yesFlag} from '../../lib/cli/flags.js'
import {runKubernetesUpgrade} from '../../lib/plans/kubernetes-upgrade.js'
import {outputModeFor} from '../../lib/tasks/engine.js'

export default class KubernetesUpgrade extends IchorCommand {
  static override summary =
    'Upgrade Kubernetes with talosctl upgrade-k8s, after proving Talos will not prune or change Cilium, the stack or ichor, and verify they survived it.'
  static override description = `Refused before anything runs (exit 2): a target outside the installed Talos version's Kubernetes range, a step over a minor, a downgrade, or a minor Cilium is not tested on (the \`ichor cni upgrade\` that makes it compatible is named; --allow-untested goes on anyway).
Then, under the ichor-system Lease: talosctl's own dry run, refused when it would prune or change a protected object (named); talosctl upgrade-k8s; the Cilium release's objects, Talos's inventory, the agents and operator and both Applications verified; the version recorded in the IchorInstallation status.
A run stopped anywhere is finished by running the same command again; at the target version it changes nothing.`
  static override aliases = ['k8s:upgrade']
  static override examples = [
    '<%= config.bin %> kubernetes upgrade --to 1.37.1 --kubeconfig ./kubeconfig --dry-run',
    '<%= config.bin %> k8s upgrade --to 1.37.1 --talosconfig ./talosconfig --yes',
  ]
  static override flags = {
    ...kubeFlags,
    ...talosAccessFlags,
    ...statePassphraseFlags,
    to: Flags.string({description: 'the Kubernetes version to upgrade to (MAJOR.MINOR.PATCH)', helpValue: 'VERSION', required: true}),
    'allow-untested': Flags.boolean({description: "go on with a Kubernetes minor outside the installed Cilium minor's tested range (nobody tested it)"}),
    'dry-run': Flags.boolean({description: 'check the versions and show the plan; change nothing'}),
    ...yesFlag,
    timeout: timeoutFlag(900, 'how long talosctl upgrade-k8s and each readiness step may take'),
    ...lockFlags,
  }

  async run() {
    const {flags} = await this.parse(KubernetesUpgrade)
    const json = this.jsonEnabled()
    const result = await runKubernetesUpgrade({
      to: flags.to,
      allowUntested: flags['allow-untested'],
      kubeconfig: flags.kubeconfig,
      context: flags.context,
      talosconfig: flags.talosconfig,
      stateDir: flags['state-dir'],
      statePassphraseFile: flags['state-passphrase-file'],
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
