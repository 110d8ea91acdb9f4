// `ichor kubeconfig` and `ichor talosconfig`: where the credentials go, as `talosctl kubeconfig
// [local-path]` and `talosctl config merge` take it, and the one run both share.
import {Args, Flags} from '@oclif/core'
import {formatCredentialReport} from '../credentials/report.js'
import {runWriteKubeconfig, runWriteTalosconfig, type CredentialsResult} from '../plans/credentials.js'
import {IchorCommand} from './base.js'
import {talosOptions} from './bind.js'
import {kubeFlags, statePassphraseFlags, talosAccessFlags} from './flags.js'
import {printResult} from './output.js'

export function credentialArgs(tool: 'kubectl' | 'talosctl') {
  const fallback = tool === 'kubectl' ? 'the first file of KUBECONFIG, else ~/.kube/config' : 'TALOSCONFIG, else ~/.talos/config'
  return {path: Args.string({description: `the file to write (default: merge into ${fallback})`})}
}

export const credentialFlags = {
  ...kubeFlags,
  ...talosAccessFlags,
  ...statePassphraseFlags,
  merge: Flags.boolean({description: 'merge into PATH instead of writing it whole (the default without PATH)'}),
  'context-name': Flags.string({description: 'name the context (and its cluster and user) NAME instead of what Talos names it', helpValue: 'NAME'}),
  force: Flags.boolean({description: 'replace a context of the same name that differs, or an existing PATH'}),
}

export abstract class CredentialCommand extends IchorCommand {
  /** Which credentials the command writes. */
  protected abstract readonly what: 'kubeconfig' | 'talosconfig'

  async run(): Promise<CredentialsResult> {
    const {args, flags} = await this.parse()
    // The subclass's statics are credentialFlags and credentialArgs (parse reads them through the chain).
    const f = flags as unknown as {
      kubeconfig?: string
      context?: string
      talosconfig?: string
      'state-dir'?: string
      'state-passphrase-file'?: string
      merge: boolean
      'context-name'?: string
      force: boolean
    }
    const json = this.jsonEnabled()
    const options = {
      kubeconfig: f.kubeconfig,
      context: f.context,
      ...talosOptions(f),
      output: (args as {path?: string}).path,
      merge: f.merge,
      force: f.force,
      contextName: f['context-name'],
      json,
    }
    const result = await (this.what === 'kubeconfig' ? runWriteKubeconfig(options) : runWriteTalosconfig(options))
    this.warnAll(result.warnings)
    await printResult(result, {format: undefined, json, human: formatCredentialReport})
    return result
  }
}
