// The cluster lock (coordination.k8s.io Lease in ichor-system) on the real kube-apiserver.
import {spawnSync} from 'node:child_process'
import {hostname, userInfo} from 'node:os'
import {setTimeout as sleep} from 'node:timers/promises'
import {afterAll, beforeAll, beforeEach, describe, expect, it} from 'vitest'
import {startControlPlane, type ControlPlane} from '../harness/apiserver.js'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {acquireLease, breakLease, LeaseHeldError, readLease} from '../../src/lib/kube/lease.js'

let cp: ControlPlane
let kube: Kube
const leaseUrl = '/apis/coordination.k8s.io/v1/namespaces/ichor-system/leases/ichor-lock'

beforeAll(async () => {
  cp = await startControlPlane()
  kube = await connectKube({kubeconfig: cp.kubeconfigPath})
})
afterAll(async () => {
  await cp?.stop()
})
beforeEach(async () => {
  await breakLease(kube)
})

interface Lease {
  metadata: {resourceVersion: string}
  spec: {holderIdentity?: string; renewTime?: string; acquireTime?: string; leaseDurationSeconds?: number; leaseTransitions?: number}
}

const micro = (ms: number): string => new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z')

/** Writes the lease as some other holder would have left it. */
async function plantLease(holder: string, renewedMsAgo: number, durationSeconds = 30): Promise<void> {
  const spec = {
    holderIdentity: holder,
    leaseDurationSeconds: durationSeconds,
    acquireTime: micro(Date.now() - 600_000),
    renewTime: micro(Date.now() - renewedMsAgo),
  }
  await kube.request('PATCH', leaseUrl, {
    body: {apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: {name: 'ichor-lock', namespace: 'ichor-system'}, spec},
    contentType: 'application/apply-patch+yaml',
    query: {fieldManager: 'other-laptop', force: true},
  })
}

describe('acquireLease', () => {
  it('creates ichor-system and the Lease, naming user@host and pid', async () => {
    const lease = await acquireLease(kube, {command: 'init'})
    try {
      expect(lease.holder).toBe(`${userInfo().username}@${hostname()} pid ${process.pid} (init)`)
      const stored = await kube.request<Lease>('GET', leaseUrl)
      expect(stored.spec.holderIdentity).toBe(lease.holder)
      expect(stored.spec.leaseDurationSeconds).toBe(30)
      expect(stored.spec.renewTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/)
    } finally {
      await lease.release()
    }
  })

  it('refuses a second acquirer, naming the holder and when it acquired and renewed', async () => {
    const first = await acquireLease(kube, {command: 'init'})
    try {
      const error = await acquireLease(kube, {command: 'cni values set'}).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LeaseHeldError)
      const held = error as LeaseHeldError
      expect(held.holder).toBe(first.holder)
      expect(held.message).toContain(`another ichor command holds the lock (Lease ichor-system/ichor-lock): ${first.holder}, acquired 20`)
      expect(held.message).toMatch(/last renewed \S+ \(\d+ s ago\)/)
      expect(held.hint).toContain('--break-lock')
      expect(held.hint).toContain('kubectl -n ichor-system delete lease ichor-lock')
    } finally {
      await first.release()
    }
  })

  it('release frees it for the next command', async () => {
    const first = await acquireLease(kube, {command: 'init'})
    await first.release()
    await first.release() // twice is harmless
    expect((await kube.request<Lease>('GET', leaseUrl)).spec.holderIdentity).toBeUndefined()
    const second = await acquireLease(kube, {command: 'stack sync'})
    expect((await readLease(kube))!.holder).toBe(second.holder)
    await second.release()
  })

  it('renews while held', async () => {
    const lease = await acquireLease(kube, {command: 'init', ttlSeconds: 3})
    try {
      const before = (await kube.request<Lease>('GET', leaseUrl)).spec.renewTime!
      await sleep(2500)
      const after = (await kube.request<Lease>('GET', leaseUrl)).spec.renewTime!
      expect(Date.parse(after)).toBeGreaterThan(Date.parse(before))
      expect(lease.lost).toBe(false)
    } finally {
      await lease.release()
    }
  })

  it('verify before each change never mistakes its own background renewal for a takeover', async () => {
    // A renewal fires every second at this TTL; verifying back to back keeps one of them
    // in flight almost all the time, so any race between the two writes shows here.
    const lease = await acquireLease(kube, {command: 'init', ttlSeconds: 3})
    try {
      const until = Date.now() + 4000
      let verified = 0
      while (Date.now() < until) {
        await lease.verify()
        verified++
      }
      expect(verified).toBeGreaterThan(10)
      expect(lease.lost).toBe(false)
      expect((await readLease(kube))!.holder).toBe(lease.holder)
    } finally {
      await lease.release()
    }
  })

  it('takes over an expired lease of another machine and refuses a live one', async () => {
    await plantLease('bob@other-laptop pid 4242 (init)', 10_000)
    const refused = await acquireLease(kube, {command: 'init'}).catch((e: unknown) => e)
    expect(refused).toBeInstanceOf(LeaseHeldError)
    expect((refused as Error).message).toContain('bob@other-laptop pid 4242 (init)')

    await plantLease('bob@other-laptop pid 4242 (init)', 31_000)
    const transitionsBefore = (await kube.request<Lease>('GET', leaseUrl)).spec.leaseTransitions ?? 0
    const lease = await acquireLease(kube, {command: 'init'})
    try {
      const stored = await kube.request<Lease>('GET', leaseUrl)
      expect(stored.spec.holderIdentity).toBe(lease.holder)
      expect(stored.spec.leaseTransitions).toBe(transitionsBefore + 1)
    } finally {
      await lease.release()
    }
  })

  it('takes over at once from a killed ichor process of the same user on this machine', async () => {
    const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'])
    const deadPid = Number(child.stdout.toString())
    await plantLease(`${userInfo().username}@${hostname()} pid ${deadPid} (init)`, 1000)
    const lease = await acquireLease(kube, {command: 'init'})
    expect((await readLease(kube))!.holder).toBe(lease.holder)
    await lease.release()
  })

  it('lets exactly one of two concurrent acquirers win, from no lease and from an expired one', async () => {
    for (const start of ['absent', 'expired'] as const) {
      for (let round = 0; round < 3; round++) {
        await breakLease(kube)
        if (start === 'expired') await plantLease('bob@other-laptop pid 1 (init)', 60_000)
        const outcomes = await Promise.allSettled([acquireLease(kube, {command: 'init'}), acquireLease(kube, {command: 'cni upgrade'})])
        const won = outcomes.filter((o) => o.status === 'fulfilled')
        const lost = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected')
        expect(won, `${start}, round ${round}`).toHaveLength(1)
        expect(lost[0]!.reason).toBeInstanceOf(LeaseHeldError)
        const winner = (won[0] as PromiseFulfilledResult<Awaited<ReturnType<typeof acquireLease>>>).value
        expect((lost[0]!.reason as LeaseHeldError).holder).toBe(winner.holder)
        expect((await readLease(kube))!.holder).toBe(winner.holder)
        await winner.release()
      }
    }
  })
})

describe('breakLease', () => {
  it('deletes a held lease; the holder notices, does not recreate it, and another command can take it', async () => {
    const lost: string[] = []
    const held = await acquireLease(kube, {command: 'init', ttlSeconds: 3, onLost: (e) => lost.push(e.message)})
    const broken = await breakLease(kube)
    expect(broken!.holder).toBe(held.holder)
    await expect(kube.request('GET', leaseUrl)).rejects.toMatchObject({code: 404})

    // Leases allow create-on-update: a careless renewal PUT would bring the broken lease back.
    for (let i = 0; i < 40 && !held.lost; i++) await sleep(100)
    expect(held.lost).toBe(true)
    expect(lost).toEqual(['lost the lock (Lease ichor-system/ichor-lock): it was deleted (broken with --break-lock?)'])
    expect(() => held.assertHeld()).toThrow(/lost the lock/)
    await expect(kube.request('GET', leaseUrl)).rejects.toMatchObject({code: 404})

    const next = await acquireLease(kube, {command: 'cni upgrade'})
    // The old holder's release must not free the new holder's lease.
    await held.release()
    expect((await readLease(kube))!.holder).toBe(next.holder)
    await next.release()

    expect(await breakLease(kube)).toMatchObject({holder: undefined})
    await breakLease(kube)
    expect(await breakLease(kube)).toBeUndefined()
  })
})
