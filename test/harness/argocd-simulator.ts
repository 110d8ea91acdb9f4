// Argo CD application-controller simulator: the sync and status of an Application that
// Kokumi's Serving created (./stack-simulator.ts plays Kokumi and calls `syncApplication`).
// Argo CD cannot run on the harness (no kubelet, no pods), so this plays its controller from
// the outside:
//
// - an Application whose revision changed first reads OutOfSync/Progressing, then the sync:
//   the Preparation's manifest.yaml is pulled from the registry and every object in it is
//   applied server-side as field manager `argocd-controller` with force, as Argo CD does with
//   `ServerSideApply=true` (argoproj/argo-cd common/common.go `ArgoCDSSAManager =
//   "argocd-controller"`, passed by controller/sync.go `sync.WithServerSideApplyManager`;
//   argoproj/gitops-engine pkg/utils/kube/resource_ops.go sets ForceConflicts for every
//   server-side apply). So a field a new bundle drops is removed only when no other manager
//   still owns it, exactly as in a real cluster. Then Synced/Healthy; if the digest cannot be
//   pulled, OutOfSync/Missing; if the apply fails, OutOfSync/Degraded with the error.
//
// Simplifications, on purpose: Argo CD's tracking annotation and pruning (objects a bundle no
// longer holds) are not reproduced.
import {ApiextensionsV1Api, CustomObjectsApi, KubeConfig} from '@kubernetes/client-node'
import {isDeepStrictEqual} from 'node:util'
import {untarSync} from '../../src/lib/chart/archive.js'
import {serverSideApply} from '../../src/lib/kube/apply.js'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import type {OciClient} from '../../src/lib/oci/client.js'
import {parseObjects} from '../../src/lib/stack/objects.js'
import type {PulledManifest} from './kokumi-puller.js'

/** argoproj/argo-cd common/common.go ArgoCDSSAManager: the field manager of Argo CD's server-side syncs. */
export const ARGOCD_SSA_MANAGER = 'argocd-controller'
export const ARGOCD_NAMESPACE = 'argocd'
export const APPLICATIONS = {group: 'argoproj.io', version: 'v1alpha1', plural: 'applications'}

/** Kinds the bundles hold that are cluster-scoped (everything else is namespaced). */
const CLUSTER_SCOPED = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding', 'CustomResourceDefinition', 'PriorityClass', 'StorageClass', 'ValidatingWebhookConfiguration', 'MutatingWebhookConfiguration', 'CiliumClusterwideNetworkPolicy'])
const FIXED_TIME = new Date(0).toISOString().replace('.000Z', 'Z')

export type AppObj = {
  apiVersion?: string
  kind?: string
  metadata: {name: string; namespace?: string; generation?: number; resourceVersion?: string; annotations?: Record<string, string>; labels?: Record<string, string>}
  spec?: Record<string, any>
  status?: Record<string, any>
}

export interface ArgoCdSimulatorOptions {
  kubeconfigPath: string
  kubeConfig: KubeConfig
  /** The harness registry client (stands in for Kokumi's in-cluster registry). */
  oci: OciClient
  /** HEAD of `repository:reference` in the registry: its digest, or undefined when absent. */
  headManifest(repository: string, reference: string): Promise<string | undefined>
  /** The shared event log of the stack simulator. */
  events: string[]
}

export interface ArgoCdSimulator {
  /** One reconciliation of Application `app` (Order `orderNamespace/name`), its source in `repository`. */
  syncApplication(app: AppObj, orderNamespace: string, repository: string | undefined): Promise<void>
}

export function createArgoCdSimulator(opts: ArgoCdSimulatorOptions): ArgoCdSimulator {
  const custom = opts.kubeConfig.makeApiClient(CustomObjectsApi)
  const ext = opts.kubeConfig.makeApiClient(ApiextensionsV1Api)
  const {oci, events, headManifest} = opts
  let applicationStatusSubresource: boolean | undefined
  let kube: Promise<Kube> | undefined

  /** Argo CD's side: OutOfSync/Progressing on a new revision, then Synced/Healthy if it can be pulled. */
  async function reportSync(app: AppObj, orderNamespace: string, repository: string | undefined): Promise<void> {
    const target = app.spec?.source?.targetRevision as string
    const current = (app.status ?? {}) as Record<string, any>
    let sync: string
    let health: string
    let revision: string | undefined = current.sync?.revision
    const operation = (app as AppObj & {operation?: {sync?: unknown}}).operation
    let operationState: Record<string, unknown> | undefined
    if (current.sync?.revision !== target && !['Progressing', 'Missing'].includes(current.health?.status)) {
      // First sight of this revision: Argo CD compares before it syncs.
      sync = 'OutOfSync'
      health = 'Progressing'
    } else if (repository && (await headManifest(repository, target))) {
      sync = 'Synced'
      health = 'Healthy'
      revision = target
      // A sync runs whenever the Application is not Synced at this revision (a new one, or after
      // the registry came back), or a sync operation was requested (`argocd app sync` sets the
      // Application's `operation`; controller/appcontroller.go processRequestedAppOperations runs
      // it, records status.operationState and clears the field): Argo CD applies the whole revision again.
      if (current.sync?.status !== 'Synced' || current.sync?.revision !== target || operation) {
        const failed = await syncRevision(repository, target, app.spec?.destination?.namespace).then(() => undefined, (err: Error) => err.message.split('\n')[0])
        if (operation) operationState = {operation, phase: failed ? 'Failed' : 'Succeeded', message: failed ?? 'successfully synced (all tasks run)', syncResult: {revision: target}, startedAt: FIXED_TIME, finishedAt: FIXED_TIME}
        if (failed) {
          sync = 'OutOfSync'
          health = 'Degraded'
          revision = current.sync?.revision
          events.push(`Application ${ARGOCD_NAMESPACE}/${app.metadata.name} sync failed: ${failed}`)
        }
      }
    } else {
      sync = 'OutOfSync'
      health = 'Missing'
    }
    const status = {
      ...current,
      sync: {status: sync, ...(revision ? {revision} : {}), comparedTo: {source: app.spec?.source, destination: app.spec?.destination}},
      health: {status: health},
      sourceType: 'Directory',
      ...(operationState ? {operationState} : {}),
    }
    if (!operationState && isDeepStrictEqual(JSON.parse(JSON.stringify(status)), current)) return
    const {operation: _done, ...rest} = app as AppObj & {operation?: unknown}
    const body = {...(operationState ? rest : app), status}
    try {
      if (await hasApplicationStatusSubresource()) {
        // The operation lives in the main resource: cleared there first, then the status.
        const cleared = operationState ? ((await custom.replaceNamespacedCustomObject({...APPLICATIONS, namespace: ARGOCD_NAMESPACE, name: app.metadata.name, body: rest})) as AppObj) : app
        await custom.replaceNamespacedCustomObjectStatus({...APPLICATIONS, namespace: ARGOCD_NAMESPACE, name: app.metadata.name, body: {...cleared, status}})
      } else {
        // Argo CD's Application CRD has no status subresource: status is written with the object.
        await custom.replaceNamespacedCustomObject({...APPLICATIONS, namespace: ARGOCD_NAMESPACE, name: app.metadata.name, body})
      }
      events.push(`Application ${ARGOCD_NAMESPACE}/${app.metadata.name} (Order ${orderNamespace}/${app.metadata.name}) ${sync}/${health}${revision ? ` at ${revision}` : ''}`)
    } catch (err) {
      if (!isCode(err, 409) && !isCode(err, 404)) throw err
    }
  }

  /** Argo CD's sync of one revision: every object of its manifest.yaml, server-side, as argocd-controller, forced. */
  async function syncRevision(repository: string, digest: string, destinationNamespace?: string): Promise<void> {
    const fetched = await oci.getManifest(repository, digest)
    const layers = (fetched.manifest as PulledManifest).layers
    let text: string | undefined
    for (const layer of layers) text ??= untarSync(await oci.getBlob(repository, layer.digest), `${repository}@${digest}`).get('manifest.yaml')?.toString('utf8')
    if (text === undefined) throw new Error(`${repository}@${digest} holds no manifest.yaml`)
    kube ??= connectKube({kubeconfig: opts.kubeconfigPath})
    kube.catch(() => (kube = undefined))
    // A namespaced object with no namespace goes to the Application's destination namespace,
    // as Argo CD's sync does (gitops-engine pkg/sync/sync_context.go: the target namespace is
    // set on namespaced resources that carry none).
    const objects = parseObjects(text, `${repository}@${digest}`).map((o) =>
      o.metadata.namespace || !destinationNamespace || CLUSTER_SCOPED.has(o.kind) ? o : {...o, metadata: {...o.metadata, namespace: destinationNamespace}},
    )
    const results = await serverSideApply(await kube, objects, {fieldManager: ARGOCD_SSA_MANAGER, force: true})
    events.push(`synced ${repository}@${digest}: ${results.filter((r) => r.result !== 'unchanged').length} of ${results.length} objects changed`)
  }

  async function hasApplicationStatusSubresource(): Promise<boolean> {
    if (applicationStatusSubresource === undefined) {
      const crd = await ext.readCustomResourceDefinition({name: 'applications.argoproj.io'})
      const version = crd.spec.versions.find((v) => v.name === APPLICATIONS.version)
      applicationStatusSubresource = Boolean(version?.subresources?.status)
    }
    return applicationStatusSubresource
  }

  return {syncApplication: reportSync}
}

function isCode(err: unknown, code: number): boolean {
  return (err as {code?: number}).code === code
}
