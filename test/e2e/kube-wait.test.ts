// Rollout waits against the real control plane: the real controllers write the workloads'
// status from pods that kwok machines run (simulated: the machines, two kwok Nodes).
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {startControlPlane, type ControlPlane} from '../harness/apiserver.js'
import {startMachines, type Machines} from '../harness/machines.js'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {serverSideApply} from '../../src/lib/kube/apply.js'
import type {KubeObject} from '../../src/lib/kube/objects.js'
import {
  daemonSetRolloutState,
  deploymentRolloutState,
  statefulSetRolloutState,
  waitFor,
  waitForApiServer,
  waitForDaemonSetReady,
  waitForDeploymentRollout,
  waitForStatefulSetReady,
  WaitTimeoutError,
} from '../../src/lib/kube/wait.js'

let cp: ControlPlane
let kube: Kube
let machines: Machines

beforeAll(async () => {
  cp = await startControlPlane()
  kube = await connectKube({kubeconfig: cp.kubeconfigPath})
  machines = await startMachines(cp.kubeconfigPath, {nodes: 2})
})
afterAll(async () => {
  await machines?.stop()
  await cp?.stop()
})

const podTemplate = {
  metadata: {labels: {app: 'demo'}},
  spec: {containers: [{name: 'demo', image: 'registry.invalid/demo:1'}]},
}

function workloads(ns: string): KubeObject[] {
  return [
    {apiVersion: 'v1', kind: 'Namespace', metadata: {name: ns}},
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: {name: 'web', namespace: ns},
      spec: {replicas: 2, selector: {matchLabels: {app: 'demo'}}, template: podTemplate},
    },
    {
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: {name: 'agent', namespace: ns},
      spec: {selector: {matchLabels: {app: 'demo'}}, template: podTemplate},
    },
    {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: {name: 'db', namespace: ns},
      spec: {replicas: 1, serviceName: 'db', selector: {matchLabels: {app: 'demo'}}, template: podTemplate},
    },
  ]
}

describe('rollout waits (status from the real controllers, pods run by kwok machines)', () => {
  it('wait for Deployment, DaemonSet and StatefulSet until the controllers report them rolled out', async () => {
    const ns = 'rollouts'
    await serverSideApply(kube, workloads(ns))
    const progress: string[] = []
    await waitForDeploymentRollout(kube, ns, 'web', {timeoutMs: 30_000, intervalMs: 100, onProgress: (s) => progress.push(s)})
    expect(progress.at(-1)).toBe('rolled out')
    await waitForDaemonSetReady(kube, ns, 'agent', {timeoutMs: 30_000, intervalMs: 100})
    await waitForStatefulSetReady(kube, ns, 'db', {timeoutMs: 30_000, intervalMs: 100})
  })

  it('times out naming the workload and the state it last saw', async () => {
    const ns = 'stuck'
    const lift = machines.pods.hold((pod) => pod.metadata?.namespace === ns)
    await serverSideApply(kube, workloads(ns))
    const progress: string[] = []
    const error = await waitForDeploymentRollout(kube, ns, 'web', {timeoutMs: 1500, intervalMs: 200, onProgress: (s) => progress.push(s)}).catch(
      (e: unknown) => e,
    )
    await lift()
    expect(error).toBeInstanceOf(WaitTimeoutError)
    expect((error as Error).message).toMatch(
      /^timed out after 2 s waiting for Deployment stuck\/web to roll out; last seen: (0 of 2 updated replicas available|spec update not yet observed|\d of 2 new replicas updated)$/,
    )
    // Progress is reported once per distinct state, not once per poll.
    expect(progress.length).toBeGreaterThan(0)
    expect(progress.every((s, i) => i === 0 || s !== progress[i - 1])).toBe(true)
    expect(progress).not.toContain('rolled out')

    const missing = await waitForDaemonSetReady(kube, ns, 'absent', {timeoutMs: 500, intervalMs: 100}).catch((e: unknown) => e)
    expect((missing as Error).message).toContain('DaemonSet stuck/absent to roll out; last seen: not found')
  })

  it('waits again after a spec change until the new generation is observed', async () => {
    const ns = 'rollouts-again'
    await serverSideApply(kube, workloads(ns))
    // The new pods never turn ready, so only the old generation was ever rolled out.
    const lift = machines.pods.hold((pod) => pod.metadata?.namespace === ns && pod.metadata?.annotations?.bump === '2')
    try {
      await waitForDaemonSetReady(kube, ns, 'agent', {timeoutMs: 30_000, intervalMs: 100})
      const changed = workloads(ns)[2]!
      ;(changed.spec as {template: {metadata: {labels: Record<string, string>; annotations?: Record<string, string>}}}).template.metadata.annotations = {
        bump: '2',
      }
      expect((await serverSideApply(kube, [changed]))[0]!.result).toBe('configured')
      const stale = await waitForDaemonSetReady(kube, ns, 'agent', {timeoutMs: 1500, intervalMs: 100}).catch((e: unknown) => e)
      expect(stale).toBeInstanceOf(WaitTimeoutError)
      expect((stale as Error).message).toMatch(/to roll out; last seen: (spec update not yet observed|\d of 2 new pods updated|\d of 2 pods available)$/)
    } finally {
      await lift()
    }
  })
})

describe('rollout rules (kubectl rollout status)', () => {
  const meta = {name: 'x', namespace: 'n', generation: 3}
  it('Deployment: generation, updated, old and available replicas, progress deadline', () => {
    const d = (status: object, replicas = 3) => ({apiVersion: 'apps/v1', kind: 'Deployment', metadata: meta, spec: {replicas}, status})
    expect(deploymentRolloutState(d({observedGeneration: 2})).state).toBe('spec update not yet observed')
    expect(deploymentRolloutState(d({observedGeneration: 3, updatedReplicas: 1})).state).toBe('1 of 3 new replicas updated')
    expect(deploymentRolloutState(d({observedGeneration: 3, updatedReplicas: 3, replicas: 4})).state).toBe('1 old replicas pending termination')
    expect(deploymentRolloutState(d({observedGeneration: 3, updatedReplicas: 3, replicas: 3, availableReplicas: 2})).state).toBe(
      '2 of 3 updated replicas available',
    )
    expect(deploymentRolloutState(d({observedGeneration: 3, updatedReplicas: 3, replicas: 3, availableReplicas: 3})).done).toBe(true)
    expect(() =>
      deploymentRolloutState(d({observedGeneration: 3, conditions: [{type: 'Progressing', status: 'False', reason: 'ProgressDeadlineExceeded'}]})),
    ).toThrow(/n\/x exceeded its progress deadline/)
  })

  it('DaemonSet and StatefulSet', () => {
    const ds = (status: object) => ({apiVersion: 'apps/v1', kind: 'DaemonSet', metadata: meta, spec: {}, status})
    expect(daemonSetRolloutState(ds({observedGeneration: 3, desiredNumberScheduled: 2, updatedNumberScheduled: 1})).state).toBe('1 of 2 new pods updated')
    expect(daemonSetRolloutState(ds({observedGeneration: 3, desiredNumberScheduled: 2, updatedNumberScheduled: 2, numberAvailable: 1})).state).toBe(
      '1 of 2 pods available',
    )
    expect(daemonSetRolloutState(ds({observedGeneration: 3, desiredNumberScheduled: 2, updatedNumberScheduled: 2, numberAvailable: 2})).done).toBe(true)

    const sts = (status: object, spec: object = {replicas: 2}) => ({apiVersion: 'apps/v1', kind: 'StatefulSet', metadata: meta, spec, status})
    expect(statefulSetRolloutState(sts({observedGeneration: 0})).state).toBe('spec update not yet observed')
    expect(statefulSetRolloutState(sts({observedGeneration: 3, readyReplicas: 1})).state).toBe('1 of 2 pods ready')
    expect(statefulSetRolloutState(sts({observedGeneration: 3, readyReplicas: 2, updateRevision: 'b', currentRevision: 'a', updatedReplicas: 1})).done).toBe(
      false,
    )
    expect(statefulSetRolloutState(sts({observedGeneration: 3, readyReplicas: 2, updateRevision: 'b', currentRevision: 'b'})).done).toBe(true)
    expect(
      statefulSetRolloutState(
        sts(
          {observedGeneration: 3, readyReplicas: 2, updatedReplicas: 1},
          {replicas: 2, updateStrategy: {type: 'RollingUpdate', rollingUpdate: {partition: 1}}},
        ),
      ).done,
    ).toBe(true)
  })
})

describe('waitFor', () => {
  it('returns the value of the first done observation and reports each new state', async () => {
    let n = 0
    const seen: string[] = []
    const value = await waitFor(
      'the counter to reach 3',
      async () => {
        n += 1
        return {done: n >= 3, state: `counter at ${n}`, value: n * 10}
      },
      {intervalMs: 10, onProgress: (s) => seen.push(s)},
    )
    expect(value).toBe(30)
    expect(seen).toEqual(['counter at 1', 'counter at 2', 'counter at 3'])
  })

  it('ends at once on a non-transient error', async () => {
    await expect(
      waitFor('anything', async () => {
        throw new Error('boom')
      }),
    ).rejects.toThrow('boom')
  })

  it('waitForApiServer returns when /readyz answers ok', async () => {
    await waitForApiServer(kube, {timeoutMs: 10_000})
  })
})
