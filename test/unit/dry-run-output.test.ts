// The dry run's output folder (issue 12 point 20): files 0600, folders ichor creates 0700,
// and no secret value in any file, also when the chart generates a CA in the render.
import {spawnSync} from 'node:child_process'
import {chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {describe, expect, it} from 'vitest'
import {parseAllDocuments} from 'yaml'
import {redactSecretData} from '../../src/lib/init/dry-run.js'
import {nobodyCanRead} from '../support/other-user.js'
import {PROJECT_ROOT, UPSTREAM} from '../support/upstream.js'

const BIN = join(PROJECT_ROOT, 'bin', 'run.js')
if (!existsSync(join(PROJECT_ROOT, 'dist', 'commands', 'init.js'))) throw new Error('dist/ is missing: run `npm run build` first (npm test does)')

const NODES = ['--cluster-name', 'homelab', '--endpoint', 'https://192.0.2.10:6443', '--control-plane', '192.0.2.10', '--worker', '192.0.2.11']
function dryRun(out: string, extra: string[] = []) {
  const r = spawnSync(process.execPath, [BIN, 'init', '--dry-run', '--output-dir', out, ...NODES, '--mirror', UPSTREAM.dir, ...extra], {
    encoding: 'utf8',
    env: {...process.env, ICHOR_MIRROR: ''},
  })
  expect(r.status, r.stderr).toBe(0)
}
/** A folder nobody can walk into, so only the modes under it decide what nobody reads. */
function openRoot(): string {
  const root = mkdtempSync(join(tmpdir(), 'ichor-dry-modes-'))
  chmodSync(root, 0o755)
  return root
}
function walk(dir: string): {path: string; dir: boolean}[] {
  return readdirSync(dir, {withFileTypes: true}).flatMap((e) => {
    const path = join(dir, e.name)
    return e.isDirectory() ? [{path, dir: true}, ...walk(path)] : [{path, dir: false}]
  })
}
const modeOf = (path: string) => statSync(path).mode & 0o7777
const secrets = (text: string) =>
  parseAllDocuments(text)
    .map((d) => d.toJS())
    .filter((o) => o?.kind === 'Secret')

describe('ichor init --dry-run --output-dir: modes and content of the files', () => {
  it("Given a new --output-dir folder, Then it and its subfolders are 0700, every file 0600, another user reads none, and ichor's defaults need no redaction", () => {
    const out = join(openRoot(), 'a', 'out')
    dryRun(out)
    expect(existsSync(join(out, 'redacted.txt'))).toBe(false)
    expect(secrets(readFileSync(join(out, 'cilium', 'manifest.yaml'), 'utf8'))).toEqual([])
    expect(modeOf(out)).toBe(0o700)
    const entries = walk(out)
    expect(entries.filter((e) => !e.dir).length).toBeGreaterThan(10)
    for (const e of entries) expect(modeOf(e.path), e.path).toBe(e.dir ? 0o700 : 0o600)
    chmodSync(out, 0o755) // only to show the file modes hold on their own
    for (const e of entries.filter((x) => !x.dir)) expect(nobodyCanRead(e.path), e.path).toBe(false)
  })

  it('Given an existing 0755 --output-dir folder holding 0644 files of an earlier run, Then the folder is left as chosen and the files are 0600', () => {
    const out = join(openRoot(), 'out')
    mkdirSync(join(out, 'cilium'), {recursive: true})
    chmodSync(out, 0o755)
    writeFileSync(join(out, 'cilium', 'manifest.yaml'), 'old', {mode: 0o644})
    dryRun(out)
    expect(modeOf(out)).toBe(0o755)
    expect(modeOf(join(out, 'cilium'))).toBe(0o700)
    expect(modeOf(join(out, 'cilium', 'manifest.yaml'))).toBe(0o600)
  })

  it('Given hubble.tls.auto.method=helm (a CA generated in the render), Then no file holds key material: the Cilium manifest and the Talos inline manifest carry placeholders, listed in redacted.txt', () => {
    const root = openRoot()
    const values = join(root, 'values.yaml')
    writeFileSync(values, 'hubble:\n  tls:\n    auto:\n      method: helm\n')
    const out = join(root, 'out')
    dryRun(out, ['--cilium-values', values])
    for (const e of walk(out).filter((x) => !x.dir && !x.path.endsWith('.tar.gz'))) {
      expect(readFileSync(e.path, 'utf8'), e.path).not.toMatch(/PRIVATE KEY|LS0tLS1CRUdJTi/) // base64 of "-----BEGIN"
    }
    const manifest = readFileSync(join(out, 'cilium', 'manifest.yaml'), 'utf8')
    const inline = parseAllDocuments(readFileSync(join(out, 'talos', 'controlplane-patch.yaml'), 'utf8'))
      .map((d) => d.toJS())
      .find((d) => d.kind === 'KubeInlineManifestConfig').manifest as string
    for (const text of [manifest, inline]) {
      const ca = secrets(text).find((s) => s.metadata.name === 'cilium-ca')
      expect(Object.keys(ca.data).sort()).toEqual(['ca.crt', 'ca.key'])
      for (const s of secrets(text))
        for (const v of Object.values({...s.data, ...s.stringData})) expect(v).toMatch(/^<left out by ichor --dry-run: \d+ bytes>$/)
    }
    const listed = readFileSync(join(out, 'redacted.txt'), 'utf8')
    expect(listed).toMatch(/^cilium\/manifest\.yaml: Secret kube-system\/cilium-ca \(ca\.crt, ca\.key\)$/m)
    expect(listed).toMatch(/^talos\/controlplane-patch\.yaml: Secret kube-system\/hubble-server-certs \(ca\.crt, tls\.crt, tls\.key\)$/m)
  })
})

describe('redactSecretData', () => {
  it('keeps documents without Secret data byte for byte and redacts data, stringData and stray private keys', () => {
    const text =
      '# head\n---\n# Source: a\nkind: ConfigMap\ndata: {a: "1"}\n---\nkind: Secret\nmetadata: {name: s, namespace: n}\ndata:\n  k: dg==\nstringData:\n  p: pw\n---\nkind: ConfigMap\nmetadata: {name: c, namespace: n}\ndata:\n  key: "-----BEGIN EC PRIVATE KEY-----\\nabc\\n-----END EC PRIVATE KEY-----"\n'
    const r = redactSecretData(text)
    expect(r.redacted).toEqual(['Secret n/s (k, p)', 'ConfigMap n/c (a private key)'])
    expect(r.text.startsWith('# head\n---\n# Source: a\nkind: ConfigMap\ndata: {a: "1"}\n---\n')).toBe(true)
    expect(r.text).not.toMatch(/dg==|pw|PRIVATE KEY/)
    expect(redactSecretData('kind: Secret\nmetadata: {name: e}\n')).toEqual({text: 'kind: Secret\nmetadata: {name: e}\n', redacted: []})
  })
})
