// When the client certificates run out: a warning within 30 days (certificates from openssl).
import {mkdtempSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {stringify} from 'yaml'
import {describe, expect, it} from 'vitest'
import {credentialExpiryWarnings, expiryWarning, kubeconfigCertificate, talosconfigCertificate} from '../../src/lib/talos/credential-expiry.js'
import {checkTalosconfigExpiry} from '../../src/lib/doctor/talosconfig.js'
import {loadKubeconfig} from '../../src/lib/kube/kubeconfig.js'
import {shortCertificate} from '../support/short-certificate.js'

const dir = mkdtempSync(join(tmpdir(), 'ichor-expiry-'))
/** A self-signed client certificate valid for `days`, base64 of its PEM (as kubeconfigs carry it). */
const certificate = (_name: string, days: number) => shortCertificate(days).crt
const kubeconfigWith = (crt: string) => {
  const path = join(dir, `kubeconfig-${crt.length}-${Math.random()}`)
  writeFileSync(
    path,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{name: 'homelab', cluster: {server: 'https://192.0.2.10:6443'}}],
      users: [{name: 'admin@homelab', user: {'client-certificate-data': crt, 'client-key-data': 'eA=='}}],
      contexts: [{name: 'admin@homelab', context: {cluster: 'homelab', user: 'admin@homelab'}}],
      'current-context': 'admin@homelab',
    }),
  )
  return path
}

describe('client certificate expiry', () => {
  it('a kubeconfig certificate that ends in 10 days is warned about, with the date, the days left and the fix; one of 60 days is not', () => {
    const soon = kubeconfigCertificate(loadKubeconfig({kubeconfig: kubeconfigWith(certificate('soon', 10))}))
    const warning = expiryWarning(soon, 'ichor kubeconfig --force')
    expect(warning?.what).toMatch(/^the kubeconfig's client certificate \(context "admin@homelab"\) expires on \d{4}-\d{2}-\d{2}, in (9|10) day\(s\)$/)
    expect(warning?.fix).toBe('ichor kubeconfig --force')
    const later = kubeconfigCertificate(loadKubeconfig({kubeconfig: kubeconfigWith(certificate('later', 60))}))
    expect(later).toBeDefined()
    expect(expiryWarning(later, 'x')).toBeUndefined()
  })

  it('an expired one says so; a token user has no certificate to warn about', () => {
    const cert = kubeconfigCertificate(loadKubeconfig({kubeconfig: kubeconfigWith(certificate('old', 1))}))
    const inTwoDays = new Date(Date.now() + 2 * 86_400_000)
    expect(expiryWarning(cert, 'x', inTwoDays)?.what).toMatch(/expired on \d{4}-\d{2}-\d{2}$/)
    expect(expiryWarning(undefined, 'x')).toBeUndefined()
  })

  it("reads a talosconfig's current context", () => {
    const path = join(dir, 'talosconfig')
    writeFileSync(path, stringify({context: 'homelab', contexts: {homelab: {crt: certificate('talos', 5), key: 'x', ca: 'y'}}}))
    expect(expiryWarning(talosconfigCertificate(path), 'renew')?.what).toMatch(
      /^the talosconfig's client certificate \(.*talosconfig, context "homelab"\) expires on/,
    )
  })

  it('cni status and stack status: one warning per credential that ends soon, each naming its renewal', () => {
    const kubeconfig = loadKubeconfig({kubeconfig: kubeconfigWith(certificate('status-kube', 7))})
    const talosconfig = join(dir, 'talosconfig-status')
    writeFileSync(talosconfig, stringify({context: 'homelab', contexts: {homelab: {crt: certificate('status-talos', 20), key: 'x', ca: 'y'}}}))
    const warnings = credentialExpiryWarnings({kubeconfig, talosconfig})
    expect(warnings.map((w) => w.what)).toEqual([
      expect.stringMatching(/^the kubeconfig's client certificate/),
      expect.stringMatching(/^the talosconfig's client certificate/),
    ])
    expect(warnings[0]!.fix).toMatch(/^ichor credentials renew \(/)
    expect(warnings[1]!.fix).toContain(`ichor credentials renew --talosconfig ${talosconfig} (`)
    // Far from their end: nothing to say.
    const fresh = loadKubeconfig({kubeconfig: kubeconfigWith(certificate('status-fresh', 365))})
    expect(credentialExpiryWarnings({kubeconfig: fresh})).toEqual([])
  })

  it("doctor: the state folder's talosconfig within 30 days is a warning naming the file, a later one an ok", () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'ichor-expiry-state-'))
    const home = mkdtempSync(join(tmpdir(), 'ichor-expiry-home-'))
    const saved = process.env.TALOSCONFIG
    process.env.TALOSCONFIG = join(home, 'no-such-config')
    try {
      writeFileSync(join(stateDir, 'talosconfig'), stringify({context: 'c', contexts: {c: {crt: certificate('doctor-soon', 3)}}}))
      const [soon, ...rest] = checkTalosconfigExpiry(stateDir)
      expect(rest).toEqual([])
      expect(soon).toMatchObject({id: 'talosconfig-expiry', status: 'warn'})
      expect(soon!.fix).toContain(join(stateDir, 'talosconfig'))
      writeFileSync(join(stateDir, 'talosconfig'), stringify({context: 'c', contexts: {c: {crt: certificate('doctor-later', 200)}}}))
      expect(checkTalosconfigExpiry(stateDir)).toEqual([expect.objectContaining({id: 'talosconfig-expiry', status: 'ok'})])
    } finally {
      if (saved === undefined) delete process.env.TALOSCONFIG
      else process.env.TALOSCONFIG = saved
    }
  })
})
