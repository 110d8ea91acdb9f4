import {CredentialCommand, credentialArgs, credentialFlags} from '../lib/cli/credential-command.js'

export default class Kubeconfig extends CredentialCommand {
  static override summary = "Write a fresh admin kubeconfig from a control plane, or merge it into kubectl's file."
  static override description = `Asks the first control plane that answers for a new admin kubeconfig (talosctl kubeconfig: Talos signs a fresh client certificate, valid for a year). Without PATH it is merged into kubectl's file and its context made the current one, as talosctl kubeconfig does; a context, cluster or user of the same name that differs is refused (exit 2) unless --force, and --context-name adds it under another name. With PATH the file is written whole (an existing one only with --force, or joined with --merge). Written 0600, atomically; never printed.`
  static override examples = [
    '<%= config.bin %> kubeconfig --kubeconfig ./kubeconfig',
    '<%= config.bin %> kubeconfig ./homelab.kubeconfig',
    '<%= config.bin %> kubeconfig --context-name homelab --force',
  ]
  static override args = credentialArgs('kubectl')
  static override flags = credentialFlags
  protected readonly what = 'kubeconfig'
}
