// When the client certificates ichor's tools use run out. Talos signs the admin kubeconfig's
// for a year, and a talosconfig's likewise; an expired kubeconfig also keeps ichor from reading
// its own sealed bundle. A certificate that ends within RENEW_WITHIN_DAYS is warned about by
// `ichor doctor`, `cni status` and `stack status`, naming the command that renews it.
import {X509Certificate} from 'node:crypto'
import {readFileSync} from 'node:fs'
import {parse as parseYaml} from 'yaml'
import type {Kubeconfig} from '../kube/kubeconfig.js'

export const RENEW_WITHIN_DAYS = 30
const DAY_MS = 86_400_000

export interface ClientCertificate {
  /** What holds it, for messages: `the kubeconfig's user "admin@homelab"`. */
  what: string
  notAfter: Date
}

export interface ExpiryWarning {
  what: string
  fix: string
}

/** The certificate of a PEM (or base64 of a PEM, as kubeconfigs and talosconfigs carry it); undefined when there is none. */
export function certificateOf(pemOrBase64: string | undefined): X509Certificate | undefined {
  if (!pemOrBase64) return undefined
  const pem = pemOrBase64.includes('-----BEGIN') ? pemOrBase64 : Buffer.from(pemOrBase64, 'base64').toString('utf8')
  try {
    return new X509Certificate(pem)
  } catch {
    return undefined
  }
}

/** The client certificate of the kubeconfig's selected user, from its data or its file. */
export function kubeconfigCertificate(config: Kubeconfig): ClientCertificate | undefined {
  const user = config.user
  if (!user) return undefined
  let pem = user.clientCertificateData
  if (!pem && user.clientCertificate) {
    try {
      pem = readFileSync(user.clientCertificate, 'utf8')
    } catch {
      return undefined
    }
  }
  const cert = certificateOf(pem)
  return cert && {what: `the kubeconfig's client certificate (context "${config.context}")`, notAfter: new Date(cert.validTo)}
}

/** The client certificate of a talosconfig's current context. */
export function talosconfigCertificate(path: string): ClientCertificate | undefined {
  try {
    const doc = parseYaml(readFileSync(path, 'utf8')) as {context?: string; contexts?: Record<string, {crt?: string}>}
    const cert = certificateOf(doc.context ? doc.contexts?.[doc.context]?.crt : undefined)
    return cert && {what: `the talosconfig's client certificate (${path}, context "${doc.context}")`, notAfter: new Date(cert.validTo)}
  } catch {
    return undefined
  }
}

/** A warning when the certificate has ended or ends within RENEW_WITHIN_DAYS of `now`. */
export function expiryWarning(cert: ClientCertificate | undefined, fix: string, now = new Date()): ExpiryWarning | undefined {
  if (!cert) return undefined
  const left = cert.notAfter.getTime() - now.getTime()
  if (left > RENEW_WITHIN_DAYS * DAY_MS) return undefined
  const date = cert.notAfter.toISOString().slice(0, 10)
  const what = left <= 0 ? `${cert.what} expired on ${date}` : `${cert.what} expires on ${date}, in ${Math.ceil(left / DAY_MS)} day(s)`
  return {what, fix}
}

/** What renews the admin kubeconfig: a fresh certificate from a control plane, where the old one was. */
export const KUBECONFIG_RENEWAL =
  'ichor credentials renew (fresh admin credentials from a control plane, written where the old ones were, the old file kept as .bak)'
/** What renews a talosconfig's certificate: a new one signed with the cluster's secrets bundle. */
export const TALOSCONFIG_RENEWAL =
  "ichor credentials renew --talosconfig FILE (a fresh client certificate from the cluster's secrets bundle, the old file kept as FILE.bak)"

/** The warnings `cni status` and `stack status` add: the kubeconfig in use and this machine's talosconfig. */
export function credentialExpiryWarnings(p: {kubeconfig?: Kubeconfig; talosconfig?: string}, now = new Date()): ExpiryWarning[] {
  const kube = p.kubeconfig && expiryWarning(kubeconfigCertificate(p.kubeconfig), KUBECONFIG_RENEWAL, now)
  const talos = p.talosconfig ? expiryWarning(talosconfigCertificate(p.talosconfig), TALOSCONFIG_RENEWAL.replaceAll('FILE', p.talosconfig), now) : undefined
  return [kube, talos].filter((w): w is ExpiryWarning => w !== undefined)
}
