// What wakes a simulator's loop: a watch event on the kinds its controller watches, or its resync
// period. Kokumi's and Argo CD's controllers and Cilium's operator are informer-driven: they act
// on a watch event at once and list everything again only on a resync. Polling every kind every
// 300 ms instead cost, on an idle converged 1+1 cluster, 17 CPU-seconds a minute in the test
// process and 11 in the API server; woken by watch events, 5.6 and 4.0.
import {Watch, type KubeConfig} from '@kubernetes/client-node'

export interface Waker {
  /** Resolves at the first watch event since the last wait returned, or after `ms`; at once when one came in meanwhile. */
  wait(ms: number): Promise<void>
  /** Whether a watch event came in during the last `ms`: the controllers are busy, and so should the loop be. */
  busy(ms: number): boolean
  /** Ends the watches and any wait. */
  stop(): void
}

/**
 * Watches each path (a collection URL, with `fieldSelector`/`labelSelector` in `query`) and wakes
 * the waiter on any event. A watch that ends or fails (a kind whose CRD is not there yet, the API
 * server stopping) starts again after `retryMs`; an event on a kind missed while it was down is
 * what the resync is for, as an informer's relist is.
 */
export function wakeOnWatch(kc: KubeConfig, paths: Array<{path: string; query?: Record<string, string>}>, retryMs = 1000): Waker {
  let stopped = false
  let dirty = false
  let lastEvent = 0
  let wake: (() => void) | undefined
  const aborts = new Set<() => void>()
  const poke = (): void => {
    dirty = true
    lastEvent = Date.now()
    wake?.()
  }

  const watchOne = async (path: string, query: Record<string, string>): Promise<void> => {
    while (!stopped) {
      let abort: (() => void) | undefined
      await new Promise<void>((resolve) => {
        new Watch(kc)
          .watch(path, query, poke, () => resolve())
          .then((controller) => {
            abort = () => controller.abort()
            aborts.add(abort)
            if (stopped) abort()
          })
          .catch(() => resolve())
      })
      if (abort) aborts.delete(abort)
      if (!stopped) await new Promise((r) => setTimeout(r, retryMs))
    }
  }
  for (const {path, query} of paths) void watchOne(path, query ?? {})

  return {
    async wait(ms) {
      if (!dirty && !stopped) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, ms)
          wake = () => {
            clearTimeout(timer)
            resolve()
          }
        })
      }
      wake = undefined
      dirty = false
    },
    busy(ms) {
      return Date.now() - lastEvent < ms
    },
    stop() {
      stopped = true
      for (const abort of aborts) abort()
      wake?.()
    },
  }
}
