// A client certificate valid for a number of days, made by openssl: what the expiry warnings and
// `credentials renew` are tested with (Talos issues them for a year). Self-signed, or signed by a
// CA given as base64 PEM, as Talos secrets bundles keep theirs (an Ed25519 key under Talos's
// "ED25519 PRIVATE KEY" label, which is PKCS#8 inside).
import {execFileSync} from 'node:child_process'
import {mkdtempSync, readFileSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

/** Base64 of the certificate's PEM and of its key's, as kubeconfigs and talosconfigs carry them. */
export function shortCertificate(days: number, subject = '/CN=ichor-test', ca?: {crt: string; key: string}): {crt: string; key: string} {
  const dir = mkdtempSync(join(tmpdir(), 'ichor-cert-'))
  const openssl = (args: string[]) => execFileSync('openssl', args, {cwd: dir, stdio: 'pipe'})
  const newKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'key.pem']
  if (!ca) openssl(['req', '-x509', ...newKey, '-out', 'crt.pem', '-days', String(days), '-subj', subject])
  else {
    writeFileSync(join(dir, 'ca.pem'), Buffer.from(ca.crt, 'base64'))
    writeFileSync(
      join(dir, 'ca.key'),
      Buffer.from(ca.key, 'base64')
        .toString('utf8')
        .replace(/ED25519 PRIVATE KEY/g, 'PRIVATE KEY'),
    )
    openssl(['req', '-new', ...newKey, '-out', 'req.pem', '-subj', subject])
    openssl(['x509', '-req', '-in', 'req.pem', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'crt.pem', '-days', String(days)])
  }
  const b64 = (f: string) => readFileSync(join(dir, f)).toString('base64')
  return {crt: b64('crt.pem'), key: b64('key.pem')}
}
