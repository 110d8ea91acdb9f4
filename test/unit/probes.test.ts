// Probes tested on their own, each over a Session built in one line by test/support/session-fixture.ts
// (an in-process API server holding the objects given): what the probe answers, and that it
// only read.
import {describe, expect, it} from 'vitest'
import {adoptCiliumTask, ciliumReleaseView} from '../../src/lib/cilium/tasks.js'
import type {KubeObject} from '../../src/lib/kube/objects.js'
import type {PromotionMode} from '../../src/lib/state/installation-types.js'
import {buildOrder} from '../../src/lib/stack/orders.js'
import type {PreparedStack} from '../../src/lib/stack/prepare.js'
import {ordersTask} from '../../src/lib/stack/install-tasks.js'
import {helmReleaseSecret, sessionFixture} from '../support/session-fixture.js'

const VALUES = {ipam: {mode: 'kubernetes'}, kubeProxyReplacement: true}
const cilium = (revision: number, status: 'deployed' | 'superseded', config: Record<string, unknown>) =>
  helmReleaseSecret({name: 'cilium', namespace: 'kube-system', revision, status, chart: {name: 'cilium', version: '1.18.4'}, config})

describe('the Cilium adoption probe', () => {
  const adopt = async (objects: KubeObject[]) => {
    const {session, writes} = await sessionFixture(objects)
    const task = adoptCiliumTask({session, release: ciliumReleaseView(session), chartPath: async () => 'unused', values: async () => VALUES, timeoutMs: 1000})
    const result = await task.probe()
    expect(writes()).toEqual([])
    return result
  }

  it('no release yet: missing', async () => {
    expect(await adopt([])).toEqual({done: false, reason: 'no Helm release cilium yet'})
  })

  it('the newest revision deployed with the stored values: holds', async () => {
    expect(await adopt([cilium(1, 'superseded', {}), cilium(2, 'deployed', VALUES)])).toEqual({
      done: true,
      detail: 'release cilium revision 2 (chart 1.18.4)',
    })
  })

  it('deployed with other values: holds, and names the drift and the command that restores the values', async () => {
    const result = await adopt([cilium(3, 'deployed', {...VALUES, hubble: {enabled: true}})])
    expect(result).toEqual({
      done: true,
      detail: expect.stringMatching(/^release cilium revision 3 \(chart 1\.18\.4\); the values of release kube-system\/cilium differ .* ichor cni values set$/),
    })
  })
})

// Kokumi's Order CRD as it serves spec.promotion.mode (newer) or spec.autoDeploy (older).
const orderCrd = (shape: 'promotion.mode' | 'autoDeploy'): KubeObject =>
  ({
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {name: 'orders.delivery.kokumi.dev'},
    spec: {
      group: 'delivery.kokumi.dev',
      scope: 'Namespaced',
      names: {kind: 'Order', plural: 'orders'},
      versions: [
        {
          name: 'v1alpha1',
          served: true,
          schema: {
            openAPIV3Schema: {
              properties: {
                spec: {properties: shape === 'autoDeploy' ? {autoDeploy: {type: 'string'}} : {promotion: {properties: {mode: {type: 'string'}}}}},
              },
            },
          },
        },
      ],
    },
  }) as unknown as KubeObject

const REPO = 'oci://kokumi-registry.kokumi.svc.cluster.local:5000/ichor'
const order = (component: 'argocd' | 'kokumi', tag: string, promotion: PromotionMode = 'Manual') =>
  buildOrder({component, repository: `${REPO}/${component}`, tag, promotion})
const stack = (tags: {argocd: string; kokumi: string}) => async () =>
  ({
    components: {argocd: {order: order('argocd', tags.argocd)}, kokumi: {order: order('kokumi', tags.kokumi)}},
    promotion: 'Manual',
  }) as unknown as PreparedStack

describe('the stack Order probe', () => {
  const probe = async (objects: KubeObject[], tags = {argocd: '9.1.0-aaaa', kokumi: '0.14.0-bbbb'}) => {
    const {session, writes} = await sessionFixture(objects)
    const result = await ordersTask({session, stack: stack(tags)}).probe()
    expect(writes()).toEqual([])
    return result
  }

  it('both Orders at the published bundles: holds', async () => {
    expect(await probe([orderCrd('promotion.mode'), order('argocd', '9.1.0-aaaa'), order('kokumi', '0.14.0-bbbb')])).toEqual({
      done: true,
      detail: 'both Orders point at the published bundles',
    })
  })

  it('an Order missing or at another bundle: missing, naming it', async () => {
    expect(await probe([orderCrd('promotion.mode'), order('argocd', '9.1.0-aaaa')])).toEqual({done: false, reason: 'no Order kokumi/kokumi'})
    expect(await probe([orderCrd('promotion.mode'), order('argocd', '9.0.0-cccc'), order('kokumi', '0.14.0-bbbb')])).toEqual({
      done: false,
      reason: 'Order argocd/argocd points elsewhere',
    })
  })

  it("compares in the installed Kokumi's shape: an older Kokumi's Orders say autoDeploy", async () => {
    const older = (o: KubeObject): KubeObject => {
      const {promotion, ...rest} = o.spec as {promotion: {mode: PromotionMode}}
      return {...o, spec: {...rest, autoDeploy: promotion.mode === 'Automatic' ? 'Enabled' : 'Disabled'}}
    }
    const live = [older(order('argocd', '9.1.0-aaaa')), older(order('kokumi', '0.14.0-bbbb'))]
    expect((await probe([orderCrd('autoDeploy'), ...live])).done).toBe(true)
    // The same Orders in the newer shape would not hold against that Kokumi.
    expect((await probe([orderCrd('autoDeploy'), order('argocd', '9.1.0-aaaa'), order('kokumi', '0.14.0-bbbb')])).done).toBe(false)
  })
})
