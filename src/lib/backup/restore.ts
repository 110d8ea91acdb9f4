// What `ichor restore` adds to init's convergence: the backup as the cluster's stored state until
// etcd is back (its IchorInstallation spec and sealed bundle stand in for the live ones), the
// guard that keeps a restore off a running cluster and off machines that are not new, and the
// marks that let a restore killed at any point be run again: a file in the state folder before the
// first node is touched, and an annotation on the IchorInstallation once etcd is back.
import {existsSync, readFileSync} from 'node:fs'
import {join} from 'node:path'
import {INSTALLATION} from '../constants.js'
import {IchorError, ValidationError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import {writePrivateFileAtomic} from '../fs/private-files.js'
import type {Session} from '../session/session.js'
import {deleteObject, listObjects} from '../kube/objects.js'
import type {NodeObject} from '../nodes/kube-nodes.js'
import {readInstallation, type InstallationSpec} from '../state/installation.js'
import type {LocalState} from '../state/local.js'
import type {SecretWithData} from '../state/sealed-bundle.js'
import type {StateKey} from '../state/state-key.js'
import {isReachable} from '../talos/talosctl.js'
import {holds, missing} from '../tasks/probe.js'
import type {Task} from '../tasks/types.js'
import {openBackupFile, type BackupManifest} from './archive.js'

export const RESTORED_FROM_ANNOTATION = 'ichor.maesh.dev/restored-from'
const MARKER_FILE = 'restore.json'

/** A backup opened for a restore: its parts in a private folder for the run. */
export interface RestoreSource {
  /** The file, as named. */
  file: string
  /** Which backup: the sha256 of its etcd snapshot. */
  id: string
  manifest: BackupManifest
  /** The etcd snapshot etcd starts from. */
  snapshot: string
  /** The IchorInstallation's spec as the backup holds it. */
  spec: InstallationSpec
  /** The Talos bundle's Secret as the cluster kept it. */
  bundle: SecretWithData
}

/** Decrypts and checks the file (exit 2 naming why it cannot be used) into `dir`, a private folder. */
export async function openRestoreSource(file: string, key: StateKey, dir: string): Promise<RestoreSource> {
  const manifest = await openBackupFile(file, key, dir)
  const installation = JSON.parse(readFileSync(join(dir, 'installation.json'), 'utf8')) as {kind?: string; spec?: InstallationSpec}
  if (installation.kind !== INSTALLATION.kind || !installation.spec?.talos)
    throw new IchorError(`${file}: its installation.json holds no IchorInstallation`, {exitCode: EXIT.usage})
  return {
    file,
    id: manifest.parts['etcd.snapshot'].sha256,
    manifest,
    snapshot: join(dir, 'etcd.snapshot'),
    spec: installation.spec,
    bundle: JSON.parse(readFileSync(join(dir, 'talos-bundle.json'), 'utf8')) as SecretWithData,
  }
}

function markerOf(state: LocalState): string | undefined {
  const path = join(state.dir, MARKER_FILE)
  if (!existsSync(path)) return undefined
  try {
    return (JSON.parse(readFileSync(path, 'utf8')) as {id?: string}).id
  } catch {
    return undefined
  }
}

/** Written before the first node is touched: a rerun from this machine continues this restore. */
export function markRestoreStarted(state: LocalState, source: RestoreSource): void {
  writePrivateFileAtomic(join(state.dir, MARKER_FILE), `${JSON.stringify({id: source.id, file: source.file, createdAt: source.manifest.createdAt})}\n`)
}

/**
 * A restore goes onto new machines: every node in maintenance mode and no cluster answering at
 * the endpoint. A rerun of the same restore (the marker in the state folder, or the annotation on
 * a recovered cluster) continues whatever it finds. Anything else is refused, nothing touched.
 */
export async function checkRestoreTarget(o: {session: Session; source: RestoreSource; state: LocalState; nodes: string[]; endpoint: string}): Promise<void> {
  const marked = markerOf(o.state) === o.source.id
  if (await o.session.clusterAnswers()) {
    const cr = await readInstallation(await o.session.kube())
    if (marked || cr?.metadata.annotations?.[RESTORED_FROM_ANNOTATION] === o.source.id) return
    throw new IchorError(
      `a cluster answers at ${o.endpoint}: ichor restore brings a cluster back onto machines in maintenance mode, never over a running one; nothing was changed`,
      {exitCode: EXIT.usage, hint: 'reset the machines first (talosctl reset, or boot them from Talos media), then run ichor restore'},
    )
  }
  if (marked) return
  const answers = await Promise.all(o.nodes.map((node) => isReachable(node, {timeoutMs: 10_000})))
  const issues = answers
    .filter((a) => a.state !== 'maintenance')
    .map((a) => ({
      path: a.node,
      message:
        a.state === 'configured'
          ? 'runs a machine config: a restore needs a machine in maintenance mode (reset it, or boot it from Talos media)'
          : `does not answer as a Talos node (${a.message ?? 'no answer'})`,
    }))
  // A machine that does not answer fails the run (exit 1); one that runs a config is refused (exit 2).
  const exitCode = answers.some((a) => a.state === 'unreachable') ? EXIT.failed : EXIT.usage
  if (issues.length > 0) throw new ValidationError('ichor restore: not every node is in maintenance mode, nothing was changed', issues, {exitCode})
}

/** Once etcd is back: the IchorInstallation names the backup it came from, so a rerun from any machine continues. */
export function recordRestoreTask(p: {session: Session; source: RestoreSource}): Task {
  const path = `/apis/${INSTALLATION.apiVersion}/${INSTALLATION.plural}/${INSTALLATION.name}`
  return {
    id: 'record-restore',
    title: 'Record on the IchorInstallation which backup the cluster came back from',
    async probe() {
      const cr = await readInstallation(await p.session.kube())
      return cr?.metadata.annotations?.[RESTORED_FROM_ANNOTATION] === p.source.id
        ? holds(`restored from ${p.source.id.slice(0, 12)}`)
        : missing('not recorded yet')
    },
    async run() {
      const kube = await p.session.kube()
      await p.session.guard()
      await kube.request('PATCH', path, {
        body: {metadata: {annotations: {[RESTORED_FROM_ANNOTATION]: p.source.id}}},
        contentType: 'application/merge-patch+json',
      })
    },
  }
}

/**
 * The snapshot holds the Node objects of the machines it was taken on. On other machines they stay
 * NotReady with their pods bound to them; deleting them lets Kubernetes' pod garbage collector
 * delete those pods and their controllers start them on the new machines (as `ichor node remove
 * --unreachable` does for one gone machine). Only a Node with an InternalIP that is none of the
 * restored machines' goes; one still registering (no address yet) is left alone.
 */
export function forgetOldNodesTask(p: {session: Session; nodes: string[]}): Task {
  const old = async () =>
    (await listObjects<NodeObject>(await p.session.kube(), {apiVersion: 'v1', kind: 'Node'})).filter((n) => {
      const ips = (n.status?.addresses ?? []).filter((a) => a.type === 'InternalIP').map((a) => a.address)
      return ips.length > 0 && !ips.some((ip) => p.nodes.includes(ip))
    })
  return {
    id: 'forget-old-nodes',
    title: "Delete the Nodes of the backup's machines that are not restored ones",
    async probe() {
      const gone = await old()
      return gone.length > 0
        ? missing(`Nodes of machines the cluster no longer has: ${gone.map((n) => n.metadata.name).join(', ')}`)
        : holds('every Node is a restored machine')
    },
    async run(progress) {
      const kube = await p.session.kube()
      for (const node of await old()) {
        await p.session.guard()
        await deleteObject(kube, {apiVersion: 'v1', kind: 'Node', name: node.metadata.name})
        progress(`deleted Node ${node.metadata.name}`)
      }
    },
  }
}
