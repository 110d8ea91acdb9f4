// The backup file (src/lib/backup/archive.ts) with the real age library (scrypt for a passphrase,
// X25519 for an identity) and the real tar: what goes in comes out byte for byte, and every way a
// file can be wrong is refused (exit 2) naming why: not age, another key, cut, changed, foreign,
// a part that differs from its manifest. A write never leaves a half file at the path.
import {randomBytes} from 'node:crypto'
import {existsSync, mkdtempSync, readdirSync, readFileSync, statSync, truncateSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {generateX25519Identity} from 'age-encryption'
import {describe, expect, it} from 'vitest'
import {BACKUP_FORMAT, describeParts, openBackupFile, writeBackupFile, type BackupManifest} from '../../src/lib/backup/archive.js'
import {defaultBackupName} from '../../src/lib/backup/take.js'
import {reportOf} from '../../src/lib/cli/error-report.js'
import {encrypter} from '../../src/lib/state/sealed-bundle.js'
import {StateKey} from '../../src/lib/state/state-key.js'

const passphrase = StateKey.passphrase('correct horse battery staple', 'the test')
const SECRET_MARK = 'admin-password-7f3e9c'

function partsFolder(snapshotBytes = 300_000): string {
  const dir = mkdtempSync(join(tmpdir(), 'ichor-backup-test-'))
  // Random bytes (incompressible) around a secret in plaintext, as an etcd snapshot holds Secrets.
  writeFileSync(join(dir, 'etcd.snapshot'), Buffer.concat([randomBytes(snapshotBytes), Buffer.from(SECRET_MARK), randomBytes(32)]))
  writeFileSync(join(dir, 'installation.json'), JSON.stringify({kind: 'IchorInstallation', spec: {talos: {clusterName: 'homelab'}}}))
  writeFileSync(join(dir, 'talos-bundle.json'), JSON.stringify({kind: 'Secret', data: {'bundle.age': 'c2VhbGVk'}}))
  return dir
}

function manifestOf(folder: string): BackupManifest {
  return {
    format: BACKUP_FORMAT,
    createdAt: '2026-12-07T06:15:00.000Z',
    ichorVersion: '0.0.0-test',
    cluster: {name: 'homelab', endpoint: 'https://192.0.2.10:6443'},
    versions: {talos: 'v1.14.1', kubernetes: '1.37.0', cilium: '1.18.0'},
    nodes: {controlPlanes: ['192.0.2.10'], workers: ['192.0.2.20']},
    etcd: {node: '192.0.2.10', revision: 1234, hash: '0a1b2c3d', totalKeys: 567, totalSize: 300_000},
    parts: describeParts(folder),
  }
}

async function refusal(f: () => Promise<unknown>) {
  try {
    await f()
  } catch (error) {
    return reportOf(error)
  }
  throw new Error('not refused')
}

async function written(key: StateKey = passphrase) {
  const folder = partsFolder()
  const out = mkdtempSync(join(tmpdir(), 'ichor-backup-out-'))
  const path = join(out, 'homelab.ichor-backup')
  const manifest = manifestOf(folder)
  const bytes = await writeBackupFile(path, folder, manifest, key)
  return {folder, out, path, manifest, bytes}
}

describe('the backup file', () => {
  it('round-trips with a passphrase: every part comes back byte for byte, the manifest too; written 0600, no temp file left', async () => {
    const {folder, out, path, manifest, bytes} = await written()
    expect(statSync(path).size).toBe(bytes)
    expect(statSync(path).mode & 0o777).toBe(0o600)
    expect(readdirSync(out)).toEqual(['homelab.ichor-backup'])
    expect(readFileSync(path).subarray(0, 22).toString()).toBe('age-encryption.org/v1\n')
    const into = mkdtempSync(join(tmpdir(), 'ichor-backup-in-'))
    expect(await openBackupFile(path, passphrase, into)).toEqual(manifest)
    for (const part of ['etcd.snapshot', 'installation.json', 'talos-bundle.json'])
      expect(readFileSync(join(into, part))).toEqual(readFileSync(join(folder, part)))
  })

  it('holds no plaintext: the secret in the snapshot is not in its bytes', async () => {
    const {path} = await written()
    expect(readFileSync(path).includes(Buffer.from(SECRET_MARK))).toBe(false)
    expect(readFileSync(path).includes(Buffer.from('homelab'))).toBe(false)
  })

  it('round-trips with an age identity (encrypted to its recipient)', async () => {
    const identity = await StateKey.identity(await generateX25519Identity(), 'the test identity')
    const {path, manifest} = await written(identity)
    expect(await openBackupFile(path, identity, mkdtempSync(join(tmpdir(), 'ichor-backup-in-')))).toEqual(manifest)
  })

  it('a second write to the same path replaces the file whole', async () => {
    const {folder, path, out} = await written()
    const second = manifestOf(folder)
    second.etcd.revision = 9999
    await writeBackupFile(path, folder, second, passphrase)
    expect((await openBackupFile(path, passphrase, mkdtempSync(join(tmpdir(), 'ichor-backup-in-')))).etcd.revision).toBe(9999)
    expect(readdirSync(out)).toEqual(['homelab.ichor-backup'])
  })

  it('refuses another key, naming the key and the file (exit 2)', async () => {
    const {path} = await written()
    const r = await refusal(() => openBackupFile(path, StateKey.passphrase('another passphrase!!', 'the other file'), mkdtempSync(join(tmpdir(), 'x-'))))
    expect(r.exitCode).toBe(2)
    expect(r.message).toBe(`the passphrase from the other file does not decrypt ${path}`)
  })

  it('refuses a file that is not age, a cut file and a changed byte, naming why (exit 2)', async () => {
    const {path, out} = await written()
    const plain = join(out, 'plain')
    writeFileSync(plain, 'apiVersion: v1\n')
    expect(await refusal(() => openBackupFile(plain, passphrase, mkdtempSync(join(tmpdir(), 'x-'))))).toMatchObject({
      exitCode: 2,
      message: `${plain} is not an ichor backup: it is not an age file`,
    })
    const cut = join(out, 'cut')
    writeFileSync(cut, readFileSync(path))
    truncateSync(cut, statSync(cut).size - 1000)
    expect(await refusal(() => openBackupFile(cut, passphrase, mkdtempSync(join(tmpdir(), 'x-'))))).toMatchObject({
      exitCode: 2,
      message: expect.stringMatching(/^.*cut is damaged: /),
    })
    const changed = join(out, 'changed')
    const bytes = readFileSync(path)
    bytes[Math.floor(bytes.length / 2)]! ^= 0xff
    writeFileSync(changed, bytes)
    expect(await refusal(() => openBackupFile(changed, passphrase, mkdtempSync(join(tmpdir(), 'x-'))))).toMatchObject({
      exitCode: 2,
      message: expect.stringMatching(/changed is damaged: /),
    })
  })

  it('refuses an age file of the right key that is no ichor backup, and a part that differs from its manifest (exit 2)', async () => {
    const out = mkdtempSync(join(tmpdir(), 'ichor-backup-out-'))
    const foreign = join(out, 'foreign.age')
    writeFileSync(foreign, await encrypter(passphrase).encrypt('just some text'))
    const r = await refusal(() => openBackupFile(foreign, passphrase, mkdtempSync(join(tmpdir(), 'x-'))))
    expect(r.exitCode).toBe(2)
    expect(r.message).toMatch(/foreign\.age is damaged: |foreign\.age decrypts, but is not an ichor backup/)

    const folder = partsFolder(1000)
    const manifest = manifestOf(folder)
    manifest.parts['installation.json'].sha256 = '0'.repeat(64)
    const lying = join(out, 'lying.ichor-backup')
    await writeBackupFile(lying, folder, manifest, passphrase)
    expect(await refusal(() => openBackupFile(lying, passphrase, mkdtempSync(join(tmpdir(), 'x-'))))).toMatchObject({
      exitCode: 2,
      message: expect.stringMatching(/part installation\.json does not match its manifest \(sha256 [0-9a-f]{64}, \d+ bytes; the manifest says 0{64}/),
    })
  })

  it('is named after the cluster and the UTC time by default', () => {
    expect(defaultBackupName('homelab', new Date('2026-12-07T06:15:04.123Z'))).toBe('homelab-20261207T061504Z.ichor-backup')
    expect(existsSync(defaultBackupName('homelab', new Date()))).toBe(false)
  })
})
