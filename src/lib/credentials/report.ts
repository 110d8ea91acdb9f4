// What `ichor kubeconfig` and `ichor talosconfig` say when done (the file, never its contents).
import type {CredentialReport} from './admin.js'

export function formatCredentialReport(r: CredentialReport): string {
  const how = r.changed ? (r.merged ? `merged into ${r.path}` : `written to ${r.path}`) : `${r.path} already holds it; nothing changed`
  const lines = [`Context ${r.context}: ${how}${r.merged ? ' (the current context)' : ''}.`, `From ${r.source}.`]
  if (r.expires) lines.push(`Client certificate valid until ${r.expires}.`)
  return lines.join('\n')
}
