// "A probe is read-only" (src/lib/tasks/engine.ts) for every built plan, not only by review
// (issue 20 point 3): each step's probe is called on a real Session whose effects are recorded;
// the cluster never answers, so a probe that reads it stops there, and what is left to observe
// is what a probe does to the session itself (close the registry tunnel, take the Lease).
import {afterEach, describe, expect, it} from 'vitest'
import type {InitInputs} from '../../src/lib/init/inputs.js'
import {initSteps} from '../../src/lib/plans/init.js'
import {stackSyncPlan} from '../../src/lib/plans/stack-sync.js'
import {localState} from '../../src/lib/state/local.js'
import {stackValuesSetPlan} from '../../src/lib/plans/stack-values.js'
import type {PlanContext} from '../../src/lib/plans/run.js'
import {Session} from '../../src/lib/session/session.js'
import type {Kube} from '../../src/lib/kube/client.js'
import type {HeldLease} from '../../src/lib/kube/lease.js'
import type {OciClient} from '../../src/lib/oci/client.js'
import type {Task} from '../../src/lib/tasks/types.js'

class RecordingSession extends Session {
  readonly effects: string[] = []
  override kube(): Promise<Kube> {
    return Promise.reject(new Error('no cluster in this test'))
  }
  /** Opening the tunnel is how a probe reads the registry (as kube() is for the API server): not an effect here. */
  override registry(): Promise<OciClient> {
    return Promise.reject(new Error('no registry in this test'))
  }
  override async closeRegistry(): Promise<void> {
    this.effects.push('close the registry tunnel')
  }
  override takeLease(): Promise<HeldLease> {
    this.effects.push('take the Lease')
    return Promise.reject(new Error('no cluster in this test'))
  }
  override reconnect(): void {
    this.effects.push('forget the client')
  }
}

const sessions: Session[] = []
afterEach(async () => {
  for (const s of sessions.splice(0)) await s.close()
})

function recording(): {session: RecordingSession; ctx: PlanContext} {
  const session = new RecordingSession({command: 'test'})
  sessions.push(session)
  return {session, ctx: {session, tempDir: '', onClose: () => undefined}}
}

/** Every probe, run twice as the engine does (before and after the action); errors are the cluster not answering. */
async function probeAll(steps: Task[]): Promise<void> {
  for (const step of steps) for (let i = 0; i < 2; i++) await step.probe().catch(() => undefined)
}

const never = () => Promise.reject(new Error('not resolved in this test'))
const common = {timeoutMs: 1000, output: 'plain' as const, dryRun: false, yes: true, json: false, sources: {}}

describe('no probe of a built plan has an effect on the session', () => {
  it('stack sync', async () => {
    const {session, ctx} = recording()
    const plan = stackSyncPlan(common)
    await probeAll(plan.steps(undefined, ctx))
    expect(session.effects).toEqual([])
  })

  it('stack values set', async () => {
    const {session, ctx} = recording()
    const plan = stackValuesSetPlan({...common, component: 'argocd', input: {files: [], sets: []} as never})
    await probeAll(plan.steps({prepared: never, later: never}, ctx))
    expect(session.effects).toEqual([])
  })

  it('init', async () => {
    const {session} = recording()
    const inputs = {clusterName: 'homelab', controlPlanes: ['192.0.2.10'], workers: []} as unknown as InitInputs
    const steps = initSteps({
      session,
      inputs,
      state: localState('homelab', '/nonexistent'),
      render: never,
      nodes: never,
      generated: {} as never,
      userValues: {cilium: {}, argocd: {}, kokumi: {}},
      allowReboot: false,
      timeoutMs: 1000,
      secrets: {},
    })
    await probeAll(steps)
    expect(session.effects).toEqual([])
  })
})
