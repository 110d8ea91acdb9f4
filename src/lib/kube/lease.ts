// The cluster-wide lock every mutating command holds: a coordination.k8s.io Lease in
// ichor-system. Writes carry the resourceVersion read just before, so of two racing
// acquirers only one write succeeds. Times are written and compared on the API
// server's clock (estimated from its Date header) so two laptops with skewed clocks
// agree on when a lease expired.
import {hostname, userInfo} from 'node:os'
import {LOCK} from '../constants.js'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import {isAlreadyExists, isConflict, isNotFound, type Kube} from './client.js'
import {createIfAbsent} from './apply.js'

const LEASE_NAMESPACE = LOCK.namespace
const LEASE_NAME = LOCK.name
const LEASE_TTL_SECONDS = 30

export interface LeaseRef {
  namespace?: string
  name?: string
}

export interface AcquireOptions extends LeaseRef {
  /** The command holding the lock, shown to whoever is refused (`init`, `cni values set`). */
  command: string
  ttlSeconds?: number
  /** Called once if the lease is lost while held (broken or taken over after missed renewals). */
  onLost?: (error: IchorError) => void
}

export interface HeldLease {
  holder: string
  namespace: string
  name: string
  /** True once the lease was found taken by someone else or deleted. */
  readonly lost: boolean
  /** Throws if the lease was lost; call between steps that must not run unlocked. */
  assertHeld(): void
  /**
   * Asks the API server whether the lease is still this command's (not deleted by
   * --break-lock, not taken over after this process was paused past its TTL), renewing
   * it; throws LeaseLostError naming the new holder otherwise. Call before each change.
   */
  verify(): Promise<void>
  /** Stops renewing and frees the lease. Never throws: an unreleased lease expires after its TTL. */
  release(): Promise<void>
}

interface LeaseSpec {
  holderIdentity?: string
  leaseDurationSeconds?: number
  acquireTime?: string
  renewTime?: string
  leaseTransitions?: number
}

interface LeaseObject {
  apiVersion: 'coordination.k8s.io/v1'
  kind: 'Lease'
  metadata: {name: string; namespace: string; resourceVersion?: string; labels?: Record<string, string>}
  spec: LeaseSpec
}

export interface LeaseState {
  holder?: string
  acquiredAt?: Date
  renewedAt?: Date
  expiresAt?: Date
}

/** Refused: another live holder has the lease. */
export class LeaseHeldError extends IchorError {
  readonly holder: string
  readonly acquiredAt?: Date
  readonly renewedAt?: Date
  readonly expiresAt?: Date
  constructor(ref: Required<LeaseRef>, state: LeaseState & {holder: string}, now: number) {
    super(
      `another ichor command holds the lock (Lease ${ref.namespace}/${ref.name}): ${state.holder}, ` +
        `acquired ${when(state.acquiredAt, now)}, last renewed ${when(state.renewedAt, now)}` +
        (state.expiresAt ? `, expires ${Math.max(0, Math.ceil((state.expiresAt.getTime() - now) / 1000))} s after that unless renewed` : ''),
      {
        exitCode: EXIT.lease,
        hint:
          'wait for that command to finish and run again. If it is no longer running (its machine went away), ' +
          'the lock expires on its own once it stops being renewed; to take it now run again with --break-lock ' +
          `(or \`kubectl -n ${ref.namespace} delete lease ${ref.name}\`).`,
      },
    )
    this.name = 'LeaseHeldError'
    this.holder = state.holder
    this.acquiredAt = state.acquiredAt
    this.renewedAt = state.renewedAt
    this.expiresAt = state.expiresAt
  }
}

/** The lease was broken or taken over while this command held it. */
class LeaseLostError extends IchorError {
  constructor(
    ref: Required<LeaseRef>,
    why: string,
    readonly newHolder?: string,
  ) {
    super(`lost the lock (Lease ${ref.namespace}/${ref.name}): ${why}`, {
      exitCode: EXIT.lease,
      hint: 'another ichor command may now be changing the cluster; nothing more was changed by this one: check the other command, then run this one again',
    })
    this.name = 'LeaseLostError'
  }
}

function when(date: Date | undefined, now: number): string {
  if (!date) return 'at an unknown time'
  const s = Math.round((now - date.getTime()) / 1000)
  return `${date.toISOString().replace(/\.\d+Z$/, 'Z')} (${s < 120 ? `${s} s` : `${Math.round(s / 60)} min`} ago)`
}

/** `user@host pid <pid> (<command>)`: enough for a person to find the process. */
export function holderIdentity(command: string): string {
  let user: string
  try {
    user = userInfo().username
  } catch {
    // No passwd entry (some containers).
    user = process.env.USER ?? `uid${process.getuid?.() ?? ''}`
  }
  return `${user}@${hostname()} pid ${process.pid} (${command})`
}

const IDENTITY = /^(.+)@(.+) pid (\d+) \((.*)\)$/

/**
 * A holder on this machine, same user, whose process is gone (e.g. killed), so its
 * lease need not be waited out. Another machine's holder is never judged dead here.
 */
function isDeadLocalHolder(holder: string): boolean {
  const m = IDENTITY.exec(holder)
  if (!m) return false
  const [, user, host, pidText] = m
  const pid = Number(pidText)
  if (host !== hostname() || pid === process.pid || !(pid > 0)) return false
  if (user !== holderIdentity('').split('@')[0]) return false
  try {
    process.kill(pid, 0)
    return false
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH'
  }
}

/** Lease timestamps are MicroTime: RFC 3339 with exactly six fractional digits. */
function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z')
}

function stateOf(spec: LeaseSpec): LeaseState {
  const acquiredAt = spec.acquireTime ? new Date(spec.acquireTime) : undefined
  const renewedAt = spec.renewTime ? new Date(spec.renewTime) : undefined
  const expiresAt = renewedAt && spec.leaseDurationSeconds ? new Date(renewedAt.getTime() + spec.leaseDurationSeconds * 1000) : undefined
  return {holder: spec.holderIdentity || undefined, acquiredAt, renewedAt, expiresAt}
}

/** Reads the lock without taking it, e.g. for a status command. */
export async function readLease(kube: Kube, ref: LeaseRef = {}): Promise<LeaseState | undefined> {
  const {namespace, name} = withDefaults(ref)
  try {
    return stateOf((await kube.request<LeaseObject>('GET', leasePath(namespace, name))).spec ?? {})
  } catch (error) {
    if (isNotFound(error)) return undefined
    throw error
  }
}

function withDefaults(ref: LeaseRef): Required<LeaseRef> {
  return {namespace: ref.namespace ?? LEASE_NAMESPACE, name: ref.name ?? LEASE_NAME}
}

function leasePath(namespace: string, name?: string): string {
  const base = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/leases`
  return name === undefined ? base : `${base}/${encodeURIComponent(name)}`
}

/** Estimates the API server's clock from the Date header of each answer. */
export class ServerClock {
  private offsetMs = 0
  observe(dateHeader: string | undefined, sentAt: number, receivedAt: number): void {
    const server = dateHeader ? Date.parse(dateHeader) : Number.NaN
    // The header has whole seconds: add half a second to centre the estimate.
    if (!Number.isNaN(server)) this.offsetMs = server + 500 - (sentAt + receivedAt) / 2
  }
  now(): number {
    return Date.now() + this.offsetMs
  }
}

export async function acquireLease(kube: Kube, options: AcquireOptions): Promise<HeldLease> {
  const ref = withDefaults(options)
  const ttlSeconds = options.ttlSeconds ?? LEASE_TTL_SECONDS
  const holder = holderIdentity(options.command)
  const clock = new ServerClock()

  const call = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    const sentAt = Date.now()
    const res = await kube.requestRaw<T>(method, path, body === undefined ? {} : {body})
    clock.observe(res.headers.date, sentAt, Date.now())
    return res.body
  }

  let lease: LeaseObject | undefined
  // Each lost race re-reads the lease: the winner is then seen as its live holder.
  for (let attempt = 0; attempt < 5 && !lease; attempt++) {
    let current: LeaseObject | undefined
    try {
      current = await call<LeaseObject>('GET', leasePath(ref.namespace, ref.name))
    } catch (error) {
      if (!isNotFound(error)) throw error
    }
    const now = clock.now()
    if (!current) {
      try {
        lease = await call<LeaseObject>('POST', leasePath(ref.namespace), {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: {name: ref.name, namespace: ref.namespace, labels: {'app.kubernetes.io/managed-by': 'ichor'}},
          spec: {holderIdentity: holder, leaseDurationSeconds: ttlSeconds, acquireTime: microTime(now), renewTime: microTime(now), leaseTransitions: 0},
        })
      } catch (error) {
        // NotFound here is the namespace: the first command on a cluster creates it.
        if (isNotFound(error)) await createIfAbsent(kube, {apiVersion: 'v1', kind: 'Namespace', metadata: {name: ref.namespace}})
        else if (!isAlreadyExists(error)) throw error
      }
      continue
    }
    const state = stateOf(current.spec ?? {})
    const live = state.holder && state.expiresAt && state.expiresAt.getTime() > now && !isDeadLocalHolder(state.holder)
    if (live) throw new LeaseHeldError(ref, {...state, holder: state.holder!}, now)
    try {
      lease = await call<LeaseObject>('PUT', leasePath(ref.namespace, ref.name), {
        ...current,
        spec: {
          holderIdentity: holder,
          leaseDurationSeconds: ttlSeconds,
          acquireTime: microTime(now),
          renewTime: microTime(now),
          leaseTransitions: (current.spec?.leaseTransitions ?? 0) + (state.holder ? 1 : 0),
        },
      })
    } catch (error) {
      if (!isConflict(error)) throw error
    }
  }
  if (!lease) throw new IchorError(`could not take Lease ${ref.namespace}/${ref.name}: it kept changing while being taken`)

  let lostError: LeaseLostError | undefined
  let inflight: Promise<void> = Promise.resolve()
  let released = false

  const markLost = (why: string, newHolder?: string): void => {
    if (lostError) return
    lostError = new LeaseLostError(ref, why, newHolder)
    clearInterval(timer)
    options.onLost?.(lostError)
  }

  // Renew by writing renewTime over the version last seen; a 409 means someone else wrote.
  // The body keeps metadata.uid: Leases allow create-on-update, and the uid precondition is
  // what stops a renewal from recreating a lease that was broken (deleted) meanwhile.
  const renew = async (): Promise<void> => {
    if (!lease || lostError || released) return
    const write = (base: LeaseObject): Promise<LeaseObject> =>
      call<LeaseObject>('PUT', leasePath(ref.namespace, ref.name), {...base, spec: {...base.spec, renewTime: microTime(clock.now())}})
    try {
      lease = await write(lease)
    } catch (error) {
      if (isNotFound(error)) return markLost('it was deleted (broken with --break-lock?)')
      if (!isConflict(error)) return // transient: try again next tick, the TTL leaves room
      try {
        const current = await call<LeaseObject>('GET', leasePath(ref.namespace, ref.name))
        if (current.spec?.holderIdentity !== holder)
          return markLost(`it is now held by ${current.spec?.holderIdentity || 'nobody'}`, current.spec?.holderIdentity)
        lease = await write(current)
      } catch (inner) {
        if (isNotFound(inner)) markLost('it was deleted (broken with --break-lock?)')
      }
    }
  }

  // Asks the server who holds the lease, then renews over what it read. A 409 from a write
  // that is not this process's (a label edit, say) is read again: only another holder,
  // or no lease, is a loss.
  const verifyNow = async (): Promise<void> => {
    if (lostError) throw lostError
    for (let attempt = 0; ; attempt++) {
      let current: LeaseObject
      try {
        current = await call<LeaseObject>('GET', leasePath(ref.namespace, ref.name))
      } catch (error) {
        if (!isNotFound(error)) throw error
        markLost('it was deleted (broken with --break-lock?)')
        throw lostError!
      }
      const now = current.spec?.holderIdentity
      if (now !== holder) {
        markLost(`it is now held by ${now || 'nobody'}`, now)
        throw lostError!
      }
      try {
        lease = await call<LeaseObject>('PUT', leasePath(ref.namespace, ref.name), {...current, spec: {...current.spec, renewTime: microTime(clock.now())}})
        return
      } catch (error) {
        if (isConflict(error) && attempt < 3) continue
        if (!isConflict(error) && !isNotFound(error)) throw error
        const after = await readLease(kube, ref)
        markLost(`it is now held by ${after?.holder || 'nobody'}`, after?.holder)
        throw lostError!
      }
    }
  }

  // Every write to the lease (renewal, verify, release) runs one at a time: two of this
  // process's own writes over the same resourceVersion would otherwise conflict, and the
  // loser would take its own holder's 409 for a takeover.
  const serially = <T>(work: () => Promise<T>): Promise<T> => {
    const run = inflight.then(work)
    inflight = run.then(
      () => undefined,
      () => undefined,
    )
    return run
  }

  const timer = setInterval(
    () => {
      void serially(renew).catch(() => undefined)
    },
    Math.max(1000, (ttlSeconds * 1000) / 3),
  )
  // Renewal must not keep a finished command alive.
  timer.unref()

  return {
    holder,
    namespace: ref.namespace,
    name: ref.name,
    get lost() {
      return lostError !== undefined
    },
    assertHeld() {
      if (lostError) throw lostError
    },
    verify() {
      return serially(verifyNow)
    },
    async release() {
      if (released) return
      released = true
      clearInterval(timer)
      await inflight
      if (lostError || !lease) return
      // Free it in place (holder cleared) rather than delete, keeping leaseTransitions.
      const free = (base: LeaseObject): Promise<LeaseObject> => {
        const {holderIdentity: _, acquireTime: __, ...rest} = base.spec ?? {}
        return call<LeaseObject>('PUT', leasePath(ref.namespace, ref.name), {...base, spec: {...rest, renewTime: microTime(clock.now())}})
      }
      try {
        await free(lease)
      } catch (error) {
        if (!isConflict(error)) return
        try {
          const current = await call<LeaseObject>('GET', leasePath(ref.namespace, ref.name))
          if (current.spec?.holderIdentity === holder) await free(current)
        } catch {
          // Nothing left to do: an unreleased lease expires after its TTL.
        }
      }
    },
  }
}

/** Deletes the lock whoever holds it (`--break-lock`); returns what it held, undefined if there was none. */
export async function breakLease(kube: Kube, ref: LeaseRef = {}): Promise<LeaseState | undefined> {
  const {namespace, name} = withDefaults(ref)
  const state = await readLease(kube, {namespace, name})
  if (!state) return undefined
  try {
    await kube.request('DELETE', leasePath(namespace, name))
  } catch (error) {
    if (!isNotFound(error)) throw error
  }
  return state
}
