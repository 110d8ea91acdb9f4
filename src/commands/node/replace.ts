import {Args, Flags} from '@oclif/core'
import {IchorCommand} from '../../lib/cli/base.js'
import {talosOptions} from '../../lib/cli/bind.js'
import {planFlags, statePassphraseFlags, talosAccessFlags, unreachableFlag} from '../../lib/cli/flags.js'
import {runNodeReplace} from '../../lib/plans/node-replace.js'

export default class NodeReplace extends IchorCommand {
  static override summary = 'Replace a node by a new machine: NEW joins first (same role), then OLD is removed as node remove removes it.'
  static override description = `NEW is a machine in maintenance mode (or one an earlier run already configured). Refused before anything runs (exit 2): OLD is not a node of this cluster or is the cluster endpoint's node, NEW does not answer, is configured from another bundle or lacks the install disk, or etcd would lose quorum.
Then: NEW is written into the IchorInstallation (--move-patches gives it OLD's per-node patches); NEW gets the config init would give it (this cluster's secrets, the stored patches, the installer image the cluster's nodes run); its Node must be Ready with its Cilium agent, and a control plane's etcd member must be a voting member, not a learner; only then is OLD drained, taken out of etcd, reset to maintenance mode, its Node deleted and its address forgotten (with --unreachable, for an OLD that is gone: its member removed through a control plane that stays and its Node deleted). A run stopped anywhere is finished by running the same command again.`
  static override examples = [
    '<%= config.bin %> node replace 10.5.0.5 10.5.0.9 --dry-run',
    '<%= config.bin %> node replace 10.5.0.5 10.5.0.9 --move-patches --yes',
  ]
  static override args = {
    old: Args.string({description: 'the node that goes, as ichor init was given it', required: true}),
    new: Args.string({description: 'the machine that takes its place (Talos in maintenance mode)', required: true}),
  }
  static override flags = {
    ...planFlags({
      timeout: 600,
      timeoutDescription: "how long NEW may take to join, OLD's drain and reset, and each readiness step",
      dryRun: 'check both machines, the install disk and etcd, and show the steps; change nothing',
    }),
    'move-patches': Flags.boolean({description: "give OLD's per-node patches (--node-patch) to NEW", default: false}),
    ...unreachableFlag,
    ...talosAccessFlags,
    ...statePassphraseFlags,
  }

  async run() {
    const {args, flags} = await this.parse(NodeReplace)
    const result = await runNodeReplace({
      ...this.planOptions(flags),
      ...talosOptions(flags),
      old: args.old,
      newNode: args.new,
      movePatches: flags['move-patches'],
      unreachable: flags.unreachable,
    })
    this.warnAll(result.warnings)
    return result
  }
}
