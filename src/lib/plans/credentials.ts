// `ichor kubeconfig` and `ichor talosconfig`: read plans (no Lease, nothing in the cluster
// changes). The runner opens the session and the Talos access from the flags; the talosconfig
// follows the one rule (this machine's, else the sealed copy in the cluster).
import {writeAdminKubeconfig, writeTalosconfig, type CredentialReport, type CredentialRequest} from '../credentials/admin.js'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import type {ReadAccessOptions} from './options.js'
import {runReadPlan, type ReadPlan} from './run.js'

export interface CredentialsOptions extends CredentialRequest, ReadAccessOptions {}

export type CredentialsResult = CredentialReport & {warnings: string[]}

function checkRequest(o: CredentialsOptions): void {
  if (o.contextName !== undefined && !/^[A-Za-z0-9][A-Za-z0-9@._:-]*$/.test(o.contextName))
    throw new IchorError(`--context-name: "${o.contextName}" is not a context name (letters, digits and @ . _ : -, starting with a letter or digit)`, {
      exitCode: EXIT.usage,
    })
}

function credentialsPlan(what: 'kubeconfig' | 'talosconfig', o: CredentialsOptions): ReadPlan<CredentialsResult> {
  return {
    command: what,
    session: {kubeconfig: o.kubeconfig, context: o.context},
    talos: {talosconfig: o.talosconfig, stateDir: o.stateDir, sealed: {statePassphraseFile: o.statePassphraseFile}},
    tempDir: 'ichor-credentials-',
    checkLocal: () => checkRequest(o),
    read: async ({talos, tempDir}) => ({
      ...(what === 'kubeconfig' ? await writeAdminKubeconfig(talos, tempDir, o) : await writeTalosconfig(talos, o)),
      warnings: talos.warnings,
    }),
  }
}

export function runWriteKubeconfig(o: CredentialsOptions): Promise<CredentialsResult> {
  return runReadPlan(credentialsPlan('kubeconfig', o), o)
}

export function runWriteTalosconfig(o: CredentialsOptions): Promise<CredentialsResult> {
  return runReadPlan(credentialsPlan('talosconfig', o), o)
}
