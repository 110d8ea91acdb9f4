// The Lease as a visible step of every mutating plan.
import {LOCK} from '../constants.js'
import {holds, missing} from '../tasks/probe.js'
import type {Task} from '../tasks/types.js'
import type {Session} from './session.js'

export function leaseTask(p: {session: Session; breakLock?: boolean}): Task {
  return {
    id: 'lease',
    title: `Take the ${LOCK.namespace} Lease`,
    mutating: false,
    async probe() {
      const lease = p.session.lease
      return lease && !lease.lost ? holds(`held by ${lease.holder}`) : missing('not held yet')
    },
    async run() {
      await p.session.takeLease({breakLock: p.breakLock})
    },
  }
}
