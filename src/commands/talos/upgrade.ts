import {Flags} from '@oclif/core'
import {IchorCommand} from '../../lib/cli/base.js'
import {talosOptions} from '../../lib/cli/bind.js'
import {planFlags, statePassphraseFlags, talosAccessFlags} from '../../lib/cli/flags.js'
import {runTalosUpgrade} from '../../lib/plans/talos-upgrade.js'

export default class TalosUpgrade extends IchorCommand {
  static override summary = 'Upgrade Talos on the nodes, one at a time, proving each node, its Node and its Cilium agent back before the next.'
  static override description = `Refused before anything runs (exit 2): a target older than a node (talosctl rollback is named), a step over a minor or a minor left before its newest patch, a target whose Talos does not run the cluster's Kubernetes (the ichor kubernetes upgrade that comes first is named), a node that does not answer, an etcd member that is not healthy.
Each node is upgraded with the installer image it was installed with, at the new tag (an Image Factory schematic keeps its extensions). Control planes first, then workers: talosctl upgrade (it drains and reboots the node), then the node must run the target, its Node be Ready and schedulable, and its Cilium agent Ready. A node that comes back on its old version (Talos's fallback after a failed boot) stops the run (exit 1).
After the last node: Cilium's operator and agents and both Applications; the version recorded in the IchorInstallation, so an init rerun keeps it and new nodes are installed at it. A run stopped anywhere, even while a node reboots, is finished by running the same command again; at the target it changes nothing. Nodes already at the target (upgraded with talosctl alone) are recorded, not upgraded again.`
  static override examples = [
    '<%= config.bin %> talos upgrade --to v1.14.1 --kubeconfig ./kubeconfig --dry-run',
    '<%= config.bin %> talos upgrade --to v1.14.1 --node 10.5.0.4 --yes',
  ]
  static override flags = {
    ...planFlags({
      timeout: 900,
      timeoutDescription: "how long each node's upgrade (drain, reboot) and each readiness step may take",
      dryRun: 'check the versions, the nodes and etcd, and show each node with its installer image; change nothing',
    }),
    ...talosAccessFlags,
    ...statePassphraseFlags,
    to: Flags.string({description: 'the Talos version to upgrade to (vMAJOR.MINOR.PATCH)', helpValue: 'VERSION', required: true}),
    node: Flags.string({description: 'upgrade only this node (repeatable; default: every node, control planes first)', helpValue: 'ADDR', multiple: true}),
  }

  async run() {
    const {flags} = await this.parse(TalosUpgrade)
    const result = await runTalosUpgrade({
      ...this.planOptions(flags),
      ...talosOptions(flags),
      to: flags.to,
      nodes: flags.node ?? [],
    })
    this.warnAll(result.warnings)
    return result
  }
}
