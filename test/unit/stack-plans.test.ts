// The stack plans that need neither helm, talosctl nor the registry (`stack promote`, `stack
// promotion set`, `stack repair-secrets`), each run whole through the real runner on planFixture
// (test/support/plan-fixture.ts): probe → run → probe (a rerun changes nothing), the consent rule,
// and a stop as every step starts, rerun, ending where an uninterrupted run ends. Kokumi, Argo CD
// and the Deployment controller are not there: three stand-ins below (`controllers`) do the one
// thing each plan waits for, and say so. A stop here closes the session (the Lease is freed);
// a real SIGKILL, which leaves the Lease to a dead process, is on the harness for promote and
// promotion set (test/e2e/stack-manual.test.ts).
import {describe, expect, it} from 'vitest'
import {reportOf} from '../../src/lib/cli/error-report.js'
import {ARGOCD_NAMESPACE, ICHOR_SYSTEM, INSTALLATION, STATE_SECRETS} from '../../src/lib/constants.js'
import type {KubeObject} from '../../src/lib/kube/objects.js'
import {runStackPromotePlan} from '../../src/lib/plans/stack-promote.js'
import {runStackPromotionSetPlan} from '../../src/lib/plans/stack-promotion.js'
import {runStackRepairSecretsPlan} from '../../src/lib/plans/stack-repair-secrets.js'
import {bcryptHash, deriveSalt} from '../../src/lib/stack/bcrypt.js'
import {findSecretMismatches} from '../../src/lib/stack/generated-secrets.js'
import {type PromotionMode, STACK_COMPONENTS, type StackComponent} from '../../src/lib/state/installation-types.js'
import {APPLICATION_API_VERSION, buildOrder, COMPONENT_NAMESPACE, ORDER_API_VERSION} from '../../src/lib/stack/orders.js'
import {APPROVE_DEPLOY_LABEL, AUTO_DEPLOY_LABEL} from '../../src/lib/stack/promote.js'
import {installationCrd} from '../../src/lib/state/installation.js'
import type {RunResult} from '../../src/lib/tasks/types.js'
import {ichorInstallation} from '../support/stack-cluster.js'
import {planFixture, withoutLease, StoppedAt, type FixtureRunOptions, type PlanFixture} from '../support/plan-fixture.js'

type Obj = KubeObject & Record<string, unknown>

const crd = (group: string, kind: string, plural: string, namespaced: boolean, spec: Record<string, unknown> = {}): KubeObject =>
  ({
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {name: `${plural}.${group}`},
    spec: {
      group,
      scope: namespaced ? 'Namespaced' : 'Cluster',
      names: {kind, plural},
      versions: [{name: 'v1alpha1', served: true, storage: true, schema: {openAPIV3Schema: {properties: {spec: {properties: spec}}}}}],
    },
  }) as unknown as KubeObject

const REPO = 'oci://kokumi-registry.kokumi.svc.cluster.local:5000/ichor'
/** Per component: two renders, p1 (tag 1) and p2 (tag 2, the Order's latest), artifact a<n>, rendered from bundle b<n>. */
const digest = (what: string, c: StackComponent, n: 1 | 2) => `sha256:${what}${n}${c}`
const prep = (c: StackComponent) => (n: 1 | 2) => `${c}-p${n}`

interface World {
  promotion: PromotionMode
  /** Which render the Serving (and so the Application) is at. */
  served: 1 | 2
  /** The labels each render carries, Kokumi's `approve-deploy` and `auto-deploy`. */
  approved: (1 | 2)[]
  enabled: (1 | 2)[]
}

/** Kokumi, Argo CD and ichor's state after init, for both components, in the given promotion state. */
function stackCluster(w: World): KubeObject[] {
  const out: KubeObject[] = [
    crd('delivery.kokumi.dev', 'Order', 'orders', true, {promotion: {properties: {mode: {type: 'string'}}}}),
    crd('delivery.kokumi.dev', 'Preparation', 'preparations', true),
    crd('delivery.kokumi.dev', 'Serving', 'servings', true),
    crd('argoproj.io', 'Application', 'applications', true),
    installationCrd(),
    ...[ICHOR_SYSTEM, ...Object.values(COMPONENT_NAMESPACE)].map((name) => ({apiVersion: 'v1', kind: 'Namespace', metadata: {name}})),
    ichorInstallation({promotion: w.promotion, pushed: (c) => ({tag: 't2', digest: digest('b', c, 2)})}),
  ]
  for (const c of STACK_COMPONENTS) {
    const namespace = COMPONENT_NAMESPACE[c]
    const order = buildOrder({component: c, repository: `${REPO}/${c}`, tag: 't2', promotion: w.promotion})
    out.push({
      ...order,
      status: {
        observedGeneration: 1,
        conditions: [{type: 'Ready', status: 'True'}],
        latestPreparationName: prep(c)(2),
        latestArtifactDigest: digest('a', c, 2),
      },
    } as KubeObject)
    for (const n of [1, 2] as const) {
      const labels: Record<string, string> = {
        'delivery.kokumi.dev/order': c,
        'delivery.kokumi.dev/version': `t${n}`,
        [AUTO_DEPLOY_LABEL]: w.enabled.includes(n) ? 'Enabled' : 'Disabled',
        ...(w.approved.includes(n) ? {[APPROVE_DEPLOY_LABEL]: 'true'} : {}),
      }
      out.push({
        apiVersion: ORDER_API_VERSION,
        kind: 'Preparation',
        metadata: {name: prep(c)(n), namespace, labels},
        spec: {orderName: c, source: {oci: `${REPO}/${c}`, baseDigest: digest('b', c, n)}, artifact: {digest: digest('a', c, n)}},
      } as KubeObject)
    }
    out.push({apiVersion: ORDER_API_VERSION, kind: 'Serving', metadata: {name: c, namespace}, spec: {preparationName: prep(c)(w.served)}} as KubeObject)
    out.push(application(c, digest('a', c, w.served)))
  }
  return out
}

function application(c: StackComponent, revision: string): KubeObject {
  return {
    apiVersion: APPLICATION_API_VERSION,
    kind: 'Application',
    metadata: {name: c, namespace: ARGOCD_NAMESPACE},
    status: {sync: {status: 'Synced', revision}, health: {status: 'Healthy'}},
  } as KubeObject
}

/**
 * Stand-ins for the controllers a plan waits on, each the one reaction it needs:
 * - Kokumi's Preparation controller points the Serving at a Preparation written with the
 *   approval or auto-deploy=Enabled, and Argo CD then syncs the Application to its artifact;
 * - the Deployment controller rolls out a Deployment whose spec moved (status at its generation).
 */
function controllers(f: PlanFixture): void {
  f.onWrite((o) => {
    const labels = o.metadata.labels ?? {}
    if (o.kind === 'Preparation' && (labels[APPROVE_DEPLOY_LABEL] === 'true' || labels[AUTO_DEPLOY_LABEL] === 'Enabled')) {
      const c = (o.spec as {orderName: StackComponent}).orderName
      f.put({
        apiVersion: ORDER_API_VERSION,
        kind: 'Serving',
        metadata: {name: c, namespace: o.metadata.namespace},
        spec: {preparationName: o.metadata.name},
      } as KubeObject)
      f.put(application(c, (o.spec as {artifact: {digest: string}}).artifact.digest))
    }
    if (o.kind === 'Deployment') {
      const replicas = (o.spec as {replicas?: number}).replicas ?? 1
      const rolledOut = {observedGeneration: o.metadata.generation, replicas, updatedReplicas: replicas, readyReplicas: replicas, availableReplicas: replicas}
      f.put({...o, status: rolledOut})
    }
  })
}

const secret = (name: string, namespace: string, data: Record<string, string>): KubeObject =>
  ({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {name, namespace},
    data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
  }) as KubeObject

const deployment = (name: string, namespace: string, secretName: string): KubeObject =>
  ({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: {name, namespace},
    spec: {replicas: 1, template: {spec: {volumes: [{name: 'auth', secret: {secretName}}], containers: [{name, image: 'example'}]}}},
    status: {observedGeneration: 1, replicas: 1, updatedReplicas: 1, readyReplicas: 1, availableReplicas: 1},
  }) as KubeObject

/** Both generated Secrets out of step with their components: ichor's Kokumi copy deleted, its redis copy another password. */
function secretsAdrift(): KubeObject[] {
  const signingKey = 'a-signing-key-not-a-secret'
  const hash = bcryptHash('the-running-password', deriveSalt('the-running-password', signingKey), 4)
  return [
    secret('kokumi-server-auth', 'kokumi', {'password-hash': hash, 'signing-key': signingKey}),
    secret('argocd-redis', ARGOCD_NAMESPACE, {auth: 'the-running-redis-password'}),
    secret(STATE_SECRETS.argocdRedis, ICHOR_SYSTEM, {password: 'an-older-redis-password'}),
    deployment('kokumi-server', 'kokumi', 'kokumi-server-auth'),
    deployment('argocd-redis', ARGOCD_NAMESPACE, 'argocd-redis'),
    deployment('argocd-server', ARGOCD_NAMESPACE, 'argocd-secret'),
  ]
}

/** The generated passwords and restart times are new on every run: compared by keys, with both sides proven to agree. */
function withoutGenerated(dump: Record<string, Obj>): Record<string, Obj> {
  return Object.fromEntries(
    Object.entries(dump).map(([path, o]) => {
      if (o.kind === 'Secret') return [path, {...o, data: Object.keys((o.data as object) ?? {}).sort()}]
      const template = (o.spec as {template?: {metadata?: {annotations?: Record<string, string>}}} | undefined)?.template
      if (template?.metadata?.annotations?.['kubectl.kubernetes.io/restartedAt']) template.metadata.annotations['kubectl.kubernetes.io/restartedAt'] = 'a time'
      return [path, o]
    }),
  )
}

interface PlanCase {
  command: string
  objects: () => KubeObject[]
  run: (o: FixtureRunOptions) => Promise<RunResult>
  /** The step ids, Lease first, as the run reports them. */
  steps: string[]
  /** What the end state compares on: the dump, minus what is new on every run. */
  canonical?: (dump: Record<string, Obj>) => Record<string, Obj>
  /** The end state an uninterrupted run (and a stopped one, run again) leaves, beyond every step holding. */
  ended: (f: PlanFixture) => void | Promise<void>
  /** What an uninterrupted run reports. */
  reports?: Record<string, unknown>
}

const labelsOf = (f: PlanFixture, c: StackComponent, n: 1 | 2) => f.get(ORDER_API_VERSION, 'Preparation', prep(c)(n), COMPONENT_NAMESPACE[c])?.metadata.labels

const CASES: PlanCase[] = [
  {
    command: 'stack promote argocd',
    // Promotion Manual: p2 rendered and waiting, p1 approved and served.
    objects: () => stackCluster({promotion: 'Manual', served: 1, approved: [1], enabled: []}),
    run: (o) => runStackPromotePlan({...o, component: 'argocd'}),
    steps: ['lease', 'approve-preparation', 'wait-applications'],
    ended(f) {
      expect(labelsOf(f, 'argocd', 2)?.[APPROVE_DEPLOY_LABEL]).toBe('true')
      expect(labelsOf(f, 'argocd', 1)).not.toHaveProperty(APPROVE_DEPLOY_LABEL)
      // The other component is not touched.
      expect(labelsOf(f, 'kokumi', 1)?.[APPROVE_DEPLOY_LABEL]).toBe('true')
    },
  },
  {
    command: 'stack promotion set Automatic',
    objects: () => stackCluster({promotion: 'Manual', served: 2, approved: [2], enabled: []}),
    run: (o) => runStackPromotionSetPlan({...o, mode: 'Automatic'}),
    steps: ['lease', 'store-promotion', 'order-promotion', 'relabel-preparations', 'wait-applications'],
    ended(f) {
      expect(f.get(INSTALLATION.apiVersion, INSTALLATION.kind, INSTALLATION.name)?.spec).toMatchObject({stack: {promotion: 'Automatic'}})
      for (const c of STACK_COMPONENTS) {
        expect(f.get(ORDER_API_VERSION, 'Order', c, COMPONENT_NAMESPACE[c])?.spec).toMatchObject({promotion: {mode: 'Automatic'}})
        expect([labelsOf(f, c, 1), labelsOf(f, c, 2)]).toEqual([
          expect.objectContaining({[AUTO_DEPLOY_LABEL]: 'Disabled'}),
          expect.objectContaining({[AUTO_DEPLOY_LABEL]: 'Enabled'}),
        ])
        expect(labelsOf(f, c, 2)).not.toHaveProperty(APPROVE_DEPLOY_LABEL)
      }
    },
    reports: {promotion: 'Automatic', awaitingApproval: []},
  },
  {
    command: 'stack promotion set Manual',
    objects: () => stackCluster({promotion: 'Automatic', served: 2, approved: [], enabled: [1, 2]}),
    run: (o) => runStackPromotionSetPlan({...o, mode: 'Manual'}),
    steps: ['lease', 'store-promotion', 'order-promotion', 'relabel-preparations', 'wait-applications'],
    ended(f) {
      for (const c of STACK_COMPONENTS) {
        expect(f.get(ORDER_API_VERSION, 'Order', c, COMPONENT_NAMESPACE[c])?.spec).toMatchObject({promotion: {mode: 'Manual'}})
        // The served render is the one approval, so the Serving stays where it is.
        expect(labelsOf(f, c, 2)).toMatchObject({[APPROVE_DEPLOY_LABEL]: 'true', [AUTO_DEPLOY_LABEL]: 'Disabled'})
        expect(labelsOf(f, c, 1)).toMatchObject({[AUTO_DEPLOY_LABEL]: 'Disabled'})
        expect(labelsOf(f, c, 1)).not.toHaveProperty(APPROVE_DEPLOY_LABEL)
      }
    },
  },
  {
    command: 'stack repair-secrets',
    objects: () => [...stackCluster({promotion: 'Manual', served: 2, approved: [2], enabled: []}), ...secretsAdrift()],
    run: (o) => runStackRepairSecretsPlan(o),
    steps: ['lease', `repair-${STATE_SECRETS.kokumiAdmin}`, `repair-${STATE_SECRETS.argocdRedis}`, 'wait-secret-consumers', 'wait-applications'],
    canonical: withoutGenerated,
    async ended(f) {
      expect(await findSecretMismatches(await f.session.kube())).toEqual([])
      // Only the workloads that read a repaired Secret were restarted.
      expect(f.get('apps/v1', 'Deployment', 'argocd-server', ARGOCD_NAMESPACE)?.metadata.generation).toBe(1)
      expect(f.get('apps/v1', 'Deployment', 'kokumi-server', 'kokumi')?.metadata.generation).toBe(2)
    },
    // The password is shown by the run that set it; a run stopped after that step leaves it to `ichor stack password kokumi`.
    reports: {
      kokumiAdminPassword: expect.any(String),
      repaired: [`${ICHOR_SYSTEM}/${STATE_SECRETS.kokumiAdmin}`, `${ICHOR_SYSTEM}/${STATE_SECRETS.argocdRedis}`],
    },
  },
]

async function cluster(c: PlanCase): Promise<PlanFixture> {
  const f = await planFixture(c.objects())
  controllers(f)
  return f
}

describe.each(CASES)('$command', (c) => {
  it('a run makes every step hold; a second run finds them all holding and changes nothing', async () => {
    const f = await cluster(c)
    const first = await c.run(f.options())
    expect(first.tasks.map((t) => t.id)).toEqual(c.steps)
    expect(first.changed).toBe(true)
    await c.ended(f)
    expect(first).toMatchObject(c.reports ?? {})
    const before = f.writes().length
    const second = await c.run(f.options())
    expect(second.changed).toBe(false)
    expect(second.tasks.map((t) => `${t.id}:${t.status}`)).toEqual(c.steps.map((id) => `${id}:${id === 'lease' ? 'done' : 'skipped'}`))
    expect(withoutLease(f.writes().slice(before))).toEqual([])
  })

  it('without a terminal and without --yes: refused (exit 2, naming --yes) before any request', async () => {
    const f = await cluster(c)
    const error = await c.run(f.options({yes: false})).then(
      () => expect.unreachable('ran'),
      (e: unknown) => e,
    )
    expect(reportOf(error)).toMatchObject({exitCode: 2, message: expect.stringMatching(/--yes/)})
    expect(f.requests).toEqual([])
  })

  it.each(c.steps)('stopped as step %s starts, then run again: the end state of an uninterrupted run', async (step) => {
    const canonical = c.canonical ?? ((d) => d)
    const whole = await cluster(c)
    await c.run(whole.options())
    const stopped = await cluster(c)
    await expect(c.run(stopped.options({stopAt: step}))).rejects.toBeInstanceOf(StoppedAt)
    const rerun = await c.run(stopped.options())
    expect(rerun.tasks.map((t) => t.id)).toEqual(c.steps)
    expect(canonical(stopped.dump())).toEqual(canonical(whole.dump()))
    await c.ended(stopped)
  })
})
