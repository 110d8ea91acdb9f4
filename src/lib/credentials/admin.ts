// The admin credentials of the cluster, written where the operator's tools look for them.
// The kubeconfig is a fresh one from a control plane (`talosctl kubeconfig`: Talos signs a new
// admin client certificate, valid for a year, with the cluster's Kubernetes CA); the
// talosconfig is the one of the cluster's bundle (this machine's state folder, else the sealed
// copy in the cluster), its endpoints and default node set to the control planes so talosctl
// works at once. Either is written 0600, atomically, never printed.
import {readFileSync} from 'node:fs'
import {join} from 'node:path'
import {parse as parseYaml, stringify} from 'yaml'
import {IchorError} from '../errors/errors.js'
import type {TalosAccess} from '../talos/access.js'
import {certificateOf} from '../talos/credential-expiry.js'
import {kubeconfig as fetchKubeconfig, TalosctlError} from '../talos/talosctl.js'
import {
  mergeKubeconfig,
  mergeTalosconfig,
  planCredentialWrite,
  renameKubeconfig,
  writeCredentialFile,
  type CredentialTarget,
  type KubeconfigFile,
  type TalosconfigFile,
} from './merge.js'

export interface CredentialRequest extends CredentialTarget {
  /** --context NAME: the name of the context (and of its cluster and user) written. */
  contextName?: string
}

export interface CredentialReport {
  /** The file written (or that already held exactly these credentials). */
  path: string
  /** The context the file's current context now is. */
  context: string
  merged: boolean
  changed: boolean
  /** Where the credentials came from. */
  source: string
  /** When the client certificate expires (ISO 8601), when it can be read. */
  expires?: string
}

/** A fresh admin kubeconfig from the first control plane that answers, written or merged. */
export async function writeAdminKubeconfig(talos: TalosAccess, tempDir: string, o: CredentialRequest): Promise<CredentialReport> {
  const cr = await talos.installation()
  const talosconfig = await talos.talosconfig()
  const errors: string[] = []
  let text: string | undefined
  let source = ''
  for (const node of cr.spec.talos.controlPlanes) {
    try {
      text = readFileSync(await fetchKubeconfig({node, talosconfig, outPath: join(tempDir, 'kubeconfig')}), 'utf8')
      source = `talosctl kubeconfig from control plane ${node}`
      break
    } catch (error) {
      if (!(error instanceof TalosctlError)) throw error
      errors.push(`${node}: ${error.talosctlMessage}`)
    }
  }
  if (text === undefined)
    throw new IchorError(`no control plane handed out a kubeconfig: ${errors.join('; ')}`, {hint: 'check the nodes with ichor talos status'})
  let doc = parseYaml(text) as KubeconfigFile
  if (o.contextName) doc = renameKubeconfig(doc, o.contextName)
  const plan = planCredentialWrite('kubeconfig', stringify(doc), o, mergeKubeconfig)
  if (plan.changed) writeCredentialFile(plan.path, plan.content)
  const current = doc.contexts?.find((c) => c.name === doc['current-context'])?.context as {user?: string} | undefined
  const user = doc.users?.find((u) => u.name === current?.user)
  return {
    path: plan.path,
    context: doc['current-context'] ?? '',
    merged: plan.merged,
    changed: plan.changed,
    source,
    expires: certificateExpiry((user?.user as {'client-certificate-data'?: string} | undefined)?.['client-certificate-data']),
  }
}

/** The cluster's talosconfig, aimed at its control planes, written or merged. */
export async function writeTalosconfig(talos: TalosAccess, o: CredentialRequest): Promise<CredentialReport> {
  const cr = await talos.installation()
  const file = await talos.talosconfig()
  const local = (await talos.localTalosconfig()) === file
  const doc = parseYaml(readFileSync(file, 'utf8')) as TalosconfigFile
  const name = doc.context
  const context = name ? doc.contexts?.[name] : undefined
  if (!name || !context) throw new IchorError(`the talosconfig ${local ? file : 'stored in the cluster'} has no current context`)
  const controlPlanes = cr.spec.talos.controlPlanes
  const target = o.contextName ?? name
  const out: TalosconfigFile = {context: target, contexts: {[target]: {...context, endpoints: controlPlanes, nodes: controlPlanes.slice(0, 1)}}}
  const plan = planCredentialWrite('talosconfig', stringify(out), o, mergeTalosconfig)
  if (plan.changed) writeCredentialFile(plan.path, plan.content)
  return {
    path: plan.path,
    context: target,
    merged: plan.merged,
    changed: plan.changed,
    source: local ? `this machine's talosconfig (${file})` : "the cluster's sealed Talos bundle",
    expires: certificateExpiry(context.crt as string | undefined),
  }
}

/** The notAfter of a base64 PEM certificate (kubeconfig and talosconfig both carry it so). */
function certificateExpiry(base64Pem: string | undefined): string | undefined {
  const cert = certificateOf(base64Pem)
  return cert && new Date(cert.validTo).toISOString()
}
