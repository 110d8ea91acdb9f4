import {Flags} from '@oclif/core'
import {IchorCommand} from '../../lib/cli/base.js'
import {talosOptions} from '../../lib/cli/bind.js'
import {planFlags, statePassphraseFlags, talosAccessFlags} from '../../lib/cli/flags.js'
import {runKubernetesUpgrade} from '../../lib/plans/kubernetes-upgrade.js'

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
    ...planFlags({
      timeout: 900,
      timeoutDescription: 'how long talosctl upgrade-k8s and each readiness step may take',
      dryRun: 'check the versions and show the plan; change nothing',
    }),
    ...talosAccessFlags,
    ...statePassphraseFlags,
    to: Flags.string({description: 'the Kubernetes version to upgrade to (MAJOR.MINOR.PATCH)', helpValue: 'VERSION', required: true}),
    'allow-untested': Flags.boolean({description: "go on with a Kubernetes minor outside the installed Cilium minor's tested range (nobody tested it)"}),
  }

  async run() {
    const {flags} = await this.parse(KubernetesUpgrade)
    const result = await runKubernetesUpgrade({
      ...this.planOptions(flags),
      ...talosOptions(flags),
      to: flags.to,
      allowUntested: flags['allow-untested'],
    })
    this.warnAll(result.warnings)
    return result
  }
}
