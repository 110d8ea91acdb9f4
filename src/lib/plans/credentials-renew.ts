// `ichor credentials renew` as one plan under the Lease: the talosconfig this machine uses, the
// kubeconfig in use and the talosconfig in the cluster's sealed bundle, each renewed when its
// client certificate is due (credentials/renew.ts), the old files kept beside as FILE.bak.
import {
  kubeconfigFileOfUser,
  freshTalosCertificate,
  kubeconfigRenewal,
  talosconfigRenewal,
  renewKubeconfigTask,
  renewSealedTalosconfigTask,
  renewTalosconfigTask,
  type RenewInput,
} from '../credentials/renew.js'
import {EXIT} from '../errors/exit-codes.js'
import type {RunResult, Task} from '../tasks/types.js'
import type {PlanOptions} from './options.js'
import {runOptions, runPlan, type Plan} from './run.js'

export interface CredentialsRenewOptions extends PlanOptions {
  force: boolean
  yes: boolean
  json: boolean
  talosconfig?: string
  stateDir?: string
  statePassphraseFile?: string
}

export interface CredentialsRenewResult extends RunResult {
  /** The files whose credentials this run replaced, each kept before as FILE.bak. */
  files: {kind: 'talosconfig' | 'kubeconfig'; path: string; backup: string}[]
  warnings: string[]
}

interface Prepared {
  input: RenewInput
  kubeconfigFile?: string
  kubeconfigUser: string
  talosconfigFile?: string
  warnings: string[]
}

function renewPlan(o: CredentialsRenewOptions): Plan<Prepared, CredentialsRenewResult> {
  return {
    command: 'credentials renew',
    session: {kubeconfig: o.kubeconfig, context: o.context},
    tempDir: 'ichor-renew-',
    talos: {talosconfig: o.talosconfig, stateDir: o.stateDir, sealed: {statePassphraseFile: o.statePassphraseFile}, missingInstallationExit: EXIT.usage},
    async prepare({session, talos, tempDir}) {
      await talos.installation() // exit 2 on a cluster ichor did not set up
      const config = (await session.kube()).kubeconfig
      const kubeconfigFile = kubeconfigFileOfUser(config)
      const talosconfigFile = await talos.localTalosconfig()
      const warnings: string[] = []
      if (!kubeconfigFile)
        warnings.push(`the kubeconfig's user "${config.userName}" is not in a file ichor can rewrite (${config.source}): it is left as it is`)
      if (!talosconfigFile)
        warnings.push("this machine has no talosconfig (none given, none in init's state folder): only the cluster's sealed copy is renewed")
      return {input: {session, talos, tempDir, force: o.force}, kubeconfigFile, kubeconfigUser: config.userName, talosconfigFile, warnings}
    },
    consent: (p) => ({
      question: 'Renew the client certificates that are due, keeping the old files as FILE.bak?',
      preview: [
        ...(p.talosconfigFile ? [`talosconfig ${p.talosconfigFile}: ${talosconfigRenewal(p.talosconfigFile, o.force).detail}`] : []),
        ...(p.kubeconfigFile
          ? [`kubeconfig ${p.kubeconfigFile} (user "${p.kubeconfigUser}"): ${kubeconfigRenewal(p.kubeconfigFile, p.kubeconfigUser, o.force).detail}`]
          : []),
        "the talosconfig in the cluster's sealed bundle: checked when the steps run (it needs the passphrase)",
      ].join('\n'),
      warnings: p.warnings,
    }),
    steps: (p) => {
      const fresh = freshTalosCertificate(p.input)
      const steps: Task[] = []
      if (p.talosconfigFile) steps.push(renewTalosconfigTask(p.input, p.talosconfigFile, fresh))
      if (p.kubeconfigFile) steps.push(renewKubeconfigTask(p.input, p.kubeconfigUser, p.kubeconfigFile))
      steps.push(renewSealedTalosconfigTask(p.input, fresh))
      return steps
    },
    result: (run, p, {talos}) => {
      const done = new Set(run.tasks.filter((t) => t.status === 'done').map((t) => t.id))
      const files: CredentialsRenewResult['files'] = []
      if (p.talosconfigFile && done.has('renew-talosconfig')) files.push({kind: 'talosconfig', path: p.talosconfigFile, backup: `${p.talosconfigFile}.bak`})
      if (p.kubeconfigFile && done.has('renew-kubeconfig')) files.push({kind: 'kubeconfig', path: p.kubeconfigFile, backup: `${p.kubeconfigFile}.bak`})
      return {...run, files, warnings: [...p.warnings, ...talos.warnings]}
    },
  }
}

export function runCredentialsRenew(o: CredentialsRenewOptions): Promise<CredentialsRenewResult> {
  return runPlan(renewPlan(o), runOptions(o))
}
