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
import {TalosAccess} from '../../src/lib/talos/access.js'
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
  private tunnelOpen = false
  /** Reading through an open tunnel is a read; opening it is an effect, for a step's enter hook. */
  override registry(): Promise<OciClient> {
    if (!this.tunnelOpen) this.effects.push('open the registry tunnel')
    return Promise.reject(new Error('no registry in this test'))
  }
  override async openRegistry(): Promise<void> {
    this.effects.push('open the registry tunnel')
    this.tunnelOpen = true
  }
  override async closeRegistry(): Promise<void> {
    this.effects.push('close the registry tunnel')
    this.tunnelOpen = false
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
  return {session, ctx: {session, tempDir: '', talos: new TalosAccess(() => session.kube(), {}), onClose: () => undefined}}
}

/**
 * Every step as the engine starts it: its enter hook (which may open or close what this process
 * holds), then its probe twice (before and after the action). Returns what the probes alone did;
 * errors are the cluster not answering.
 */
async function probeAll(session: RecordingSession, steps: Task[]): Promise<string[]> {
  const byProbes: string[] = []
  for (const step of steps) {
    await step.enter?.().catch(() => undefined)
    const before = session.effects.length
    for (let i = 0; i < 2; i++) await step.probe().catch(() => undefined)
    byProbes.push(...session.effects.slice(before).map((e) => `${step.id}: ${e}`))
  }
  return byProbes
}

const never = () => Promise.reject(new Error('not resolved in this test'))
const common = {timeoutMs: 1000, output: 'plain' as const, dryRun: false, yes: true, json: false, sources: {}}

describe('no probe of a built plan has an effect on the session', () => {
  it('stack sync', async () => {
    const {session, ctx} = recording()
    const plan = stackSyncPlan(common)
    expect(await probeAll(session, plan.steps(undefined, ctx))).toEqual([])
  })

  it('stack values set', async () => {
    const {session, ctx} = recording()
    const plan = stackValuesSetPlan({...common, component: 'argocd', input: {files: [], sets: []} as never})
    expect(await probeAll(session, plan.steps({prepared: never, later: never}, ctx))).toEqual([])
  })

  it('init', async () => {
    const {session, ctx} = recording()
    const inputs = {clusterName: 'homelab', controlPlanes: ['192.0.2.10'], workers: []} as unknown as InitInputs
    const steps = initSteps({
      session,
      inputs,
      state: localState('homelab', '/nonexistent'),
      render: never,
      nodes: never,
      reads: ctx.talos.reads,
      generated: {} as never,
      userValues: {cilium: {}, argocd: {}, kokumi: {}},
      allowReboot: false,
      timeoutMs: 1000,
      secrets: {},
    })
    expect(await probeAll(session, steps)).toEqual([])
  })
})
