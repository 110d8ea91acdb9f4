// The Argo CD application-controller simulator (test/harness/argocd-simulator.ts) on the real
// harness apiserver and the real distribution registry, with Argo CD's real CRDs (rendered from
// the upstream chart by the real helm). No controller runs in this file: workload status is
// written here, through the status subresource, as the real controllers would write it.
// Each test is a control test of one fidelity change: it failed on the simulator that reported
// Healthy after any successful apply, never pruned and never compared live objects.
import {AppsV1Api, CoreV1Api, CustomObjectsApi, setHeaderOptions, type KubeConfig, type V1CustomResourceDefinition} from '@kubernetes/client-node'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {parseAllDocuments} from 'yaml'
import {helmTemplate} from '../../src/lib/helm/template.js'
import {buildBundle} from '../../src/lib/oci/bundle.js'
import {OciClient} from '../../src/lib/oci/client.js'
import {publishBundle} from '../../src/lib/oci/publish.js'
import {startControlPlane, type ControlPlane} from '../harness/apiserver.js'
import {APPLICATION_CONTROLLER, ARGOCD_NAMESPACE, createArgoCdSimulator, type AppObj, type ArgoCdSimulator} from '../harness/argocd-simulator.js'
import {createCrdRaw} from '../harness/cilium-simulator.js'
import {createNamespace, loadKubeConfig, waitForCrdEstablished, waitUntil} from '../harness/kube.js'
import {startRegistry, type RunningRegistry} from '../harness/registry.js'
import {UPSTREAM} from '../support/upstream.js'

const APPLICATIONS = {group: 'argoproj.io', version: 'v1alpha1', plural: 'applications'}
const TRACKING_ID = 'argocd.argoproj.io/tracking-id'
const MERGE_PATCH = setHeaderOptions('Content-Type', 'application/merge-patch+json')

let cp: ControlPlane
let registry: RunningRegistry
let kc: KubeConfig
let custom: CustomObjectsApi
let apps: AppsV1Api
let core: CoreV1Api
let oci: OciClient
let argo: ArgoCdSimulator
const events: string[] = []

beforeAll(async () => {
  // No controller runs here (see above): the real ones would overwrite the statuses written here.
  ;[cp, registry] = await Promise.all([startControlPlane({controllers: false}), startRegistry()])
  kc = loadKubeConfig(cp.kubeconfigPath)
  custom = kc.makeApiClient(CustomObjectsApi)
  apps = kc.makeApiClient(AppsV1Api)
  core = kc.makeApiClient(CoreV1Api)
  const render = await helmTemplate({chartPath: UPSTREAM.argocdChart, releaseName: 'argocd', namespace: 'argocd', values: {}, includeCrds: true})
  const crds = parseAllDocuments(render)
    .map((d) => d.toJS() as V1CustomResourceDefinition | null)
    .filter((o): o is V1CustomResourceDefinition => o?.kind === 'CustomResourceDefinition')
  for (const crd of crds) await createCrdRaw(kc, crd)
  for (const crd of crds) await waitForCrdEstablished(kc, crd.metadata!.name!)
  await createNamespace(kc, ARGOCD_NAMESPACE)
  oci = new OciClient(registry.endpoint, {retry: {attempts: 1, baseDelayMs: 0, maxDelayMs: 0}})
  argo = createArgoCdSimulator({
    kubeconfigPath: cp.kubeconfigPath,
    kubeConfig: kc,
    oci,
    events,
    // No Argo CD workloads here: the controller is played as running (its own test below gates it).
    applicationController: 'assumed',
    async headManifest(repository, reference) {
      return (await oci.headManifest(repository, reference))?.digest
    },
  })
})

afterAll(async () => {
  await Promise.all([cp?.stop(), registry?.stop()])
})

/** Publishes `manifest` where Kokumi pushes a Preparation (`<namespace>/<order>`); its digest. */
async function push(namespace: string, name: string, tag: string, manifest: string): Promise<string> {
  const bundle = buildBundle([{path: 'manifest.yaml', content: manifest}])
  const pushed = await publishBundle(oci, {
    repository: `${namespace}/${name}`,
    tag,
    layer: bundle.layer,
    layerDigest: bundle.layerDigest,
    annotations: {source: 'test', version: tag},
  })
  return pushed.manifestDigest
}

/** An Application as Kokumi's Serving makes it (serving_controller.go, 0.14.0), with the given automated policy. */
async function createApplication(namespace: string, name: string, digest: string, automated: {prune: boolean; selfHeal: boolean}): Promise<void> {
  await custom.createNamespacedCustomObject({
    ...APPLICATIONS,
    namespace: ARGOCD_NAMESPACE,
    body: {
      apiVersion: 'argoproj.io/v1alpha1',
      kind: 'Application',
      metadata: {name, namespace: ARGOCD_NAMESPACE},
      spec: {
        project: 'default',
        source: {repoURL: `oci://kokumi-registry.kokumi.svc.cluster.local:5000/${namespace}/${name}`, targetRevision: digest, path: '.'},
        destination: {server: 'https://kubernetes.default.svc', namespace},
        syncPolicy: {automated, syncOptions: ['ServerSideApply=true']},
      },
    },
  })
}

async function getApp(name: string): Promise<AppObj> {
  return (await custom.getNamespacedCustomObject({...APPLICATIONS, namespace: ARGOCD_NAMESPACE, name})) as AppObj
}

async function editApp(name: string, edit: (app: AppObj) => void): Promise<void> {
  const app = await getApp(name)
  edit(app)
  await custom.replaceNamespacedCustomObject({...APPLICATIONS, namespace: ARGOCD_NAMESPACE, name, body: app})
}

/** Runs the controller on the Application until `check` holds (as its reconcile loop would). */
function reconcileUntil<T>(
  what: string,
  namespace: string,
  name: string,
  check: (app: AppObj) => Promise<T | false | undefined> | T | false | undefined,
  timeoutMs = 20_000,
): Promise<T> {
  return waitUntil(
    `Application ${name}: ${what}`,
    async () => {
      await argo.syncApplication(await getApp(name), namespace, `${namespace}/${name}`)
      return check(await getApp(name))
    },
    {timeoutMs},
  )
}

/** Several rounds of the controller: what stays true after them is what it leaves alone. */
async function reconcileRounds(namespace: string, name: string, rounds = 5): Promise<AppObj> {
  for (let i = 0; i < rounds; i++) {
    await argo.syncApplication(await getApp(name), namespace, `${namespace}/${name}`)
    await new Promise((r) => setTimeout(r, 100))
  }
  return getApp(name)
}

const syncedAt = (digest: string) => (app: AppObj) => app.status?.sync?.status === 'Synced' && app.status?.sync?.revision === digest && app
const health = (status: string) => (app: AppObj) => app.status?.health?.status === status && app

const workloads = (ns: string) => `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ${ns}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: registry.invalid/web:1}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: ${ns}}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: agent, image: registry.invalid/agent:1}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: ${ns}}
spec:
  replicas: 1
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: registry.invalid/db:1}]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: ${ns}}
spec:
  selector: {app: web}
  ports: [{port: 80}]
`

/** What the Deployment, DaemonSet and StatefulSet controllers write once every pod is ready. */
async function markRolledOut(ns: string): Promise<void> {
  const d = await apps.readNamespacedDeployment({namespace: ns, name: 'web'})
  await apps.patchNamespacedDeploymentStatus(
    {
      namespace: ns,
      name: 'web',
      body: {
        status: {
          observedGeneration: d.metadata!.generation,
          replicas: 2,
          updatedReplicas: 2,
          readyReplicas: 2,
          availableReplicas: 2,
          conditions: [{type: 'Progressing', status: 'True', reason: 'NewReplicaSetAvailable'}],
        },
      },
    },
    MERGE_PATCH,
  )
  const ds = await apps.readNamespacedDaemonSet({namespace: ns, name: 'agent'})
  await apps.patchNamespacedDaemonSetStatus(
    {
      namespace: ns,
      name: 'agent',
      body: {
        status: {
          observedGeneration: ds.metadata!.generation,
          desiredNumberScheduled: 1,
          currentNumberScheduled: 1,
          numberMisscheduled: 0,
          numberReady: 1,
          updatedNumberScheduled: 1,
          numberAvailable: 1,
        },
      },
    },
    MERGE_PATCH,
  )
  const sts = await apps.readNamespacedStatefulSet({namespace: ns, name: 'db'})
  await apps.patchNamespacedStatefulSetStatus(
    {
      namespace: ns,
      name: 'db',
      body: {
        status: {
          observedGeneration: sts.metadata!.generation,
          replicas: 1,
          readyReplicas: 1,
          currentReplicas: 1,
          updatedReplicas: 1,
          availableReplicas: 1,
          currentRevision: 'db-1',
          updateRevision: 'db-1',
        },
      },
    },
    MERGE_PATCH,
  )
}

describe('Argo CD simulator', () => {
  // Control test: the simulator reconciled whether or not Argo CD's application controller ran.
  it('argocd simulator: nothing is reconciled while the application controller StatefulSet has no Ready pod; it picks up where it was once Ready', async () => {
    const ns = await createNamespace(kc, 'argo-down')
    const name = 'argo-down'
    const gated = createArgoCdSimulator({
      kubeconfigPath: cp.kubeconfigPath,
      kubeConfig: kc,
      oci,
      events,
      async headManifest(repository, reference) {
        return (await oci.headManifest(repository, reference))?.digest
      },
    })
    const rounds = async (): Promise<AppObj> => {
      for (let i = 0; i < 3; i++) {
        await gated.syncApplication(await getApp(name), ns, `${ns}/${name}`)
        await new Promise((r) => setTimeout(r, 100))
      }
      return getApp(name)
    }
    const settings = async () => (await core.listNamespacedConfigMap({namespace: ns})).items.find((c) => c.metadata?.name === 'settings')?.data
    const digest = await push(ns, name, 'v1', `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata: {level: info}\n`)
    await createApplication(ns, name, digest, {prune: true, selfHeal: true})
    expect((await rounds()).status).toBeUndefined()

    // The controller as the argo-cd chart makes it (a StatefulSet, trimmed), and its pod as the
    // StatefulSet controller would create it (none runs here), not started: nothing reconciles.
    const labels = {'app.kubernetes.io/name': APPLICATION_CONTROLLER.name}
    const container = {name: 'application-controller', image: 'quay.io/argoproj/argocd:v3.4.4'}
    const sts = await apps.createNamespacedStatefulSet({
      namespace: ARGOCD_NAMESPACE,
      body: {
        metadata: {name: APPLICATION_CONTROLLER.name},
        spec: {replicas: 1, serviceName: '', selector: {matchLabels: labels}, template: {metadata: {labels}, spec: {containers: [container]}}},
      },
    })
    const pod = `${APPLICATION_CONTROLLER.name}-0`
    await core.createNamespacedServiceAccount({namespace: ARGOCD_NAMESPACE, body: {metadata: {name: 'default'}}}).catch(() => undefined)
    await core.createNamespacedPod({
      namespace: ARGOCD_NAMESPACE,
      body: {
        metadata: {
          name: pod,
          labels,
          ownerReferences: [{apiVersion: 'apps/v1', kind: 'StatefulSet', name: APPLICATION_CONTROLLER.name, uid: sts.metadata!.uid!, controller: true}],
        },
        spec: {containers: [container], automountServiceAccountToken: false},
      },
    })
    expect((await rounds()).status).toBeUndefined()
    expect(await settings()).toBeUndefined()

    // Ready, as the kubelet (kwok on the harness) reports it: the controller reconciles and syncs.
    const ready = (status: 'True' | 'False') =>
      core.patchNamespacedPodStatus(
        {
          namespace: ARGOCD_NAMESPACE,
          name: pod,
          body: {
            status: {
              phase: 'Running',
              conditions: [
                {type: 'Ready', status},
                {type: 'ContainersReady', status},
              ],
            },
          },
        },
        MERGE_PATCH,
      )
    await ready('True')
    await waitUntil('synced once the controller is Ready', async () => syncedAt(digest)(await rounds()))
    expect(await settings()).toEqual({level: 'info'})

    // Crash-looping (not Ready): an out-of-band change is neither seen nor healed, the status stays as written.
    await ready('False')
    await core.patchNamespacedConfigMap({namespace: ns, name: 'settings', body: {data: {level: 'debug'}}}, MERGE_PATCH)
    const left = await rounds()
    expect(left.status?.sync).toMatchObject({status: 'Synced', revision: digest})
    expect(await settings()).toEqual({level: 'debug'})

    await ready('True')
    await waitUntil('healed once the controller is back', async () => {
      await rounds()
      return (await settings())?.level === 'info'
    })
    await core.deleteNamespacedPod({namespace: ARGOCD_NAMESPACE, name: pod, gracePeriodSeconds: 0})
    await apps.deleteNamespacedStatefulSet({namespace: ARGOCD_NAMESPACE, name: APPLICATION_CONTROLLER.name})
  })

  it('argocd simulator: health is assessed from the live workloads as gitops-engine does, and again whenever they change after the sync', async () => {
    const ns = await createNamespace(kc, 'argo-health')
    const name = 'argo-health'
    const digest = await push(ns, name, 'v1', workloads(ns))
    await createApplication(ns, name, digest, {prune: true, selfHeal: true})

    // Applied, but no controller has reported on the workloads yet: Progressing, not Healthy.
    const synced = await reconcileUntil('Synced', ns, name, syncedAt(digest))
    expect(synced.status?.health?.status).toBe('Progressing')
    await markRolledOut(ns)
    await reconcileUntil('Healthy', ns, name, health('Healthy'))

    // A Deployment whose replicas stop being available (a crash-looping pod): Progressing.
    await apps.patchNamespacedDeploymentStatus({namespace: ns, name: 'web', body: {status: {availableReplicas: 1, readyReplicas: 1}}}, MERGE_PATCH)
    await reconcileUntil('Progressing after the Deployment lost a replica', ns, name, health('Progressing'))
    // ...and past its progress deadline: Degraded (health_deployment.go).
    await apps.patchNamespacedDeploymentStatus(
      {
        namespace: ns,
        name: 'web',
        body: {
          status: {
            conditions: [{type: 'Progressing', status: 'False', reason: 'ProgressDeadlineExceeded', message: 'ReplicaSet "web-1" has timed out progressing.'}],
          },
        },
      },
      MERGE_PATCH,
    )
    await reconcileUntil('Degraded on ProgressDeadlineExceeded', ns, name, health('Degraded'))
    await markRolledOut(ns)
    await reconcileUntil('Healthy again', ns, name, health('Healthy'))

    // A DaemonSet with an unavailable pod, then a StatefulSet mid rolling update.
    await apps.patchNamespacedDaemonSetStatus({namespace: ns, name: 'agent', body: {status: {numberAvailable: 0, numberReady: 0}}}, MERGE_PATCH)
    await reconcileUntil('Progressing on the DaemonSet', ns, name, health('Progressing'))
    await markRolledOut(ns)
    await reconcileUntil('Healthy again', ns, name, health('Healthy'))
    await apps.patchNamespacedStatefulSetStatus({namespace: ns, name: 'db', body: {status: {updateRevision: 'db-2', updatedReplicas: 0}}}, MERGE_PATCH)
    await reconcileUntil('Progressing on the StatefulSet', ns, name, health('Progressing'))
    await markRolledOut(ns)
    await reconcileUntil('Healthy again', ns, name, health('Healthy'))

    // A spec change nobody has observed yet (generation ahead of observedGeneration): Progressing.
    await apps.patchNamespacedDeployment({namespace: ns, name: 'web', body: {spec: {minReadySeconds: 5}}}, MERGE_PATCH)
    await reconcileUntil('Progressing while the new generation is not observed', ns, name, health('Progressing'), 10_000)
  })

  it('argocd simulator: automated prune deletes what a new revision drops, only objects carrying this Application tracking id, never one annotated Prune=false', async () => {
    const ns = await createNamespace(kc, 'argo-prune')
    const name = 'argo-prune'
    const cm = (n: string, annotations = '') => `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${n}\n${annotations}data: {v: "1"}\n`
    const v1 = await push(
      ns,
      name,
      'v1',
      [cm('keep'), cm('drop'), cm('no-prune', '  annotations: {argocd.argoproj.io/sync-options: Prune=false}\n')].join('---\n'),
    )
    // Not Argo CD's: one without a tracking id, one tracked by another Application.
    await core.createNamespacedConfigMap({namespace: ns, body: {metadata: {name: 'foreign'}, data: {v: '1'}}})
    await core.createNamespacedConfigMap({
      namespace: ns,
      body: {metadata: {name: 'other-app', annotations: {[TRACKING_ID]: `other:/ConfigMap:${ns}/other-app`}}, data: {v: '1'}},
    })
    await createApplication(ns, name, v1, {prune: true, selfHeal: true})
    await reconcileUntil('Synced/Healthy', ns, name, (a) => syncedAt(v1)(a) && health('Healthy')(a))
    // Annotation tracking, Argo CD 3's default: <app>:<group>/<kind>:<namespace>/<name> (util/argo/resource_tracking.go).
    const keep = await core.readNamespacedConfigMap({namespace: ns, name: 'keep'})
    expect(keep.metadata?.annotations?.[TRACKING_ID]).toBe(`${name}:/ConfigMap:${ns}/keep`)

    const v2 = await push(ns, name, 'v2', cm('keep'))
    await editApp(name, (a) => (a.spec!.source.targetRevision = v2))
    const gone = async (n: string) => {
      const o = await core.readNamespacedConfigMap({namespace: ns, name: n}).catch((e: {code?: number}) => (e.code === 404 ? undefined : Promise.reject(e)))
      return o === undefined
    }
    await reconcileUntil('drop pruned', ns, name, async (a) => a.status?.sync?.revision === v2 && (await gone('drop')))
    const after = await reconcileRounds(ns, name)
    for (const n of ['keep', 'no-prune', 'foreign', 'other-app']) expect(await gone(n)).toBe(false)
    // The Prune=false object is still extraneous: the Application stays OutOfSync.
    expect(after.status?.sync?.status).toBe('OutOfSync')
  })

  it('argocd simulator: an object changed out of band stays OutOfSync with selfHeal false and is re-applied once selfHeal is true', async () => {
    const ns = await createNamespace(kc, 'argo-heal')
    const name = 'argo-heal'
    const digest = await push(ns, name, 'v1', `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata: {level: info}\n`)
    await createApplication(ns, name, digest, {prune: true, selfHeal: false})
    await reconcileUntil('Synced/Healthy', ns, name, (a) => syncedAt(digest)(a) && health('Healthy')(a))

    await core.patchNamespacedConfigMap({namespace: ns, name: 'settings', body: {data: {level: 'debug'}}}, MERGE_PATCH)
    await reconcileUntil('OutOfSync after the out-of-band change', ns, name, (a) => a.status?.sync?.status === 'OutOfSync')
    const left = await reconcileRounds(ns, name)
    expect(left.status?.sync?.status).toBe('OutOfSync')
    expect((await core.readNamespacedConfigMap({namespace: ns, name: 'settings'})).data).toEqual({level: 'debug'})

    await editApp(name, (a) => (a.spec!.syncPolicy.automated.selfHeal = true))
    await reconcileUntil('Synced again by self-heal', ns, name, syncedAt(digest))
    expect((await core.readNamespacedConfigMap({namespace: ns, name: 'settings'})).data).toEqual({level: 'info'})
  })

  it('argocd simulator: a resource deleted out of band makes the Application OutOfSync but not Missing until none is live; self-heal recreates them', async () => {
    const ns = await createNamespace(kc, 'argo-missing')
    const name = 'argo-missing'
    const cm = (n: string) => `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${n}\ndata: {v: "1"}\n`
    const digest = await push(ns, name, 'v1', [cm('first'), cm('second')].join('---\n'))
    await createApplication(ns, name, digest, {prune: true, selfHeal: false})
    await reconcileUntil('Synced/Healthy', ns, name, (a) => syncedAt(digest)(a) && health('Healthy')(a))

    // controller/health.go: an absent resource does not count in the Application's health...
    await core.deleteNamespacedConfigMap({namespace: ns, name: 'first'})
    const one = await reconcileUntil('OutOfSync', ns, name, (a) => a.status?.sync?.status === 'OutOfSync' && a)
    expect(one.status?.health?.status).toBe('Healthy')
    // ...the Application is Missing only when none of its resources is live.
    await core.deleteNamespacedConfigMap({namespace: ns, name: 'second'})
    await reconcileUntil('Missing', ns, name, health('Missing'))

    await editApp(name, (a) => (a.spec!.syncPolicy.automated.selfHeal = true))
    await reconcileUntil('Synced/Healthy after self-heal', ns, name, (a) => syncedAt(digest)(a) && health('Healthy')(a))
    expect((await core.readNamespacedConfigMap({namespace: ns, name: 'first'})).metadata?.annotations?.[TRACKING_ID]).toBe(`${name}:/ConfigMap:${ns}/first`)
  })
})
