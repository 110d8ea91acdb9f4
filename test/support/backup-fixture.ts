// A small backup file written by the real writer (age and tar), for the tests that walk every
// command: `backup inspect` and `restore` need a file the key opens before they do anything else.
import {mkdtempSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {BACKUP_FORMAT, describeParts, writeBackupFile, type BackupManifest} from '../../src/lib/backup/archive.js'
import {givenStateKey} from '../../src/lib/state/state-key.js'

export interface BackupFixture {
  file: string
  /** The 0600 passphrase file it is encrypted with. */
  keyFile: string
}

let made: Promise<BackupFixture> | undefined

/** One per test process: a backup of a one-node cluster "homelab" whose etcd snapshot is a stand-in. */
export function backupFixture(): Promise<BackupFixture> {
  made ??= (async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ichor-backup-fixture-'))
    const installation = {
      apiVersion: 'ichor.maesh.dev/v1alpha1',
      kind: 'IchorInstallation',
      metadata: {name: 'ichor', uid: '00000000-0000-0000-0000-000000000001'},
      spec: {
        talos: {
          clusterName: 'homelab',
          endpoint: 'https://192.0.2.10:6443',
          talosVersion: 'v1.14.1',
          kubernetesVersion: '1.37.0',
          controlPlanes: ['192.0.2.10'],
          workers: [],
        },
        cni: {kubeProxy: 'replaced', tunnel: 'vxlan', cilium: {values: {}}},
        stack: {promotion: 'Automatic', argocd: {values: {}}, kokumi: {values: {}}},
      },
    }
    writeFileSync(join(dir, 'etcd.snapshot'), 'a stand-in for an etcd snapshot\n')
    writeFileSync(join(dir, 'installation.json'), JSON.stringify(installation))
    writeFileSync(
      join(dir, 'talos-bundle.json'),
      JSON.stringify({apiVersion: 'v1', kind: 'Secret', metadata: {name: 'ichor-talos', namespace: 'ichor-system'}}),
    )
    const keyFile = join(dir, 'key')
    writeFileSync(keyFile, 'a passphrase for the fixture, not a secret\n', {mode: 0o600})
    const manifest: BackupManifest = {
      format: BACKUP_FORMAT,
      createdAt: '2026-12-07T06:15:00.000Z',
      ichorVersion: '0.0.0',
      cluster: {name: 'homelab', endpoint: 'https://192.0.2.10:6443'},
      versions: {talos: 'v1.14.1', kubernetes: '1.37.0'},
      nodes: {controlPlanes: ['192.0.2.10'], workers: []},
      etcd: {node: '192.0.2.10', revision: 7, hash: '00000001', totalKeys: 3, totalSize: 20},
      parts: describeParts(dir),
    }
    const file = join(dir, 'homelab.ichor-backup')
    await writeBackupFile(file, dir, manifest, (await givenStateKey(keyFile))!)
    return {file, keyFile}
  })()
  return made
}
