import {Args} from '@oclif/core'
import {IchorCommand} from '../../lib/cli/base.js'
import {talosOptions} from '../../lib/cli/bind.js'
import {planFlags, statePassphraseFlags, talosAccessFlags, unreachableFlag} from '../../lib/cli/flags.js'
import {runNodeRemove} from '../../lib/plans/node-remove.js'

export default class NodeRemove extends IchorCommand {
  static override summary = 'Remove a node: drain it, take it out of etcd, reset it to maintenance mode, delete its Node, forget its address.'
  static override description = `Refused before anything runs (exit 2): an address that is not a node of this cluster, the last control plane, the cluster endpoint's node, the last worker when the control planes take no workloads, a control plane whose removal would leave etcd without quorum, a node that does not answer (unless --unreachable: a machine that is gone has its etcd member removed through a control plane that stays and its Node deleted, with no drain or reset through it).
Then: the Node is cordoned and drained through the Eviction API (PodDisruptionBudgets hold; --timeout bounds the drain); a control plane's member leaves etcd through the node itself (talosctl etcd leave; if it fails nothing further happens); the node is reset through its own endpoint (talosctl reset --graceful --reboot: its disk is wiped and it boots into maintenance mode); its Node is deleted; Cilium and both Applications are checked; last, the address and its per-node patches leave the IchorInstallation, so an init rerun does not bring it back. A run stopped anywhere is finished by running the same command again.`
  static override examples = ['<%= config.bin %> node remove 10.5.0.5 --kubeconfig ./kubeconfig --dry-run', '<%= config.bin %> node remove 10.5.0.5 --yes']
  static override args = {addr: Args.string({description: 'the node address, as ichor init was given it', required: true})}
  static override flags = {
    ...planFlags({
      timeout: 600,
      timeoutDescription: "how long the drain, the node's reset and each readiness step may take",
      dryRun: 'check the address, the node and etcd, and show the steps; change nothing',
    }),
    ...unreachableFlag,
    ...talosAccessFlags,
    ...statePassphraseFlags,
  }

  async run() {
    const {args, flags} = await this.parse(NodeRemove)
    const result = await runNodeRemove({...this.planOptions(flags), ...talosOptions(flags), node: args.addr, unreachable: flags.unreachable})
    this.warnAll(result.warnings)
    return result
  }
}
