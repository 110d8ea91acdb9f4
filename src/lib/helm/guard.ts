// The guard against a hung helm process: how long helm is entitled to work on one install or
// upgrade by its own rules, and when ichor may signal it. Helm enforces --timeout per
// operation, not per run: an upgrade waits up to --timeout for its workloads and up to three
// times --timeout per hook (pendingDeadline in pending.ts), and when it fails with --atomic /
// --rollback-on-failure it rolls back with the same --timeout (helm v3.18.6 and v4
// pkg/action/upgrade.go failRelease: rollin.Timeout = u.Timeout), the rollback's own hooks
// included (pkg/action/rollback.go performRollback). A helm signalled during its rollback
// leaves the release pending-rollback for good, so the guard never signals then.
import type {ReleaseRecord} from './release-record.js'
import {HELM_RUN_LABEL} from './local-helms.js'

/** After a --timeout ran out helm still writes the failed record (and a rollback's first record). */
export const HELM_GRACE_MS = 30_000

/** The margin ichor adds to helm's entitlement before it calls a helm hung. */
export const HELM_GUARD_MARGIN_MS = 120_000

/** How often the guard reads the record while helm rolls back. */
export const HELM_GUARD_POLL_MS = 5_000

/** Hooks of a record that run in a phase (upgrade, install, rollback): each may take 3 × --timeout. */
export function hooksOf(record: Pick<ReleaseRecord, 'hookEvents'> | undefined, phase: string): number {
  return (record?.hookEvents ?? []).filter((events) => events.includes(`pre-${phase}`) || events.includes(`post-${phase}`)).length
}

/**
 * The time helm is entitled to for one operation, from the moment it starts: the wait and
 * three times --timeout per hook, plus, for an upgrade that rolls back on failure, the
 * rollback's own wait and hooks; helm's grace after each.
 */
export function helmEntitledMs(p: {timeoutSeconds: number; hooks: number; rollback?: {hooks: number}}): number {
  const t = p.timeoutSeconds * 1000
  const operation = t * (1 + 3 * p.hooks) + HELM_GRACE_MS
  return p.rollback ? operation + t * (1 + 3 * p.rollback.hooks) + HELM_GRACE_MS : operation
}

export interface GuardInput {
  /** When ichor started helm (local clock). */
  startedAt: number
  timeoutSeconds: number
  /** The helm runs an upgrade that rolls back on failure. */
  rollbackOnFailure: boolean
  /** The run token on this helm's --labels. */
  token?: string
  marginMs: number
  /** The release's newest record, read just now; its times are on the API server's clock. */
  newest?: Pick<ReleaseRecord, 'status' | 'labels' | 'createdAt' | 'hookEvents' | 'revision'>
  /** The API server's clock minus the local clock. */
  serverOffsetMs?: number
}

/**
 * When the guard may signal helm (local clock), read from the release's newest record:
 * Infinity while it says pending-rollback (helm is rolling back: never signalled, read again).
 */
export function helmGuardDeadline(g: GuardInput): number {
  const offset = g.serverOffsetMs ?? 0
  const fromStart = g.startedAt + helmEntitledMs({timeoutSeconds: g.timeoutSeconds, hooks: 0, rollback: g.rollbackOnFailure ? {hooks: 0} : undefined})
  const r = g.newest
  if (!r) return fromStart + g.marginMs
  if (r.status === 'pending-rollback') return Number.POSITIVE_INFINITY
  const created = r.createdAt === undefined || Number.isNaN(r.createdAt) ? g.startedAt : r.createdAt - offset
  // helm's Secret driver labels each write with the time of the helm that wrote it (unix
  // seconds, pkg/storage/driver/secrets.go Create, Update): the record's last change. This
  // helm runs here, so that time is on the local clock.
  const modifiedSeconds = Number(r.labels?.modifiedAt ?? r.labels?.createdAt)
  const modified = Number.isFinite(modifiedSeconds) && modifiedSeconds > 0 ? modifiedSeconds * 1000 : created
  const ours = g.token !== undefined && r.labels?.[HELM_RUN_LABEL] === g.token
  if (ours && /^pending-/.test(r.status)) {
    const phase = r.status.replace(/^pending-/, '')
    const rollback = g.rollbackOnFailure ? {hooks: hooksOf(r, 'rollback')} : undefined
    return Math.max(fromStart, created + helmEntitledMs({timeoutSeconds: g.timeoutSeconds, hooks: hooksOf(r, phase), rollback})) + g.marginMs
  }
  if (ours && r.status === 'failed' && g.rollbackOnFailure) {
    // The upgrade failed: helm is about to roll back (a new pending-rollback record).
    return Math.max(fromStart, modified + helmEntitledMs({timeoutSeconds: g.timeoutSeconds, hooks: hooksOf(r, 'rollback')})) + g.marginMs
  }
  // Settled (helm's outcome is written, its rollback's too) or not this helm's record yet.
  return Math.max(fromStart, modified + HELM_GRACE_MS) + g.marginMs
}
