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

/** The API server's clock, estimated from the Date header of one answer to GET /version. */
export async function readServerClock(kube: Kube): Promise<ServerClock> {
  const clock = new ServerClock()
  const sentAt = Date.now()
  const res = await kube.requestRaw('GET', '/version')
  clock.observe(res.headers.date, sentAt, Date.now())
  return clock
}

const DELETED = 'it was deleted (broken with --break-lock?)'

/** One request to the Lease API, its answer's Date header fed to the server clock. */
async function call<T>(kube: Kube, clock: ServerClock, method: string, path: string, body?: unknown): Promise<T> {
  const sentAt = Date.now()
  const res = await kube.requestRaw<T>(method, path, body === undefined ? {} : {body})
  clock.observe(res.headers.date, sentAt, Date.now())
  return res.body
}

/**
 * Takes the lease: created when there is none (its namespace too), written over the version
 * just read when it is free, expired or its holder on this machine is dead. Each lost race
 * re-reads the lease: the winner is then seen as its live holder.
 */
async function take(kube: Kube, clock: ServerClock, ref: Required<LeaseRef>, holder: string, ttlSeconds: number): Promise<LeaseObject> {
  for (let attempt = 0; attempt < 5; attempt++) {
    let current: LeaseObject | undefined
    try {
      current = await call<LeaseObject>(kube, clock, 'GET', leasePath(ref.namespace, ref.name))
    } catch (error) {
      if (!isNotFound(error)) throw error
    }
    const now = clock.now()
    if (!current) {
      try {
        return await call<LeaseObject>(kube, clock, 'POST', leasePath(ref.namespace), {
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
      return await call<LeaseObject>(kube, clock, 'PUT', leasePath(ref.namespace, ref.name), {
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
  throw new IchorError(`could not take Lease ${ref.namespace}/${ref.name}: it kept changing while being taken`)
}

/**
 * The lock while this command holds it, as a type with methods the way k0sctl holds its
 * lock (k0sproject/k0sctl phase/lock.go: take it, keep it alive in the background, give it
 * back, and stop when it is lost): `acquire`, the renewal timer, `release`, and the lost
 * signal (`onLost`, `lost`, `assertHeld`, `verify`).
 */
export class HeldLease {
  readonly namespace: string
  readonly name: string
  private lostError?: LeaseLostError
  private inflight: Promise<void> = Promise.resolve()
  private released = false
  private readonly timer: NodeJS.Timeout

  private constructor(
    private readonly kube: Kube,
    private readonly clock: ServerClock,
    private readonly ref: Required<LeaseRef>,
    readonly holder: string,
    private lease: LeaseObject,
    ttlSeconds: number,
    private readonly onLost?: (error: IchorError) => void,
  ) {
    this.namespace = ref.namespace
    this.name = ref.name
    this.timer = setInterval(
      () => {
        void this.serially(() => this.renew()).catch(() => undefined)
      },
      Math.max(1000, (ttlSeconds * 1000) / 3),
    )
    // Renewal must not keep a finished command alive.
    this.timer.unref()
  }

  /** Takes the lease (LeaseHeldError when another live holder has it) and starts renewing it. */
  static async acquire(kube: Kube, options: AcquireOptions): Promise<HeldLease> {
    const ref = withDefaults(options)
    const ttlSeconds = options.ttlSeconds ?? LEASE_TTL_SECONDS
    const holder = holderIdentity(options.command)
    const clock = new ServerClock()
    const lease = await take(kube, clock, ref, holder, ttlSeconds)
    return new HeldLease(kube, clock, ref, holder, lease, ttlSeconds, options.onLost)
  }

  /** True once the lease was found taken by someone else or deleted. */
  get lost(): boolean {
    return this.lostError !== undefined
  }

  /** Throws if the lease was lost; call between steps that must not run unlocked. */
  assertHeld(): void {
    if (this.lostError) throw this.lostError
  }

  /**
   * Asks the API server whether the lease is still this command's (not deleted by
   * --break-lock, not taken over after this process was paused past its TTL), renewing
   * it; throws LeaseLostError naming the new holder otherwise. Call before each change.
   */
  verify(): Promise<void> {
    return this.serially(() => this.verifyNow())
  }

  /** Stops renewing and frees the lease. Never throws: an unreleased lease expires after its TTL. */
  async release(): Promise<void> {
    if (this.released) return
    this.released = true
    clearInterval(this.timer)
    await this.inflight
    if (this.lostError) return
    // Free it in place (holder cleared) rather than delete, keeping leaseTransitions.
    const free = (base: LeaseObject): Promise<LeaseObject> => {
      const {holderIdentity: _, acquireTime: __, ...rest} = base.spec ?? {}
      return this.put({...base, spec: {...rest, renewTime: microTime(this.clock.now())}})
    }
    try {
      await free(this.lease)
    } catch (error) {
      if (!isConflict(error)) return
      try {
        const current = await this.get()
        if (current.spec?.holderIdentity === this.holder) await free(current)
      } catch {
        // Nothing left to do: an unreleased lease expires after its TTL.
      }
    }
  }

  private get(): Promise<LeaseObject> {
    return call<LeaseObject>(this.kube, this.clock, 'GET', leasePath(this.ref.namespace, this.ref.name))
  }

  private put(body: LeaseObject): Promise<LeaseObject> {
    return call<LeaseObject>(this.kube, this.clock, 'PUT', leasePath(this.ref.namespace, this.ref.name), body)
  }

  /** `base` with renewTime now, written over its resourceVersion. */
  private renewed(base: LeaseObject): Promise<LeaseObject> {
    return this.put({...base, spec: {...base.spec, renewTime: microTime(this.clock.now())}})
  }

  private markLost(why: string, newHolder?: string): LeaseLostError {
    if (!this.lostError) {
      this.lostError = new LeaseLostError(this.ref, why, newHolder)
      clearInterval(this.timer)
      this.onLost?.(this.lostError)
    }
    return this.lostError
  }

  // Renew by writing renewTime over the version last seen; a 409 means someone else wrote.
  // The body keeps metadata.uid: Leases allow create-on-update, and the uid precondition is
  // what stops a renewal from recreating a lease that was broken (deleted) meanwhile.
  private async renew(): Promise<void> {
    if (this.lostError || this.released) return
    try {
      this.lease = await this.renewed(this.lease)
    } catch (error) {
      if (isNotFound(error)) return void this.markLost(DELETED)
      if (!isConflict(error)) return // transient: try again next tick, the TTL leaves room
      try {
        const current = await this.get()
        const holder = current.spec?.holderIdentity
        if (holder !== this.holder) return void this.markLost(`it is now held by ${holder || 'nobody'}`, holder)
        this.lease = await this.renewed(current)
      } catch (inner) {
        if (isNotFound(inner)) this.markLost(DELETED)
      }
    }
  }

  // Asks the server who holds the lease, then renews over what it read. A 409 from a write
  // that is not this process's (a label edit, say) is read again: only another holder,
  // or no lease, is a loss.
  private async verifyNow(): Promise<void> {
    if (this.lostError) throw this.lostError
    for (let attempt = 0; ; attempt++) {
      let current: LeaseObject
      try {
        current = await this.get()
      } catch (error) {
        if (!isNotFound(error)) throw error
        throw this.markLost(DELETED)
      }
      const holder = current.spec?.holderIdentity
      if (holder !== this.holder) throw this.markLost(`it is now held by ${holder || 'nobody'}`, holder)
      try {
        this.lease = await this.renewed(current)
        return
      } catch (error) {
        if (isConflict(error) && attempt < 3) continue
        if (!isConflict(error) && !isNotFound(error)) throw error
        const after = await readLease(this.kube, this.ref)
        throw this.markLost(`it is now held by ${after?.holder || 'nobody'}`, after?.holder)
      }
    }
  }

  // Every write to the lease (renewal, verify, release) runs one at a time: two of this
  // process's own writes over the same resourceVersion would otherwise conflict, and the
  // loser would take its own holder's 409 for a takeover.
  private serially<T>(work: () => Promise<T>): Promise<T> {
    const run = this.inflight.then(work)
    this.inflight = run.then(
      () => undefined,
      () => undefined,
    )
    return run
  }
}

/** Takes the lock for `options.command`: `HeldLease.acquire`. */
export function acquireLease(kube: Kube, options: AcquireOptions): Promise<HeldLease> {
  return HeldLease.acquire(kube, options)
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
