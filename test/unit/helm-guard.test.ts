// Issue 38 point 3: the guard against a hung helm gives helm the time its own rules entitle
// it to (--timeout per wait, three per hook, and the rollback of an --atomic /
// --rollback-on-failure upgrade with the same --timeout: helm v3.18.6 and v4
// pkg/action/upgrade.go failRelease), and never signals it while it rolls back.
import {describe, expect, it} from 'vitest'
import {HELM_GRACE_MS, helmEntitledMs, helmGuardDeadline, hooksOf} from '../../src/lib/helm/guard.js'
import {HELM_RUN_LABEL} from '../../src/lib/helm/local-helms.js'

const T = 300
const ms = (s: number) => s * 1000

describe('helmEntitledMs', () => {
  it('an upgrade with Cilium’s post-upgrade hook that rolls back on failure: the upgrade’s wait and hook, then the rollback’s own wait', () => {
    // hubble-generate-certs: a post-install,post-upgrade Job, not a rollback hook.
    expect(helmEntitledMs({timeoutSeconds: T, hooks: 1, rollback: {hooks: 0}})).toBe(ms(4 * T) + HELM_GRACE_MS + ms(T) + HELM_GRACE_MS)
    // 1560 s, where the guard used to signal at 420 s (--timeout + 120 s).
    expect(helmEntitledMs({timeoutSeconds: T, hooks: 1, rollback: {hooks: 0}})).toBe(1_560_000)
    expect(helmEntitledMs({timeoutSeconds: T, hooks: 0})).toBe(ms(T) + HELM_GRACE_MS)
    expect(helmEntitledMs({timeoutSeconds: 60, hooks: 2, rollback: {hooks: 1}})).toBe(ms(60 * 7) + ms(60 * 4) + 2 * HELM_GRACE_MS)
  })

  it('counts the hooks of a phase from the record', () => {
    const record = {hookEvents: [['post-install', 'post-upgrade'], ['pre-rollback'], ['test']]}
    expect(hooksOf(record, 'upgrade')).toBe(1)
    expect(hooksOf(record, 'rollback')).toBe(1)
    expect(hooksOf(record, 'install')).toBe(1)
    expect(hooksOf(undefined, 'upgrade')).toBe(0)
  })
})

describe('helmGuardDeadline', () => {
  const startedAt = 1_000_000
  const base = {startedAt, timeoutSeconds: T, rollbackOnFailure: true, token: 'mine', marginMs: 120_000}

  it('before any record: the upgrade’s wait and its rollback’s, plus the margin', () => {
    expect(helmGuardDeadline(base)).toBe(startedAt + 2 * (ms(T) + HELM_GRACE_MS) + 120_000)
    expect(helmGuardDeadline({...base, rollbackOnFailure: false})).toBe(startedAt + ms(T) + HELM_GRACE_MS + 120_000)
  })

  it('never while the record says pending-rollback, whoever wrote it and however late', () => {
    const newest = {revision: 3, status: 'pending-rollback', labels: {[HELM_RUN_LABEL]: 'before'}, createdAt: startedAt, hookEvents: []}
    expect(helmGuardDeadline({...base, newest})).toBe(Number.POSITIVE_INFINITY)
    expect(helmGuardDeadline({...base, rollbackOnFailure: false, newest})).toBe(Number.POSITIVE_INFINITY)
  })

  it('this helm’s pending upgrade: from its record, its hooks three times, and the rollback after it', () => {
    const createdAt = startedAt + 5_000 + 2_000 // on the server's clock, 2 s ahead
    const newest = {revision: 2, status: 'pending-upgrade', labels: {[HELM_RUN_LABEL]: 'mine'}, createdAt, hookEvents: [['post-install', 'post-upgrade']]}
    expect(helmGuardDeadline({...base, newest, serverOffsetMs: 2_000})).toBe(startedAt + 5_000 + 1_560_000 + 120_000)
  })

  it('this helm’s failed upgrade: the rollback it is about to start gets its own --timeout from the failure', () => {
    const failedAt = startedAt + ms(900)
    const newest = {
      revision: 2,
      status: 'failed',
      labels: {[HELM_RUN_LABEL]: 'mine', modifiedAt: String(failedAt / 1000)},
      createdAt: startedAt,
      hookEvents: [],
    }
    expect(helmGuardDeadline({...base, newest})).toBe(failedAt + ms(T) + HELM_GRACE_MS + 120_000)
  })

  it('a settled record, or one this helm did not write: the entitlement from the start stands', () => {
    const newest = {
      revision: 1,
      status: 'deployed',
      labels: {[HELM_RUN_LABEL]: 'other', modifiedAt: String(startedAt / 1000)},
      createdAt: startedAt,
      hookEvents: [],
    }
    expect(helmGuardDeadline({...base, newest})).toBe(helmGuardDeadline(base))
  })
})
