import {CredentialCommand, credentialArgs, credentialFlags} from '../lib/cli/credential-command.js'

export default class Talosconfig extends CredentialCommand {
  static override summary = "Write the cluster's talosconfig, aimed at its control planes, or merge it into talosctl's file."
  static override description = `The talosconfig of the cluster's bundle: this machine's (init's state folder, --talosconfig), else the sealed copy in the cluster (the passphrase or age key is asked). Its endpoints are set to the control planes and its default node to the first, so talosctl works at once. Without PATH it is merged into talosctl's file and made the current context, as talosctl config merge does; a context of the same name that differs is refused (exit 2) unless --force, and --context-name adds it under another name. With PATH the file is written whole (an existing one only with --force, or joined with --merge). Written 0600, atomically; never printed.`
  static override examples = [
    '<%= config.bin %> talosconfig --kubeconfig ./kubeconfig',
    '<%= config.bin %> talosconfig ./homelab.talosconfig',
    '<%= config.bin %> talosconfig --context-name homelab --force',
  ]
  static override args = credentialArgs('talosctl')
  static override flags = credentialFlags
  protected readonly what = 'talosconfig'
}
