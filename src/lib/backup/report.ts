// What `ichor backup` prints after writing a file and `ichor backup inspect` after opening one.
import type {BackupManifest} from './archive.js'

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`
  const units = ['KiB', 'MiB', 'GiB', 'TiB']
  let n = bytes / 1024
  let unit = 0
  while (n >= 1024 && unit < units.length - 1) {
    n /= 1024
    unit++
  }
  return `${n.toFixed(1)} ${units[unit]}`
}

function count(n: number, what: string): string {
  return `${n} ${what}${n === 1 ? '' : 's'}`
}

/** The file's contents, part by part, as both commands print them. */
export function formatBackupContents(path: string, bytes: number, m: BackupManifest): string {
  const v = m.versions
  const stack = [v.cilium && `Cilium ${v.cilium}`, v.argocd && `Argo CD ${v.argocd}`, v.kokumi && `Kokumi ${v.kokumi}`].filter(Boolean).join(', ')
  return [
    `${path} (${formatBytes(bytes)}, encrypted)`,
    `  cluster        ${m.cluster.name} at ${m.cluster.endpoint}, taken ${m.createdAt} by ichor ${m.ichorVersion}`,
    `  nodes          ${count(m.nodes.controlPlanes.length, 'control plane')} (${m.nodes.controlPlanes.join(', ')})${m.nodes.workers.length ? `, ${count(m.nodes.workers.length, 'worker')} (${m.nodes.workers.join(', ')})` : ''}`,
    `  versions       Talos ${v.talos}, Kubernetes ${v.kubernetes}${stack ? `, ${stack}` : ''}`,
    `  etcd snapshot  revision ${m.etcd.revision}, ${count(m.etcd.totalKeys, 'key')}, ${formatBytes(m.parts['etcd.snapshot'].bytes)}, hash ${m.etcd.hash}, from ${m.etcd.node}`,
    `  installation   the IchorInstallation (its spec holds the machine-config inputs: install disk, image, patches)`,
    `  talos bundle   the Talos secrets bundle and talosconfig, as the cluster keeps them (sealed)`,
    `  checked        every part's size and sha256 match the manifest`,
  ].join('\n')
}

export function formatBackupReport(r: {path: string; bytes: number; manifest: BackupManifest}): string {
  return `Backup written: ${formatBackupContents(r.path, r.bytes, r.manifest)}\nKeep it off the cluster (another machine, another disk); it opens only with the key that seals the Talos bundle.`
}
