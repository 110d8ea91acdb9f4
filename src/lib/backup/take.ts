// `ichor backup`: everything a restore needs, read from the cluster and its control planes, never
// written back. The etcd snapshot comes through the Talos API from a control plane whose member
// is healthy (as `talosctl etcd snapshot` takes it); the IchorInstallation (with the operator's
// machine-config inputs) and the Talos bundle's Secret as the cluster keeps it (sealed) are read
// from the API server. The file is encrypted with the key that opens that bundle, which is
// proven first, so a backup is never sealed with a key its own bundle does not open.
import {writeFileSync} from 'node:fs'
import {join, resolve} from 'node:path'
import {IchorError} from '../errors/errors.js'
import type {Kube} from '../kube/client.js'
import type {KubeObject} from '../kube/objects.js'
import {readTalosBundleSecret, type Installation} from '../state/installation.js'
import {bundleOfSecret, TALOS_SECRET_NAME} from '../state/sealed-bundle.js'
import type {TalosAccess} from '../talos/access.js'
import {etcdSnapshot, getEtcdStatus, unhealthyEtcdMembers} from '../talos/talosctl.js'
import {withPrivateTempDir} from '../fs/private-files.js'
import {describeParts, openBackupFile, writeBackupFile, type BackupManifest} from './archive.js'

export interface BackupRequest {
  /** Where the file goes (default: `<cluster>-<UTC time>.ichor-backup` in the current folder). */
  file?: string
  /** How long the snapshot may take. */
  timeoutMs: number
  /** The ichor that writes it, for the manifest. */
  ichorVersion: string
}

export interface BackupReport {
  path: string
  bytes: number
  manifest: BackupManifest
}

/** `homelab-20261207T061500Z.ichor-backup`: sorts by time, and no character a shell or a file system minds. */
export function defaultBackupName(cluster: string, at: Date): string {
  return `${cluster}-${at
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z')}.ichor-backup`
}

/** The first control plane whose etcd member answers started and voting; the snapshot is taken from it. */
async function healthyControlPlane(talos: TalosAccess, cr: Installation): Promise<string> {
  const controlPlanes = cr.spec.talos.controlPlanes
  const status = await getEtcdStatus({nodes: controlPlanes, talosconfig: await talos.talosconfig()})
  const node = controlPlanes.find((n) => unhealthyEtcdMembers([n], status).length === 0)
  if (node) return node
  throw new IchorError(`no control plane's etcd member is healthy, so no snapshot can be taken: ${unhealthyEtcdMembers(controlPlanes, status).join('; ')}`, {
    hint: 'check the control planes with `talosctl etcd status`',
  })
}

/** An object as a backup keeps it: without the server's bookkeeping of who wrote which field. */
function withoutManagedFields<T extends {metadata?: KubeObject['metadata']}>(object: T): T {
  const {managedFields: _ignored, ...metadata} = (object.metadata ?? {}) as KubeObject['metadata'] & {managedFields?: unknown}
  return {...object, metadata}
}

export async function takeBackup(ctx: {kube: Kube; talos: TalosAccess; tempDir: string}, o: BackupRequest): Promise<BackupReport> {
  const {talos, tempDir} = ctx
  const cr = await talos.installation()
  const createdAt = new Date()
  const path = resolve(o.file ?? defaultBackupName(cr.spec.talos.clusterName, createdAt))
  const secret = await readTalosBundleSecret(ctx.kube)
  if (!secret)
    throw new IchorError(`the cluster holds no Talos bundle (${TALOS_SECRET_NAME}): a backup without it could not configure new nodes`, {
      hint: 'rerun `ichor init` from the machine that set the cluster up: it stores the bundle',
    })
  // The key the file is encrypted with must open the bundle it carries (a wrong one is refused, exit 2).
  const key = await talos.stateKey()
  await bundleOfSecret(
    secret,
    async () => key,
    (warning) => void talos.warnings.push(warning),
  )
  const node = await healthyControlPlane(talos, cr)
  const snapshot = await etcdSnapshot({node, talosconfig: await talos.talosconfig(), outPath: join(tempDir, 'etcd.snapshot'), timeoutMs: o.timeoutMs})
  writeFileSync(join(tempDir, 'installation.json'), `${JSON.stringify(withoutManagedFields(cr as Installation & KubeObject), null, 2)}\n`, {mode: 0o600})
  writeFileSync(join(tempDir, 'talos-bundle.json'), `${JSON.stringify(withoutManagedFields(secret), null, 2)}\n`, {mode: 0o600})
  const {talos: t} = cr.spec
  const manifest: BackupManifest = {
    format: 'ichor-backup/v1',
    createdAt: createdAt.toISOString(),
    ichorVersion: o.ichorVersion,
    cluster: {name: t.clusterName, endpoint: t.endpoint},
    versions: {
      talos: t.talosVersion,
      kubernetes: cr.status?.kubernetes?.version ?? t.kubernetesVersion,
      cilium: cr.status?.cni?.chartVersion,
      argocd: cr.status?.artifacts?.argocd?.version,
      kokumi: cr.status?.artifacts?.kokumi?.version,
    },
    nodes: {controlPlanes: [...t.controlPlanes], workers: [...t.workers]},
    etcd: {node, revision: snapshot.revision, hash: snapshot.hash, totalKeys: snapshot.totalKeys, totalSize: snapshot.totalSize},
    parts: describeParts(tempDir),
  }
  const bytes = await writeBackupFile(path, tempDir, manifest, key)
  // Read back as a restore will: a backup that does not open is found now, not on the day it is needed.
  await withPrivateTempDir('ichor-backup-check-', (dir) => openBackupFile(path, key, dir))
  return {path, bytes, manifest}
}
