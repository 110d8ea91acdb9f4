// A self-signed client certificate valid for a number of days, made by openssl: what the expiry
// warnings are tested with (a Talos-made one is valid for a year).
import {execFileSync} from 'node:child_process'
import {mkdtempSync, readFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

/** Base64 of the certificate's PEM and of its key's, as kubeconfigs and talosconfigs carry them. */
export function shortCertificate(days: number, subject = '/CN=ichor-test'): {crt: string; key: string} {
  const dir = mkdtempSync(join(tmpdir(), 'ichor-cert-'))
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      'key.pem',
      '-out',
      'crt.pem',
      '-days',
      String(days),
      '-subj',
      subject,
    ],
    {cwd: dir, stdio: 'pipe'},
  )
  const b64 = (f: string) => readFileSync(join(dir, f)).toString('base64')
  return {crt: b64('crt.pem'), key: b64('key.pem')}
}
