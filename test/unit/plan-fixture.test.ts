// The fake API server behind the plan tests (test/support/plan-fixture.ts): the few API server
// rules the plans rely on, each checked once, so a plan test that passes does so against them.
import {describe, expect, it} from 'vitest'
import {FIELD_MANAGER} from '../../src/lib/constants.js'
import {isAlreadyExists, isConflict, isNotFound} from '../../src/lib/kube/client.js'
import {serverSideApply} from '../../src/lib/kube/apply.js'
import {listObjects, type KubeObject} from '../../src/lib/kube/objects.js'
import type {Plan} from '../../src/lib/plans/run.js'
import {holds, missing} from '../../src/lib/tasks/probe.js'
import type {RunResult} from '../../src/lib/tasks/types.js'
import {planFixture, StoppedAt} from '../support/plan-fixture.js'

const ns = (name: string): KubeObject => ({apiVersion: 'v1', kind: 'Namespace', metadata: {name}})
const cm = (name: string, data: Record<string, string>, labels?: Record<string, string>): KubeObject =>
  ({apiVersion: 'v1', kind: 'ConfigMap', metadata: {name, namespace: 'a', ...(labels ? {labels} : {})}, data}) as KubeObject
const CMS = '/api/v1/namespaces/a/configmaps'

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => expect.unreachable('resolved'),
    (e: unknown) => e,
  )
}

describe('planFixture, the API server rules plans rely on', () => {
  it('POST creates with uid, resourceVersion and generation; a second POST is 409 AlreadyExists; a missing namespace is 404', async () => {
    const f = await planFixture([ns('a')])
    const kube = await f.session.kube()
    const made = await kube.request<KubeObject>('POST', CMS, {body: cm('x', {k: 'v'})})
    expect(made.metadata).toMatchObject({uid: expect.any(String), resourceVersion: expect.stringMatching(/^\d+$/), generation: 1})
    expect(isAlreadyExists(await rejection(kube.request('POST', CMS, {body: cm('x', {k: 'v'})})))).toBe(true)
    expect(isNotFound(await rejection(kube.request('POST', '/api/v1/namespaces/b/configmaps', {body: cm('x', {})})))).toBe(true)
  })

  it('PUT over a stale resourceVersion is 409 Conflict; a write that changes nothing keeps the resourceVersion', async () => {
    const f = await planFixture([ns('a'), cm('x', {k: 'v'})])
    const kube = await f.session.kube()
    const read = await kube.request<KubeObject>('GET', `${CMS}/x`)
    const put = await kube.request<KubeObject>('PUT', `${CMS}/x`, {body: {...read, data: {k: 'w'}}})
    expect(put.metadata.resourceVersion).not.toBe(read.metadata.resourceVersion)
    expect(isConflict(await rejection(kube.request('PUT', `${CMS}/x`, {body: {...read, data: {k: 'z'}}})))).toBe(true)
    const same = await kube.request<KubeObject>('PATCH', `${CMS}/x`, {body: {data: {k: 'w'}}, contentType: 'application/merge-patch+json'})
    expect(same.metadata.resourceVersion).toBe(put.metadata.resourceVersion)
    expect(same.metadata.generation).toBe(2)
  })

  it('a merge patch removes what it sets to null; LIST filters by label selector', async () => {
    const f = await planFixture([ns('a'), cm('x', {}, {app: 'one', tier: 'db'}), cm('y', {}, {app: 'two'})])
    const kube = await f.session.kube()
    await kube.request('PATCH', `${CMS}/x`, {body: {metadata: {labels: {tier: null}}}, contentType: 'application/merge-patch+json'})
    expect(f.get('v1', 'ConfigMap', 'x', 'a')?.metadata.labels).toEqual({app: 'one'})
    const names = async (labelSelector: string) =>
      (await listObjects(kube, {apiVersion: 'v1', kind: 'ConfigMap', namespace: 'a'}, {labelSelector})).map((o) => o.metadata.name)
    expect(await names('app=one')).toEqual(['x'])
    expect(await names('app!=one')).toEqual(['y'])
    expect(await names('app')).toEqual(['x', 'y'])
    expect(await names('!app')).toEqual([])
  })

  it('server-side apply creates, merges and records the field manager; the same apply again is unchanged', async () => {
    const f = await planFixture([ns('a')])
    const kube = await f.session.kube()
    expect(await serverSideApply(kube, [cm('x', {k: 'v'})])).toMatchObject([{result: 'created'}])
    expect(await serverSideApply(kube, [cm('x', {j: 'w'})], {fieldManager: 'other'})).toMatchObject([{result: 'configured'}])
    expect(await serverSideApply(kube, [cm('x', {j: 'w'})], {fieldManager: 'other'})).toMatchObject([{result: 'unchanged'}])
    const x = f.get('v1', 'ConfigMap', 'x', 'a') as KubeObject & {data: unknown; metadata: {managedFields: {manager: string}[]}}
    expect(x.data).toEqual({k: 'v', j: 'w'})
    expect(x.metadata.managedFields.map((m) => m.manager)).toEqual([FIELD_MANAGER, 'other'])
  })

  it('status changes only through the status subresource, and the object itself never changes it', async () => {
    const deploy = {apiVersion: 'apps/v1', kind: 'Deployment', metadata: {name: 'd', namespace: 'a'}, spec: {replicas: 1}, status: {readyReplicas: 1}}
    const f = await planFixture([ns('a'), deploy as KubeObject])
    const kube = await f.session.kube()
    const path = '/apis/apps/v1/namespaces/a/deployments/d'
    await kube.request('PATCH', path, {body: {spec: {replicas: 2}, status: {readyReplicas: 0}}, contentType: 'application/merge-patch+json'})
    expect(f.get('apps/v1', 'Deployment', 'd', 'a')).toMatchObject({spec: {replicas: 2}, status: {readyReplicas: 1}, metadata: {generation: 2}})
    await kube.request('PATCH', `${path}/status`, {body: {spec: {replicas: 3}, status: {readyReplicas: 2}}, contentType: 'application/merge-patch+json'})
    expect(f.get('apps/v1', 'Deployment', 'd', 'a')).toMatchObject({spec: {replicas: 2}, status: {readyReplicas: 2}, metadata: {generation: 2}})
  })

  it('DELETE removes; a second DELETE is 404', async () => {
    const f = await planFixture([ns('a'), cm('x', {})])
    const kube = await f.session.kube()
    await kube.request('DELETE', `${CMS}/x`)
    expect(f.get('v1', 'ConfigMap', 'x', 'a')).toBeUndefined()
    expect(isNotFound(await rejection(kube.request('DELETE', `${CMS}/x`)))).toBe(true)
  })

  describe('run: a plan through the real runner', () => {
    const plan: Plan<void, RunResult> = {
      command: 'fixture test',
      consent: () => 'go?',
      steps: (_, {session}) =>
        ['one', 'two'].map((name) => ({
          id: name,
          title: `make ${name}`,
          async probe() {
            const kube = await session.kube()
            return (await listObjects(kube, {apiVersion: 'v1', kind: 'ConfigMap', namespace: 'a'})).some((o) => o.metadata.name === name)
              ? holds(name)
              : missing(name)
          },
          async run() {
            await (await session.kube()).request('POST', CMS, {body: cm(name, {})})
          },
        })),
      result: (run) => run,
    }

    it('takes the Lease (its namespace created on the way) and frees it; a second run changes nothing', async () => {
      const f = await planFixture([ns('a')])
      expect((await f.run(plan)).tasks.map((t) => `${t.id}:${t.status}`)).toEqual(['lease:done', 'one:done', 'two:done'])
      expect(f.get('coordination.k8s.io/v1', 'Lease', 'ichor-lock', 'ichor-system')).toMatchObject({spec: {leaseTransitions: 0}})
      expect(f.get('coordination.k8s.io/v1', 'Lease', 'ichor-lock', 'ichor-system')?.spec).not.toHaveProperty('holderIdentity')
      const again = await f.run(plan)
      expect(again.changed).toBe(false)
      expect(again.tasks.map((t) => t.status)).toEqual(['done', 'skipped', 'skipped'])
    })

    it('stopAt stops the run as that step starts, before its probe', async () => {
      const f = await planFixture([ns('a')])
      expect(await rejection(f.run(plan, {stopAt: 'two'}))).toBeInstanceOf(StoppedAt)
      expect(Object.keys(f.dump()).filter((p) => p.startsWith(CMS))).toEqual([`${CMS}/one`])
    })
  })
})
