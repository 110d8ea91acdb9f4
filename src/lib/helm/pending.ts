// A helm that outlived the ichor run that started it (ichor was SIGKILLed; Node cannot set
// a parent-death signal) finishes its install or upgrade on its own: ichor deliberately
// does not kill it, since a helm killed mid-operation leaves the release pending-* for
// good and every later helm operation then refuses ("another operation is in progress").
// So before any helm install or upgrade, the next run waits here until the release record
// says no operation is in progress. The record is read from its Secret, without helm.
import {IchorError} from '../errors/errors.js'
import type {Kube} from '../kube/client.js'
import {deleteObject, listObjects} from '../kube/objects.js'
import {readReleaseRecord, type ReleaseRecord} from './release.js'

/** Helm's statuses of an operation in progress (pkg/release/status.go). */
export const PENDING_STATUSES = ['pending-install', 'pending-upgrade', 'pending-rollback'] as const

export function isPending(status: string): boolean {
  return (PENDING_STATUSES as readonly string[]).includes(status)
}

/** The release stayed pending-* for the whole wait: its helm died, or is still busy. */
export class ReleasePendingError extends IchorError {
  constructor(readonly record: ReleaseRecord, waitedMs: number) {
    super(
      `Helm release ${record.namespace}/${record.release} is still ${record.status} (revision ${record.revision}) after waiting ${Math.round(waitedMs / 1000)}s: another helm is working on it, or one was killed mid-operation`,
      {
        hint: `if no helm is running for it any more, roll it back (helm rollback ${record.release} -n ${record.namespace}) or, for a first install, uninstall it; then run the command again`,
      },
    )
    this.name = 'ReleasePendingError'
  }
}

export interface SettleOptions {
  /** How long to wait for a pending operation to end. Default 5 minutes (helm's default --timeout). */
  timeoutMs?: number
  /** Poll interval. Default 1 s. */
  intervalMs?: number
  onProgress?: (message: string) => void
}

/**
 * Waits while the release's newest record is pending-*; resolves to the record once it is
 * not (deployed, failed, ...) or to undefined when the release has no record. Throws
 * ReleasePendingError when it is still pending after `timeoutMs`.
 */
export async function waitForSettledRelease(kube: Kube, release: string, namespace: string, options: SettleOptions = {}): Promise<ReleaseRecord | undefined> {
  const timeoutMs = options.timeoutMs ?? 300_000
  const started = Date.now()
  let record = await readReleaseRecord(kube, release, namespace)
  if (record && isPending(record.status)) {
    options.onProgress?.(`release ${namespace}/${release} is ${record.status}: waiting for the helm working on it to finish`)
  }
  while (record && isPending(record.status)) {
    if (Date.now() - started >= timeoutMs) throw new ReleasePendingError(record, Date.now() - started)
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 1000))
    record = await readReleaseRecord(kube, release, namespace)
  }
  return record
}

/**
 * Waits for a pending operation to end, then recovers one nobody is running any more: its
 * record alone is removed (helm would refuse every later operation with "another operation
 * is in progress"), so the release is back at its last completed revision and the next
 * operation gets the revision number an uninterrupted run would have. Returns the release's
 * newest record afterwards.
 */
export async function settlePendingRelease(
  kube: Kube,
  release: string,
  namespace: string,
  options: {waitMs?: number; progress?: (message: string) => void} = {},
): Promise<ReleaseRecord | undefined> {
  let record: ReleaseRecord | undefined
  try {
    record = await waitForSettledRelease(kube, release, namespace, {timeoutMs: options.waitMs ?? 60_000, onProgress: options.progress})
  } catch (error) {
    if (!(error instanceof ReleasePendingError)) throw error
    record = error.record
  }
  while (record && isPending(record.status)) {
    await deleteObject(kube, {apiVersion: 'v1', kind: 'Secret', namespace, name: record.secretName})
    options.progress?.(`removed the record of revision ${record.revision} (${record.status}), left by an interrupted helm`)
    record = await readReleaseRecord(kube, release, namespace)
  }
  return record
}

/** One revision of a release as the labels of its Secret say (helm's Secret driver sets name, owner, status, version). */
export interface RevisionLabel {
  secretName: string
  revision: number
  status: string
}

/** Every revision of the release, newest first, read from the Secrets' labels without decoding the records. */
export async function releaseHistory(kube: Kube, release: string, namespace: string): Promise<RevisionLabel[]> {
  const secrets = await listObjects(kube, {apiVersion: 'v1', kind: 'Secret', namespace}, {labelSelector: `owner=helm,name=${release}`})
  return secrets
    .filter((s) => s.metadata.name.startsWith(`sh.helm.release.v1.${release}.v`))
    .map((s) => ({secretName: s.metadata.name, revision: Number(s.metadata.labels?.version), status: s.metadata.labels?.status ?? 'unknown'}))
    .filter((r) => Number.isInteger(r.revision))
    .sort((a, b) => b.revision - a.revision)
}

/**
 * An install that never completed: the release's only record is a first revision that is
 * not deployed. Any longer history (superseded, failed or rolled-back revisions) is a
 * release that once deployed, and its records are its rollback history: never deleted.
 */
export function isInterruptedInstall(history: readonly RevisionLabel[]): boolean {
  return history.length === 1 && history[0]!.revision === 1 && history[0]!.status !== 'deployed'
}
