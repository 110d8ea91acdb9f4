// `ichor open`'s resolution, as `kubectl port-forward svc/NAME` makes it: Service → selector →
// a running, ready pod → the Service port's targetPort (a number, or a container port's name),
// against a fake API server; the pod is waited for up to the timeout.
import {describe, expect, it} from 'vitest'
import {IchorError} from '../../src/lib/errors/errors.js'
import type {KubeObject} from '../../src/lib/kube/objects.js'
import {resolvePod} from '../../src/lib/open/open.js'
import {OPEN_TARGETS} from '../../src/lib/open/targets.js'
import {sessionFixture} from '../support/session-fixture.js'

const service = (
  namespace: string,
  name: string,
  ports: Array<Record<string, unknown>>,
  selector: Record<string, string> | undefined = {app: name},
): KubeObject => ({apiVersion: 'v1', kind: 'Service', metadata: {name, namespace}, spec: {selector, ports}}) as KubeObject

const pod = (
  namespace: string,
  name: string,
  o: {labels?: Record<string, string>; phase?: string; ready?: boolean; deleting?: boolean; ports?: Array<{name: string; containerPort: number}>} = {},
): KubeObject =>
  ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {name, namespace, labels: o.labels ?? {}, ...(o.deleting ? {deletionTimestamp: '2026-01-01T00:00:00Z'} : {})},
    spec: {containers: [{name: 'main', ports: o.ports ?? []}]},
    status: {phase: o.phase ?? 'Running', conditions: [{type: 'Ready', status: o.ready === false ? 'False' : 'True'}]},
  }) as KubeObject

const argocd = OPEN_TARGETS.argocd
const hubble = OPEN_TARGETS.hubble
const server = {app: 'argocd-server'}

describe('ichor open: Service, pod and port', () => {
  it("the https Service port's named targetPort is the container port of that name, on the ready pod (not the unready, pending or deleting ones)", async () => {
    const {session} = await sessionFixture([
      service('argocd', 'argocd-server', [
        {name: 'http', port: 80, targetPort: 8080},
        {name: 'https', port: 443, targetPort: 'server'},
      ]),
      pod('argocd', 'a-unready', {labels: server, ready: false, ports: [{name: 'server', containerPort: 8080}]}),
      pod('argocd', 'b-pending', {labels: server, phase: 'Pending', ports: [{name: 'server', containerPort: 8080}]}),
      pod('argocd', 'c-deleting', {labels: server, deleting: true, ports: [{name: 'server', containerPort: 8080}]}),
      pod('argocd', 'd-ready', {labels: server, ports: [{name: 'server', containerPort: 8443}]}),
      pod('argocd', 'e-other', {labels: {app: 'other'}}),
    ])
    expect(await resolvePod(await session.kube(), argocd, 0)).toEqual({pod: 'd-ready', podPort: 8443})
  })

  it('a numeric targetPort is taken as is, and a Service port without one is its own port', async () => {
    const numeric = await sessionFixture([
      service('kube-system', 'hubble-ui', [{name: 'http', port: 80, targetPort: 8081}]),
      pod('kube-system', 'hubble-ui-1', {labels: {app: 'hubble-ui'}}),
    ])
    expect(await resolvePod(await numeric.session.kube(), hubble, 0)).toEqual({pod: 'hubble-ui-1', podPort: 8081})
    const none = await sessionFixture([
      service('kube-system', 'hubble-ui', [{name: 'http', port: 80}]),
      pod('kube-system', 'hubble-ui-1', {labels: {app: 'hubble-ui'}}),
    ])
    expect(await resolvePod(await none.session.kube(), hubble, 0)).toEqual({pod: 'hubble-ui-1', podPort: 80})
  })

  it('no Service: exit 1 saying the UI is not installed, with the values that enable the Hubble UI', async () => {
    const {session} = await sessionFixture([])
    const error = (await resolvePod(await session.kube(), hubble, 0).catch((e: unknown) => e)) as IchorError
    expect(error).toBeInstanceOf(IchorError)
    expect(error.exitCode).toBe(1)
    expect(error.message).toBe('Hubble UI is not installed: Service kube-system/hubble-ui does not exist')
    expect(error.hint).toContain('ichor cni values set hubble.ui.enabled=true hubble.relay.enabled=true')
  })

  it('no ready pod within the timeout: exit 1 naming the selector and the pods found', async () => {
    const {session} = await sessionFixture([
      service('argocd', 'argocd-server', [{name: 'https', port: 443, targetPort: 8080}]),
      pod('argocd', 'argocd-server-1', {labels: server, ready: false}),
    ])
    const started = Date.now()
    const error = (await resolvePod(await session.kube(), argocd, 1200).catch((e: unknown) => e)) as IchorError
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000)
    expect(error.message).toBe(
      'no running and ready pod behind Service argocd/argocd-server (selector app=argocd-server); found argocd-server-1 (Running, not ready)',
    )
  })

  it('a targetPort name no container declares is exit 1 naming it', async () => {
    const {session} = await sessionFixture([
      service('argocd', 'argocd-server', [{name: 'https', port: 443, targetPort: 'server'}]),
      pod('argocd', 'argocd-server-1', {labels: server, ports: [{name: 'metrics', containerPort: 8083}]}),
    ])
    await expect(resolvePod(await session.kube(), argocd, 0)).rejects.toThrow(
      /targets the port named "server", which no container of pod argocd-server-1 declares/,
    )
  })
})
