import {Flags} from '@oclif/core'
import {IchorCommand} from '../../lib/cli/base.js'
import {talosOptions} from '../../lib/cli/bind.js'
import {planFlags, statePassphraseFlags, talosAccessFlags} from '../../lib/cli/flags.js'
import {runCredentialsRenew} from '../../lib/plans/credentials-renew.js'

export default class CredentialsRenew extends IchorCommand {
  static override summary = 'Renew the client certificates of the talosconfig, the kubeconfig and the sealed copy in the cluster that end within 30 days.'
  static override description = `The talosconfig this machine uses (--talosconfig, else init's state folder) gets a new admin certificate signed with the cluster's secrets bundle, as talosctl gen config issues it (valid for a year); the kubeconfig in use gets the credentials of a fresh admin kubeconfig from a control plane (talosctl kubeconfig); the talosconfig kept in the cluster's sealed bundle gets the same new certificate, sealed again with the same passphrase. Each file is copied to FILE.bak (0600) before it is replaced, and only the cluster's entry in it changes. A credential whose certificate is valid for more than 30 days is left alone unless --force. The kubeconfig must still work: once it has expired, get a fresh one with talosctl -n CONTROL_PLANE kubeconfig first.`
  static override examples = [
    '<%= config.bin %> credentials renew --dry-run',
    '<%= config.bin %> credentials renew --yes',
    '<%= config.bin %> credentials renew --force --yes',
  ]
  static override flags = {
    ...planFlags({
      timeout: 120,
      timeoutDescription: 'how long a control plane may take to hand out a kubeconfig',
      dryRun: 'say which certificates are due; change nothing',
    }),
    force: Flags.boolean({description: 'renew certificates that are not due yet too', default: false}),
    ...talosAccessFlags,
    ...statePassphraseFlags,
  }

  async run() {
    const {flags} = await this.parse(CredentialsRenew)
    const result = await runCredentialsRenew({...this.planOptions(flags), ...talosOptions(flags), force: flags.force})
    this.warnAll(result.warnings)
    return result
  }
}
