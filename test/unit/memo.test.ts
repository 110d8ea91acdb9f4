// The one memo rule (src/lib/tasks/memo.ts): callers share one promise while it runs and after
// it resolves; a rejection is forgotten, so the next call tries again; forget() drops a result.
import {describe, expect, it} from 'vitest'
import {ciliumReleaseView} from '../../src/lib/cilium/tasks.js'
import type {Session} from '../../src/lib/session/session.js'
import {once} from '../../src/lib/tasks/memo.js'

describe('once', () => {
  it('concurrent callers share one call; a resolved value is kept', async () => {
    let calls = 0
    let release!: (n: number) => void
    const get = once(() => {
      calls++
      return new Promise<number>((resolve) => (release = resolve))
    })
    const [a, b] = [get(), get()]
    expect(a).toBe(b)
    release(7)
    expect(await Promise.all([a, b, get()])).toEqual([7, 7, 7])
    expect(calls).toBe(1)
  })

  it('a rejection reaches every caller that shared it, then is forgotten: the next call retries', async () => {
    const answers: Array<() => Promise<string>> = [async () => Promise.reject(new Error('blip')), async () => 'ok']
    let calls = 0
    const get = once(() => answers[calls++]!())
    const [a, b] = [get(), get()]
    await expect(a).rejects.toThrow('blip')
    await expect(b).rejects.toThrow('blip')
    expect(await get()).toBe('ok')
    expect(await get()).toBe('ok')
    expect(calls).toBe(2)
  })

  it('a function that throws before returning a promise counts as a rejection', async () => {
    let calls = 0
    const get = once((): Promise<number> => {
      if (calls++ === 0) throw new Error('sync')
      return Promise.resolve(1)
    })
    await expect(get()).rejects.toThrow('sync')
    expect(await get()).toBe(1)
  })

  it('forget() drops the kept value and hands back the promise it held', async () => {
    let n = 0
    const get = once(async () => ++n)
    expect(await get()).toBe(1)
    expect(await get.forget()).toBe(1)
    expect(get.forget()).toBeUndefined()
    expect(await get()).toBe(2)
  })
})

describe('a converted memo: the Cilium release view', () => {
  it('reads once for concurrent probes, again after a failed read and after forget()', async () => {
    let reads = 0
    // The fake client answers the one list readCiliumRelease makes: the first read fails, then no release.
    const kube = {
      request: async () => {
        reads++
        if (reads === 1) throw new Error('connection reset')
        return {items: []}
      },
    }
    const session = {kube: async () => kube} as unknown as Session
    const view = ciliumReleaseView(session)
    await expect(view.get()).rejects.toThrow('connection reset')
    const [a, b] = [view.get(), view.get()]
    expect(a).toBe(b)
    expect(await a).toBeUndefined()
    expect(reads).toBe(2)
    view.forget()
    await view.get()
    expect(reads).toBe(3)
  })
})
