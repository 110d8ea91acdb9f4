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

/**
 * Closes the registry tunnel as soon as publishing is done: no later step needs the
 * registry, so the operator's credentials are not left reachable for the long wait on Argo CD.
 * The closing is the step's `enter` (dry run included: a local listener, nothing in the
 * cluster), so its probe only reads whether a tunnel is open and a rerun reports it as holding.
 */
export function closeRegistryTunnelTask(p: {session: Session}): Task {
  return {
    id: 'close-registry-tunnel',
    title: 'Close the registry tunnel (publishing is done)',
    mutating: false,
    async enter() {
      await p.session.closeRegistry()
    },
    async probe() {
      return p.session.registryOpen ? missing('the registry tunnel is open') : holds('no registry tunnel open')
    },
    async run() {
      await p.session.closeRegistry()
    },
  }
}

/** A step that talks to Kokumi's registry opens the tunnel as it starts, never in its probe (which only reads). */
export function opensRegistry(session: Session): Pick<Task, 'enter'> {
  return {enter: () => session.openRegistry()}
}
