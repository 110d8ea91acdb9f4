// The talosconfigs this machine reaches the nodes with: the one talosctl uses (TALOSCONFIG,
// else ~/.talos/config) and those ichor init keeps in its state folders. A client certificate
// that ends within RENEW_WITHIN_DAYS is warned about; read-only, a file that is not there is
// not a problem (a laptop may reach the nodes only through the cluster's sealed copy).
import {existsSync, readdirSync} from 'node:fs'
import {join} from 'node:path'
import {defaultTalosconfigPath} from '../credentials/merge.js'
import {stateRoot} from '../state/local.js'
import {expiryWarning, TALOSCONFIG_RENEWAL, talosconfigCertificate} from '../talos/credential-expiry.js'
import {ok, warn, type DoctorCheck} from './types.js'

const ID = 'talosconfig-expiry'

/** `stateDir` is a --state-dir (one cluster's folder); without it every cluster folder under the state root. */
export function checkTalosconfigExpiry(stateDir?: string, now = new Date()): DoctorCheck[] {
  const files = [...new Set([defaultTalosconfigPath(), ...stateTalosconfigs(stateDir)])].filter((f) => existsSync(f))
  return files.flatMap((file) => {
    const cert = talosconfigCertificate(file)
    if (!cert) return []
    const expiring = expiryWarning(cert, TALOSCONFIG_RENEWAL.replaceAll('FILE', file), now)
    return [expiring ? warn(ID, expiring.what, expiring.fix) : ok(ID, `${file}: client certificate valid until ${cert.notAfter.toISOString().slice(0, 10)}`)]
  })
}

function stateTalosconfigs(stateDir?: string): string[] {
  if (stateDir) return [join(stateDir, 'talosconfig')]
  try {
    return readdirSync(stateRoot(), {withFileTypes: true})
      .filter((e) => e.isDirectory())
      .map((e) => join(stateRoot(), e.name, 'talosconfig'))
      .sort()
  } catch {
    return []
  }
}
