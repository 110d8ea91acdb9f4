import {Args} from '@oclif/core'
import {formatBackupReport} from '../../lib/backup/report.js'
import {IchorCommand} from '../../lib/cli/base.js'
import {talosOptions} from '../../lib/cli/bind.js'
import {kubeFlags, outputFormatFlag, statePassphraseFlags, talosAccessFlags, timeoutFlag} from '../../lib/cli/flags.js'
import {printResult} from '../../lib/cli/output.js'
import {runBackup} from '../../lib/plans/backup.js'

export default class Backup extends IchorCommand {
  static override summary = 'Write one encrypted file that brings the whole cluster back: an etcd snapshot, the IchorInstallation and the sealed Talos bundle.'
  static override description = `Only reads the cluster. The etcd snapshot is taken through the Talos API from a control plane whose member is healthy, as talosctl etcd snapshot takes it; it holds every Kubernetes object (the Helm release history, the stack's Secrets). The IchorInstallation (with the machine-config inputs) and the Talos secrets bundle's Secret as the cluster keeps it (sealed) go beside it, with a manifest of versions, nodes, the etcd revision and each part's sha256.
The file is encrypted with age to the key that seals the Talos bundle (--state-passphrase-file, else ICHOR_STATE_PASSPHRASE_FILE, else asked on a terminal); a key that does not open the cluster's bundle is refused. It is written 0600 and atomically (an existing FILE is replaced only by a whole new one), then read back and checked. Without FILE: <cluster>-<UTC time>.ichor-backup in the current folder.`
  static override examples = [
    '<%= config.bin %> backup --state-passphrase-file ~/.config/ichor/homelab.key',
    '<%= config.bin %> backup ~/backups/homelab-$(date +%F).ichor-backup',
    '<%= config.bin %> backup inspect ~/backups/homelab-2026-12-07.ichor-backup',
  ]
  static override args = {file: Args.string({description: 'the file to write (default: <cluster>-<UTC time>.ichor-backup here)'})}
  static override flags = {
    ...kubeFlags,
    timeout: timeoutFlag(300, 'how long the etcd snapshot may take'),
    ...talosAccessFlags,
    ...statePassphraseFlags,
    ...outputFormatFlag,
  }

  async run() {
    const {args, flags} = await this.parse(Backup)
    const json = this.jsonEnabled()
    const result = await runBackup({
      kubeconfig: flags.kubeconfig,
      context: flags.context,
      ...talosOptions(flags),
      file: args.file,
      timeoutMs: flags.timeout,
      ichorVersion: this.config.version,
      json,
    })
    this.warnAll(result.warnings)
    await printResult(result, {format: flags.output, json, human: formatBackupReport})
    return result
  }
}
