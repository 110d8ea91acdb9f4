// A helm that outlived the ichor run that started it (ichor was SIGKILLed; Node cannot set
// a parent-death signal) finishes its install or upgrade on its own: ichor deliberately
// does not kill it, since a helm killed mid-operation leaves the release pending-* for
// good and every later helm operation then refuses ("another operation is in progress").
// So before any helm install or upgrade, the next run waits here until the release record
// says no operation is in progress. The record is read from its Secret, without helm.
import {IchorError} from '../errors/errors.js'
import type {Kube} from '../kube/client.js'
import {deleteObject, listObjects} from '../kube/objects.js'
import {readServerClock, type ServerClock} from '../kube/lease.js'
import {HELM_MACHINE_LABEL, HELM_RUN_LABEL, helmRunningHere, machineMark} from './local-helms.js'
import {HELM_TIMEOUT_LABEL} from './release.js'
import {helmEntitledMs, hooksOf} from './guard.js'
import {readReleaseRecord, type ReleaseRecord} from './release-record.js'

/** Helm's statuses of an operation in progress (pkg/release/status.go). */
const PENDING_STATUSES = ['pending-install', 'pending-upgrade', 'pending-rollback'] as const

export function isPending(status: string): boolean {
  return (PENDING_STATUSES as readonly string[]).includes(status)
}

/** The release stayed pending-* for the whole wait: its helm died, or is still busy. */
export class ReleasePendingError extends IchorError {
  constructor(
    readonly record: ReleaseRecord,
    waitedMs: number,
    /** Written by a helm ichor did not start: ichor never removes such a record. */
    readonly foreign = false,
    /** Written by a helm ichor started on this machine whose exact process no longer runs. */
    readonly writerGone = false,
  ) {
    const who = foreign
      ? 'a helm ichor did not start wrote it (its ichor labels, if any, are copied from the revision before) and may still be working on it'
      : writerGone
        ? 'the helm ichor started to write it is no longer running'
        : 'ichor cannot prove the helm that wrote it stopped (one paused, or on another machine, wakes and writes the record again), so it removes nothing'
    super(
      `Helm release ${record.namespace}/${record.release} is still ${record.status} (revision ${record.revision}, Secret ${record.secretName}) after waiting ${Math.round(waitedMs / 1000)}s: ${who}`,
      {
        hint: `${foreign ? 'let that helm finish; ' : ''}once no helm runs for it any more (check every machine that may run one), roll it back (helm rollback ${record.release} -n ${record.namespace}: a new revision, the pending one stays in the history) or, for a first install, uninstall it; then run the command again`,
      },
    )
    this.name = 'ReleasePendingError'
  }
}

export interface SettleOptions {
  /**
   * How long to wait for a pending operation to end. Without it, until the helm that wrote
   * the record can no longer be running (pendingDeadline).
   */
  timeoutMs?: number
  /** The --timeout to assume for a record without ichor's label (a helm ichor did not start). Default helm's own, 300 s. */
  unlabelledTimeoutMs?: number
  /** Poll interval. Default 1 s. */
  intervalMs?: number
  onProgress?: (message: string) => void
}

/**
 * When the helm that wrote a pending record can no longer be running, on the API server's
 * clock: the record's creation plus the --timeout ichor gave that helm (its Secret's label)
 * once for the wait and three times for each hook of the operation, since helm waits up to
 * --timeout for a hook's deletion before it is created, for the hook itself, and for its
 * deletion after it succeeded (helm v4.3.2 pkg/action/hooks.go execHookWithDelayedShutdown,
 * deleteHookByPolicy; v3.18.6 the same). A rollback helm started after a failed upgrade
 * carries the label of the revision it restores, so the failed upgrade's counts too.
 */
export function pendingDeadline(
  record: ReleaseRecord,
  history: readonly RevisionLabel[],
  unlabelledTimeoutMs = 300_000,
): {deadline: number; timeoutSeconds: number | undefined} {
  const ours = ichorWrote(record, history)
  const own = ours ? labelledTimeout(record.labels) : undefined
  const before = ours && record.status === 'pending-rollback' ? history.find((r) => r.revision === record.revision - 1)?.timeoutSeconds : undefined
  const known = [own, before].filter((t): t is number => t !== undefined)
  const timeoutSeconds = known.length ? Math.max(...known) : undefined
  const timeoutMs = timeoutSeconds === undefined ? unlabelledTimeoutMs : timeoutSeconds * 1000
  const hooks = hooksOf(record, record.status.replace(/^pending-/, ''))
  const created = record.createdAt === undefined || Number.isNaN(record.createdAt) ? Date.now() : record.createdAt
  return {deadline: created + helmEntitledMs({timeoutSeconds: timeoutMs / 1000, hooks}), timeoutSeconds}
}

/**
 * A helm ichor started wrote the record: an install's or upgrade's record carries a run token
 * the revision before it does not (helm copies the last revision's labels forward, so a token
 * equal to the one before was copied by a helm ichor did not start). A rollback's record
 * carries the labels of the revision it restores (helm pkg/action/rollback.go
 * prepareRollback), so nothing on it names its writer: it is ichor's only while the helm
 * ichor started for the upgrade it rolls back (--atomic / --rollback-on-failure) is provably
 * the writer: that upgrade failed, ran on this machine, and its exact process still runs.
 * An operator's `helm rollback` right after an ichor upgrade looks the same on the record.
 */
export function ichorWrote(
  record: Pick<ReleaseRecord, 'revision' | 'status' | 'labels'>,
  history: readonly RevisionLabel[],
  running: (token: string) => boolean = helmRunningHere,
): boolean {
  const at = (revision: number) => history.find((r) => r.revision === revision)
  if (record.status === 'pending-rollback') {
    const upgrade = at(record.revision - 1)
    const here = machineMark()
    return (
      upgrade?.runToken !== undefined &&
      upgrade.runToken !== at(record.revision - 2)?.runToken &&
      upgrade.status === 'failed' &&
      here !== undefined &&
      upgrade.machine === here &&
      running(upgrade.runToken)
    )
  }
  const own = record.labels?.[HELM_RUN_LABEL]
  return own !== undefined && own !== at(record.revision - 1)?.runToken
}

/**
 * The record was written by a helm ichor started on this machine (its machine label) that no
 * longer runs here (local-helms.ts). Only for an install's or an upgrade's record, whose
 * token is that of the helm that wrote it; a rollback's record carries the labels of the
 * revision it restores, which another machine's helm may be rolling back to: it is waited out.
 */
function leftByGoneLocalHelm(record: ReleaseRecord, history: readonly RevisionLabel[]): boolean {
  if (record.status !== 'pending-install' && record.status !== 'pending-upgrade') return false
  const here = machineMark()
  const token = record.labels?.[HELM_RUN_LABEL]
  return here !== undefined && token !== undefined && record.labels?.[HELM_MACHINE_LABEL] === here && ichorWrote(record, history) && !helmRunningHere(token)
}

function labelledTimeout(labels: Record<string, string> | undefined): number | undefined {
  const value = Number(labels?.[HELM_TIMEOUT_LABEL])
  return Number.isInteger(value) && value > 0 ? value : undefined
}

/**
 * Waits while the release's newest record is pending-*; resolves to the record once it is
 * not (deployed, failed, ...) or to undefined when the release has no record. Throws
 * ReleasePendingError when it is still pending after `timeoutMs` or, without one, once the
 * helm that wrote it can no longer be running.
 */
export async function waitForSettledRelease(kube: Kube, release: string, namespace: string, options: SettleOptions = {}): Promise<ReleaseRecord | undefined> {
  const started = Date.now()
  let record = await readReleaseRecord(kube, release, namespace)
  let clock: ServerClock | undefined
  let told: string | undefined
  while (record && isPending(record.status)) {
    const history = await releaseHistory(kube, release, namespace)
    if (leftByGoneLocalHelm(record, history)) {
      options.onProgress?.(
        `release ${namespace}/${release} is ${record.status} (revision ${record.revision}), written by a helm on this machine that is no longer running`,
      )
      throw new ReleasePendingError(record, Date.now() - started, false, true)
    }
    let deadline: number
    if (options.timeoutMs !== undefined) deadline = started + options.timeoutMs
    else {
      clock ??= await readServerClock(kube) // the record's times are on the API server's clock
      const d = pendingDeadline(record, history, options.unlabelledTimeoutMs)
      // On the local clock from here on.
      deadline = d.deadline - (clock.now() - Date.now())
      const key = `${record.revision} ${record.status}`
      if (told !== key) {
        told = key
        const wait = `ichor waits for it up to ${Math.max(0, Math.round((deadline - Date.now()) / 1000))}s`
        options.onProgress?.(
          ichorWrote(record, history)
            ? `release ${namespace}/${release} is ${record.status} (revision ${record.revision}): a helm from an interrupted run is still working on it: ${wait} (${d.timeoutSeconds === undefined ? `helm's default --timeout: no ichor label on it` : `the --timeout ${d.timeoutSeconds}s it was given`})`
            : `release ${namespace}/${release} is ${record.status} (revision ${record.revision}): a helm ichor did not start is working on it: ${wait} (helm's default --timeout), and never removes its record`,
        )
      }
    }
    if (options.timeoutMs !== undefined && told === undefined) {
      told = 'told'
      options.onProgress?.(`release ${namespace}/${release} is ${record.status}: waiting for the helm working on it to finish`)
    }
    if (Date.now() >= deadline) throw new ReleasePendingError(record, Date.now() - started, !ichorWrote(record, history))
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 1000))
    record = await readReleaseRecord(kube, release, namespace)
  }
  return record
}

/**
 * Waits for a pending operation to end, then recovers one whose helm is provably gone: a
 * record written by a helm ichor started on this machine whose exact process no longer runs
 * (local-helms.ts) is removed (helm would refuse every later operation with "another
 * operation is in progress"), so the release is back at its last completed revision and the
 * next operation gets the revision number an uninterrupted run would have. Any other record
 * still pending once its helm's time is up is left as it is and stops the run, naming it and
 * `helm rollback`: helm's Secret driver replaces a record without a resourceVersion (v3.18.6
 * and v4 pkg/storage/driver/secrets.go Update), so nothing fences a writer that was only
 * paused (a closed laptop lid): it would overwrite the record of whatever ran meanwhile.
 * Helm never deletes records either (helm#7653). Returns the release's newest record.
 */
export async function settlePendingRelease(
  kube: Kube,
  release: string,
  namespace: string,
  options: {
    /** The --timeout to assume for a pending record ichor did not label (default helm's 300 s); a labelled one is waited out whatever this says. */
    waitMs?: number
    progress?: (message: string) => void
  } = {},
): Promise<ReleaseRecord | undefined> {
  for (;;) {
    try {
      return await waitForSettledRelease(kube, release, namespace, {unlabelledTimeoutMs: options.waitMs, onProgress: options.progress})
    } catch (error) {
      if (!(error instanceof ReleasePendingError) || !error.writerGone) throw error
      await deleteObject(kube, {apiVersion: 'v1', kind: 'Secret', namespace, name: error.record.secretName})
      options.progress?.(
        `removed the record of revision ${error.record.revision} (${error.record.status}), left by a helm ichor started on this machine that is no longer running`,
      )
    }
  }
}

/** One revision of a release as the labels of its Secret say (helm's Secret driver sets name, owner, status, version). */
export interface RevisionLabel {
  secretName: string
  revision: number
  status: string
  /** The --timeout ichor gave the helm that wrote it, when ichor did. */
  timeoutSeconds?: number
  /** The token of the helm ichor started to write it, or copied from the revision before. */
  runToken?: string
  /** The machine mark of the helm that wrote it, or copied from the revision before. */
  machine?: string
}

/** Every revision of the release, newest first, read from the Secrets' labels without decoding the records. */
export async function releaseHistory(kube: Kube, release: string, namespace: string): Promise<RevisionLabel[]> {
  const secrets = await listObjects(kube, {apiVersion: 'v1', kind: 'Secret', namespace}, {labelSelector: `owner=helm,name=${release}`})
  return secrets
    .filter((s) => s.metadata.name.startsWith(`sh.helm.release.v1.${release}.v`))
    .map((s) => ({
      secretName: s.metadata.name,
      revision: Number(s.metadata.labels?.version),
      status: s.metadata.labels?.status ?? 'unknown',
      timeoutSeconds: labelledTimeout(s.metadata.labels),
      runToken: s.metadata.labels?.[HELM_RUN_LABEL],
      machine: s.metadata.labels?.[HELM_MACHINE_LABEL],
    }))
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
