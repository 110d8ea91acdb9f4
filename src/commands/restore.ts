import {Flags} from '@oclif/core'
import {IchorCommand, installFlags} from '../lib/cli/base.js'
import {kubeFlags, statePassphraseFlags, yesFlag} from '../lib/cli/flags.js'
import {renderInitSummary} from '../lib/init/summary.js'
import {restore} from '../lib/plans/restore.js'
import {installSources} from '../lib/cli/bind.js'

export default class Restore extends IchorCommand {
  static override summary = 'Bring a whole cluster back from an `ichor backup` file onto machines in maintenance mode.'
  static override description = `The machines (the same addresses or new ones) must be in maintenance mode, and no cluster may answer at the endpoint; anything else is refused (exit 2) before a node is touched, as is a file the key does not open or whose parts differ from its manifest.
The nodes get the machine configs of the backup's Talos secrets bundle, so the cluster keeps its identity: its certificates, tokens and kubeconfigs stay valid. The first control plane bootstraps etcd from the backup's snapshot (talosctl bootstrap --recover-from), and the rest converges as ichor init does: Cilium's Helm release and the stack come back from etcd, the bundles the registry lost are published again and the Orders point at the same digests. Killed at any point, the same command run again continues.`
  static override examples = [
    '<%= config.bin %> restore --from homelab-20261207T061500Z.ichor-backup --control-plane 192.0.2.10 --worker 192.0.2.11',
    '$ ICHOR_STATE_PASSPHRASE_FILE=~/.config/ichor/homelab.key <%= config.bin %> restore --yes --from ./last.ichor-backup --control-plane 192.0.2.20 --endpoint https://192.0.2.20:6443',
  ]
  static override flags = {
    from: Flags.string({description: 'the backup file (`ichor backup`)', helpValue: 'FILE', required: true}),
    'control-plane': Flags.string({description: 'control-plane machine in maintenance mode (repeat for more)', helpValue: 'IP', multiple: true}),
    worker: Flags.string({description: 'worker machine in maintenance mode (repeat for more)', helpValue: 'IP', multiple: true}),
    endpoint: Flags.string({description: "Kubernetes API endpoint of the restored cluster (default: the backup's)", helpValue: 'URL'}),
    'state-dir': Flags.string({
      description: 'local state directory the Talos secrets, configs and kubeconfig are written into; default: $XDG_STATE_HOME/ichor/<cluster>',
      helpValue: 'DIR',
    }),
    ...statePassphraseFlags,
    ...yesFlag,
    ...kubeFlags,
    kubeconfig: Flags.string({
      description: "kubeconfig of the restored cluster, to continue a restore from another machine (default: the state directory's)",
      helpValue: 'FILE',
    }),
    ...installFlags,
  }

  async run() {
    const {flags: f} = await this.parse(Restore)
    const json = this.jsonEnabled()
    const outcome = await restore({
      ...this.planOptions(f),
      from: f.from,
      controlPlanes: f['control-plane'] ?? [],
      workers: f.worker ?? [],
      endpoint: f.endpoint,
      sources: installSources(f),
      allowUnpinned: f['allow-unpinned'],
      stateDir: f['state-dir'],
      statePassphraseFile: f['state-passphrase-file'],
      registryEndpoint: f['registry-endpoint'],
    })
    if (!json) this.log(`Restored from ${outcome.from}.\n${renderInitSummary(outcome.inputs, outcome.result)}`)
    return {...outcome.result, restoredFrom: outcome.from}
  }
}
