// SIMULATOR of Kokumi's controllers (Order, Preparation, Serving), following kokumi-dev/kokumi
// at tag 0.14.0 (read, not copied; lines are of that tag). The stack simulator runs them each
// round, then plays Argo CD. What each controller does here:
//
// - Order (internal/controller/order_controller.go Reconcile, reconcileRender 126-202): renders
//   only when CalculateSpecHash differs from status.latestConfigHash (135); writes Ready=Unknown
//   Processing with the new hash first (140; internal/status/order.go 27-29, 54-56); pulls the
//   source (./kokumi-puller.ts), re-serialises it (internal/service/order_service.go
//   processManifest 263-271 -> internal/renderer/renderer.go NormalizeYAML 50-65), pushes it
//   (internal/oci/oras_client.go Push 196-236), creates the Preparation with the labels of the
//   Order as it is now and marks it Ready (order_controller.go createPreparation 224-305), then
//   Ready (188). A failure is ProcessingFailed with the hash cleared (status/order.go 37-40).
//   Not simulated: the finalizer (83-89), Menus, Pantries, patches/edits (refused), the pull
//   cache in the controller pod's /tmp emptyDir (cmd/main.go 212).
//   The hash's inputs follow the installed version (hashRuleFor): 0.14.x hashes the Order's
//   spec as written; any later version follows main (commit 5b113ca, #297: renderer/hash.go
//   CalculateSpecHash(spec, sourceOCI, destOCI), order_controller.go reconcileRender), which
//   also hashes the resolved source and destination, so every Order renders once again after
//   an upgrade from 0.14.x, under a new digest (parent annotation, push time).
// - Preparation (internal/controller/preparation_controller.go 50-161): on every event of a
//   Preparation, and for all of them when the controller starts (a Kokumi bundle roll-out
//   replaces its pod: a change of the Deployment's pod template here, or `restart()`), a Ready
//   one labelled auto-deploy=Enabled, or else approve-deploy=true, points the Serving named
//   after its Order at itself. Its own labels decide, not the Order's spec; the last one
//   processed wins; the informer lists, and so reconciles, in namespace/name order.
// - Serving (internal/controller/serving_controller.go 70-297): on its own events and the
//   Preparation events mapped to it (378-414); Automatic picks the Ready Preparation with the
//   newest creationTimestamp (124-133, ties to the first listed); skips when status says it is
//   deployed (163-168); refuses an Application without the allowed-order annotation, for good
//   (174-181); creates the Application or replaces it with a full Update (288-290), which
//   drops whatever else the stored Application held (its status, as Argo CD's Application CRD
//   has no status subresource).
import {setHeaderOptions, type AppsV1Api, type CustomObjectsApi} from '@kubernetes/client-node'
import {createHash} from 'node:crypto'
import {isDeepStrictEqual} from 'node:util'
import {gzipSync} from 'node:zlib'
import {parseAllDocuments} from 'yaml'
import type {OciClient} from '../../src/lib/oci/client.js'
import {pullManifest, pullerFor, type PulledManifest, type PullerName} from './kokumi-puller.js'

/** Kokumi's in-cluster registry (internal/service/defaults.go DefaultRegistryHost). */
export const KOKUMI_REGISTRY_HOST = 'kokumi-registry.kokumi.svc.cluster.local:5000'
// api/v1alpha1/labels.go
export const ALLOWED_ORDER_ANNOTATION = 'delivery.kokumi.dev/allowed-order'
export const ORDER_LABEL = 'delivery.kokumi.dev/order'
export const SERVING_LABEL = 'delivery.kokumi.dev/serving'
export const VERSION_LABEL = 'delivery.kokumi.dev/version'
export const AUTO_DEPLOY_LABEL = 'delivery.kokumi.dev/auto-deploy'
export const APPROVE_DEPLOY_LABEL = 'delivery.kokumi.dev/approve-deploy'
const COMMIT_MESSAGE_ANNOTATION = 'delivery.kokumi.dev/commit-message'
const FINALIZER = 'delivery.kokumi.dev/finalizer'
/** The Deployment whose image tag names the installed Kokumi version. */
export const KOKUMI_CONTROLLER = {namespace: 'kokumi', name: 'kokumi-controller-manager'}

const ORDERS = {group: 'delivery.kokumi.dev', version: 'v1alpha1', plural: 'orders'}
const PREPARATIONS = {group: 'delivery.kokumi.dev', version: 'v1alpha1', plural: 'preparations'}
const SERVINGS = {group: 'delivery.kokumi.dev', version: 'v1alpha1', plural: 'servings'}
const APPLICATIONS = {group: 'argoproj.io', version: 'v1alpha1', plural: 'applications'}
const ARGOCD_NAMESPACE = 'argocd'
/** A fixed condition time keeps end-state dumps of two runs comparable. */
export const FIXED_TIME = new Date(0).toISOString().replace('.000Z', 'Z')
/** controller-runtime requeues a Serving waiting for a Preparation after 30 s (serving_controller.go 121, 138). */
const PENDING_REQUEUE_MS = 30_000

export type Obj = {
  apiVersion?: string
  kind?: string
  metadata: {
    name: string
    namespace?: string
    uid?: string
    generation?: number
    resourceVersion?: string
    creationTimestamp?: string
    deletionTimestamp?: string
    finalizers?: string[]
    annotations?: Record<string, string>
    labels?: Record<string, string>
  }
  spec?: Record<string, any>
  status?: Record<string, any>
}

export interface KokumiSimulatorDeps {
  custom: CustomObjectsApi
  apps: AppsV1Api
  oci: OciClient
  /** The harness registry, `http://127.0.0.1:<port>`, standing in for Kokumi's. */
  registry: string
  events: string[]
  now: () => Date
}

export interface KokumiSimulator {
  /** One pass of the three controllers over the listed Orders, as the installed `version` does it. */
  round(orders: Obj[], version: string, podTemplate: string): Promise<void>
  /** The controller starts again: every Order, Preparation and Serving is reconciled on the next round. */
  restart(): void
  /** A person approving the Order's newest Preparation (the approve-deploy label). */
  promote(namespace: string, name: string): Promise<void>
}

export function createKokumiSimulator(deps: KokumiSimulatorDeps): KokumiSimulator {
  const {custom, oci, events} = deps
  // What the informers last delivered, by `ns/name`: a different resourceVersion is an event.
  const seenPreparations = new Map<string, {rv: string; order?: string}>()
  const seenServings = new Map<string, string>()
  // Servings controller-runtime requeues (after an error, or RequeueAfter): `ns/name` -> not before.
  const requeue = new Map<string, number>()
  let lastTemplate: string | undefined

  function restart(): void {
    seenPreparations.clear()
    seenServings.clear()
    requeue.clear()
    events.push('Kokumi controller restarted: every object is reconciled again')
  }

  async function round(orders: Obj[], version: string, podTemplate: string): Promise<void> {
    // A roll-out replaces the controller pod; the new one starts with empty informers.
    if (lastTemplate !== undefined && lastTemplate !== podTemplate) restart()
    lastTemplate = podTemplate
    const puller = pullerFor(version)
    const rule = hashRuleFor(version)
    for (const order of orders) await reconcileOrder(order, puller, rule)
    await dispatchEvents()
  }

  // ---- Order controller -------------------------------------------------------------

  async function reconcileOrder(order: Obj, puller: PullerName, rule: HashRule): Promise<void> {
    const destRef = `${KOKUMI_REGISTRY_HOST}/${order.metadata.namespace}/${order.metadata.name}` // service.DefaultDestination
    const specHash = configHash(order.spec ?? {}, rule, destRef)
    if (order.status?.latestConfigHash === specHash) return // order_controller.go 135-138
    const parentDigest = order.status?.latestArtifactDigest as string | undefined
    let current = await writeOrderStatus(order, {status: 'Unknown', reason: 'Processing', message: 'Processing component configuration', configHash: specHash})
    const fail = async (message: string) => {
      current = await writeOrderStatus(current, {status: 'False', reason: 'ProcessingFailed', message})
    }
    if (order.spec?.menuRef || order.spec?.patches?.length || order.spec?.edits?.length)
      return fail('the Kokumi simulator renders neither Menus nor patches/edits')
    const source = order.spec?.source as {oci?: string; version?: string} | undefined
    if (!source?.oci || !source.version) return fail('the Kokumi simulator handles only spec.source.oci')
    const pulled = await pull(source.oci, source.version, puller)
    if ('error' in pulled) return fail(`failed to pull artifact: ${pulled.error}`)
    const ns = order.metadata.namespace!
    const name = order.metadata.name
    const userMessage = order.metadata.annotations?.[COMMIT_MESSAGE_ANNOTATION]
    // internal/service/defaults.go DefaultCommitMessage
    const commitMessage = userMessage !== undefined ? userMessage : parentDigest ? 'Automatically generated' : 'Initial commit'
    const normalized = normalizeYaml(pulled.manifest)
    if (normalized.stoppedAt)
      events.push(`Order ${ns}/${name}: NormalizeYAML stopped at document ${normalized.stoppedAt.index + 1}: ${normalized.stoppedAt.error}`)
    let digest: string
    try {
      digest = await push(`${ns}/${name}`, source.version, normalized.text, {
        'org.opencontainers.image.description': commitMessage,
        ...(parentDigest ? {'kokumi.dev/parent': parentDigest} : {}),
      })
    } catch (err) {
      return fail(`failed to push artifact: ${(err as Error).message}`)
    }
    let preparation: string
    try {
      preparation = await createPreparation(current, {
        sourceOci: source.oci,
        version: source.version,
        sourceDigest: pulled.sourceDigest,
        destRef,
        digest,
        specHash,
        commitMessage,
        parentDigest,
      })
    } catch (err) {
      return fail(`failed to create revision: ${(err as Error).message}`)
    }
    current = await writeOrderStatus(current, {
      status: 'True',
      reason: 'Ready',
      message: `Successfully pushed to ${destRef}`,
      configHash: specHash,
      digest,
      preparation,
    })
    if (userMessage !== undefined) {
      // order_controller.go 192-199: the commit message is consumed.
      await custom
        .patchNamespacedCustomObject({...ORDERS, namespace: ns, name, body: {metadata: {annotations: {[COMMIT_MESSAGE_ANNOTATION]: null}}}}, mergePatch())
        .catch(() => undefined)
    }
  }

  /** What this version's puller leaves of `oci:version`, or why it fails. */
  async function pull(url: string, version: string, puller: PullerName): Promise<{manifest: string; sourceDigest: string} | {error: string}> {
    const m = /^oci:\/\/([^/]+)\/(.+?)\/*$/.exec(url)
    if (!m) return {error: `${url} is not oci://host/repository`}
    const [, host, repository] = m as unknown as [string, string, string]
    if (host !== KOKUMI_REGISTRY_HOST && `http://${host}` !== deps.registry)
      return {error: `the simulator only knows the registry ${KOKUMI_REGISTRY_HOST}, not ${host}`}
    const head = await oci.headManifest(repository, version)
    if (!head) return {error: `resolve ${host}/${repository}:${version}: not found`}
    const fetched = await oci.getManifest(repository, head.digest)
    const outcome = await pullManifest(puller, fetched.manifest as PulledManifest, (d) => oci.getBlob(repository, d))
    return 'error' in outcome ? {error: `${puller}: ${outcome.error}`} : {manifest: outcome.manifest, sourceDigest: head.digest}
  }

  /**
   * oras_client.go Push 196-236 with oras-go v2.6.2: the work folder added as one tar+gzip layer
   * titled "." (content/file/file.go Add 402-450, descriptorFromDir; tar times kept, as
   * TarReproducible is false), the empty config, artifactType application/vnd.unknown.artifact.v1,
   * and pack.go ensureAnnotationCreated 422-440 stamping org.opencontainers.image.created to the
   * second: the same content rendered again is a new digest.
   */
  async function push(repository: string, tag: string, manifestYaml: string, annotations: Record<string, string>): Promise<string> {
    const now = deps.now()
    const tar = ustar(
      [
        {name: '.', dir: true, mode: 0o700},
        {name: 'manifest.yaml', mode: 0o600, data: Buffer.from(manifestYaml)},
      ],
      now,
    )
    const layer = gzipSync(tar)
    const config = Buffer.from('{}')
    const manifest = Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        artifactType: 'application/vnd.unknown.artifact.v1',
        config: {mediaType: 'application/vnd.oci.empty.v1+json', digest: sha256(config), size: 2, data: config.toString('base64')},
        layers: [
          {
            mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip',
            digest: sha256(layer),
            size: layer.length,
            annotations: {'io.deis.oras.content.digest': sha256(tar), 'io.deis.oras.content.unpack': 'true', 'org.opencontainers.image.title': '.'},
          },
        ],
        annotations: sortKeys({...annotations, 'org.opencontainers.image.created': now.toISOString().replace(/\.\d+Z$/, 'Z')}),
      }),
    )
    await oci.pushBlob(repository, config, sha256(config))
    await oci.pushBlob(repository, layer, sha256(layer))
    await oci.putManifest(repository, tag, manifest, 'application/vnd.oci.image.manifest.v1+json')
    return sha256(manifest)
  }

  /** order_controller.go createPreparation 224-305: an existing one is returned unchanged. */
  async function createPreparation(
    order: Obj,
    r: {
      sourceOci: string
      version: string
      sourceDigest: string
      destRef: string
      digest: string
      specHash: string
      commitMessage: string
      parentDigest?: string
    },
  ): Promise<string> {
    const ns = order.metadata.namespace!
    const name = `${order.metadata.name}-${r.digest.slice('sha256:'.length, 'sha256:'.length + 12)}`
    if (await get(PREPARATIONS, ns, name)) return name
    const body = {
      apiVersion: 'delivery.kokumi.dev/v1alpha1',
      kind: 'Preparation',
      metadata: {
        name,
        namespace: ns,
        // Stamped now, from the Order as it is at render time (262-266).
        labels: {[ORDER_LABEL]: order.metadata.name, [VERSION_LABEL]: r.version, [AUTO_DEPLOY_LABEL]: autoDeployOf(order.spec)},
        ownerReferences: [
          {
            apiVersion: 'delivery.kokumi.dev/v1alpha1',
            kind: 'Order',
            name: order.metadata.name,
            uid: order.metadata.uid,
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
      spec: {
        orderName: order.metadata.name,
        source: {oci: r.sourceOci, baseDigest: r.sourceDigest},
        renderer: {version: 'v1.0.0', digest: r.digest, renderType: 'Manifest'},
        configHash: r.specHash,
        artifact: {ociRef: `oci://${r.destRef}@${r.digest}`, digest: r.digest},
        commitMessage: r.commitMessage,
        ...(r.parentDigest ? {parentDigest: r.parentDigest} : {}),
      },
    }
    const created = (await custom.createNamespacedCustomObject({...PREPARATIONS, namespace: ns, body})) as Obj
    events.push(`Preparation ${ns}/${name} created`)
    // 298-302: Ready at once (a failure here is only logged).
    const status = {
      creationTime: deps
        .now()
        .toISOString()
        .replace(/\.\d+Z$/, 'Z'),
      conditions: [{type: 'Ready', status: 'True', reason: 'Ready', message: 'Preparation is ready for serving', lastTransitionTime: FIXED_TIME}],
    }
    await custom.replaceNamespacedCustomObjectStatus({...PREPARATIONS, namespace: ns, name, body: {...created, status}}).catch(() => undefined)
    return name
  }

  /** internal/status/order.go set 42-78; a conflict is ignored and the object kept as it was. */
  async function writeOrderStatus(
    order: Obj,
    want: {status: 'True' | 'False' | 'Unknown'; reason: string; message: string; configHash?: string; digest?: string; preparation?: string},
  ): Promise<Obj> {
    const current = (order.status ?? {}) as Record<string, any>
    const status: Record<string, any> = {...current}
    if (want.status !== 'Unknown') status.observedGeneration = order.metadata.generation
    if (want.reason === 'ProcessingFailed') delete status.latestConfigHash
    else if (want.configHash) status.latestConfigHash = want.configHash
    if (want.digest) {
      status.latestArtifactDigest = want.digest
      status.latestPreparationName = want.preparation
    }
    status.conditions = [condition(current.conditions, want.status, want.reason, want.message, order.metadata.generation)]
    if (isDeepStrictEqual(status, current)) return order
    try {
      const written = (await custom.replaceNamespacedCustomObjectStatus({
        ...ORDERS,
        namespace: order.metadata.namespace!,
        name: order.metadata.name,
        body: {...order, status},
      })) as Obj
      events.push(`Order ${order.metadata.namespace}/${order.metadata.name} Ready=${want.status} ${want.reason}`)
      return written
    } catch (err) {
      if (isCode(err, 409) || isCode(err, 404)) return order
      throw err
    }
  }

  // ---- Preparation and Serving controllers: informer events ---------------------------

  async function dispatchEvents(): Promise<void> {
    const preparations = await list(PREPARATIONS)
    if (!preparations) return // informers not synced yet
    const servingKeys = new Set<string>()
    const changed: Obj[] = []
    const listed = new Set<string>()
    for (const p of preparations) {
      const key = keyOf(p)
      listed.add(key)
      if (seenPreparations.get(key)?.rv !== p.metadata.resourceVersion) changed.push(p)
      seenPreparations.set(key, {rv: p.metadata.resourceVersion!, order: p.metadata.labels?.[ORDER_LABEL]})
    }
    const deleted = [...seenPreparations.keys()].filter((k) => !listed.has(k))
    for (const p of changed) await reconcilePreparation(p)
    const servings = await list(SERVINGS)
    if (!servings) return
    // serving_controller.go enqueueServingForPreparation 378-414.
    for (const p of [
      ...changed,
      ...deleted.map(
        (k) => ({metadata: {namespace: k.split('/')[0]!, name: k.split('/')[1]!, labels: {[ORDER_LABEL]: seenPreparations.get(k)?.order ?? ''}}}) as Obj,
      ),
    ]) {
      for (const s of servings) {
        if (s.metadata.namespace !== p.metadata.namespace) continue
        if (
          s.spec?.preparationName === p.metadata.name ||
          (s.spec?.preparationPolicy?.type === 'Automatic' && p.metadata.labels?.[ORDER_LABEL] === s.spec?.orderName)
        )
          servingKeys.add(keyOf(s))
      }
    }
    for (const k of deleted) seenPreparations.delete(k)
    const listedServings = new Set<string>()
    for (const s of servings) {
      const key = keyOf(s)
      listedServings.add(key)
      if (seenServings.get(key) !== s.metadata.resourceVersion) servingKeys.add(key)
      seenServings.set(key, s.metadata.resourceVersion!)
    }
    for (const k of seenServings.keys()) if (!listedServings.has(k)) seenServings.delete(k)
    const now = Date.now()
    for (const [k, at] of requeue) if (at <= now) servingKeys.add(k)
    for (const key of [...servingKeys].sort()) {
      requeue.delete(key)
      const [namespace, name] = key.split('/') as [string, string]
      try {
        const after = await reconcileServing(namespace, name)
        if (after !== undefined) requeue.set(key, now + after)
      } catch (err) {
        requeue.set(key, now) // controller-runtime retries with backoff
        if (!isCode(err, 409)) events.push(`Serving ${key}: ${(err as Error).message}`)
      }
    }
  }

  /** preparation_controller.go Reconcile 50-89 and reconcileServing 92-161. */
  async function reconcilePreparation(p: Obj): Promise<void> {
    if (!isReady(p)) return
    const automatic = p.metadata.labels?.[AUTO_DEPLOY_LABEL] === 'Enabled'
    if (!automatic && p.metadata.labels?.[APPROVE_DEPLOY_LABEL] !== 'true') return
    const ns = p.metadata.namespace!
    const orderName = p.spec?.orderName as string
    const type = automatic ? 'Automatic' : 'Manual'
    const serving = await get(SERVINGS, ns, orderName)
    if (!serving) {
      const body = {
        apiVersion: 'delivery.kokumi.dev/v1alpha1',
        kind: 'Serving',
        metadata: {name: orderName, namespace: ns, labels: {[ORDER_LABEL]: orderName, [AUTO_DEPLOY_LABEL]: String(automatic)}},
        spec: {orderName, preparationName: p.metadata.name, preparationPolicy: {type}},
      }
      await custom.createNamespacedCustomObject({...SERVINGS, namespace: ns, body}).then(
        () => events.push(`Serving ${ns}/${orderName} created at ${p.metadata.name}`),
        (err) => {
          if (!isCode(err, 409)) throw err
        },
      )
      return
    }
    if (serving.spec?.preparationName === p.metadata.name && serving.spec?.preparationPolicy?.type === type) return
    const spec = {...serving.spec, preparationName: p.metadata.name, preparationPolicy: {...serving.spec?.preparationPolicy, type}}
    await custom.replaceNamespacedCustomObject({...SERVINGS, namespace: ns, name: orderName, body: {...serving, spec}}).then(
      () => events.push(`Serving ${ns}/${orderName} moved to ${p.metadata.name} (${type})`),
      (err) => {
        if (!isCode(err, 409)) throw err
      },
    )
  }

  /** serving_controller.go Reconcile 70-205; returns a requeue delay, if any. */
  async function reconcileServing(ns: string, name: string): Promise<number | undefined> {
    let serving = await get(SERVINGS, ns, name)
    if (!serving) return undefined
    if (serving.metadata.deletionTimestamp) return reconcileServingDelete(serving)
    if (!serving.metadata.finalizers?.includes(FINALIZER)) {
      serving = (await custom.replaceNamespacedCustomObject({
        ...SERVINGS,
        namespace: ns,
        name,
        body: {...serving, metadata: {...serving.metadata, finalizers: [...(serving.metadata.finalizers ?? []), FINALIZER]}},
      })) as Obj
    }
    let preparationName = serving.spec?.preparationName as string
    if (serving.spec?.preparationPolicy?.type === 'Automatic') {
      const preparations = ((await list(PREPARATIONS, ns)) ?? []).filter((p) => p.metadata.labels?.[ORDER_LABEL] === serving!.spec?.orderName)
      if (preparations.length === 0) {
        await writeServingStatus(serving, 'Unknown', 'Pending', 'Waiting for preparations')
        return PENDING_REQUEUE_MS
      }
      let latest: Obj | undefined
      for (const p of preparations) {
        if (!isReady(p)) continue
        if (!latest || Date.parse(p.metadata.creationTimestamp!) > Date.parse(latest.metadata.creationTimestamp!)) latest = p
      }
      if (!latest) {
        await writeServingStatus(serving, 'Unknown', 'Pending', 'Waiting for ready preparation')
        return PENDING_REQUEUE_MS
      }
      preparationName = latest.metadata.name
      if (serving.spec?.preparationName !== preparationName) {
        await custom.replaceNamespacedCustomObject({...SERVINGS, namespace: ns, name, body: {...serving, spec: {...serving.spec, preparationName}}})
        events.push(`Serving ${ns}/${name} moved to ${preparationName} (newest Ready)`)
        return 0
      }
    }
    const preparation = await get(PREPARATIONS, ns, preparationName)
    if (!preparation) {
      await writeServingStatus(serving, 'False', 'DeploymentFailed', `preparation not found: preparations.delivery.kokumi.dev "${preparationName}" not found`)
      throw new Error(`Preparation ${ns}/${preparationName} not found`)
    }
    const digest = preparation.spec?.artifact?.digest as string
    if (serving.status?.observedPreparationName === preparationName && serving.status?.deployedDigest === digest && isReady(serving)) return undefined
    const existing = await get(APPLICATIONS, ARGOCD_NAMESPACE, name)
    if (existing && existing.metadata.annotations?.[ALLOWED_ORDER_ANNOTATION] !== serving.spec?.orderName) {
      const message = `opt-in annotation required: Argo CD Application "${name}" must be annotated with "${ALLOWED_ORDER_ANNOTATION}"="${serving.spec?.orderName}" (current value: "${existing.metadata.annotations?.[ALLOWED_ORDER_ANNOTATION] ?? ''}")`
      await writeServingStatus(serving, 'False', 'DeploymentFailed', message)
      events.push(`Application ${ARGOCD_NAMESPACE}/${name} not updated: it lacks ${ALLOWED_ORDER_ANNOTATION}=${serving.spec?.orderName}`)
      return undefined // terminal for this generation (174-181)
    }
    serving = await writeServingStatus(serving, 'Unknown', 'Deploying', 'Creating Argo CD Application')
    const app = desiredApplication(serving, preparation)
    if (!existing) {
      await custom.createNamespacedCustomObject({...APPLICATIONS, namespace: ARGOCD_NAMESPACE, body: app})
      events.push(`Application ${ARGOCD_NAMESPACE}/${name} created at ${digest}`)
    } else {
      // A full Update of the object built above: nothing of the stored one is kept but its resourceVersion.
      await custom.replaceNamespacedCustomObject({
        ...APPLICATIONS,
        namespace: ARGOCD_NAMESPACE,
        name,
        body: {...app, metadata: {...app.metadata, resourceVersion: existing.metadata.resourceVersion}},
      })
      events.push(`Application ${ARGOCD_NAMESPACE}/${name} updated to ${digest}`)
    }
    serving = {...serving, status: {...serving.status, observedPreparationName: preparationName, deployedDigest: digest}}
    await writeServingStatus(serving, 'True', 'Deployed', 'Successfully deployed component')
    return undefined
  }

  /** serving_controller.go reconcileDelete 343-376. */
  async function reconcileServingDelete(serving: Obj): Promise<undefined> {
    if (!serving.metadata.finalizers?.includes(FINALIZER)) return undefined
    await custom.deleteNamespacedCustomObject({...APPLICATIONS, namespace: ARGOCD_NAMESPACE, name: serving.metadata.name}).catch((err) => {
      if (!isCode(err, 404)) throw err
    })
    const finalizers = serving.metadata.finalizers.filter((f) => f !== FINALIZER)
    await custom.replaceNamespacedCustomObject({
      ...SERVINGS,
      namespace: serving.metadata.namespace!,
      name: serving.metadata.name,
      body: {...serving, metadata: {...serving.metadata, finalizers}},
    })
    return undefined
  }

  /** internal/status/serving.go set: observedGeneration and the Ready condition; a conflict is ignored. */
  async function writeServingStatus(serving: Obj, status: 'True' | 'False' | 'Unknown', reason: string, message: string): Promise<Obj> {
    const body = {
      ...serving,
      status: {
        ...serving.status,
        observedGeneration: serving.metadata.generation,
        conditions: [condition(serving.status?.conditions, status, reason, message, serving.metadata.generation)],
      },
    }
    try {
      return (await custom.replaceNamespacedCustomObjectStatus({...SERVINGS, namespace: serving.metadata.namespace!, name: serving.metadata.name, body})) as Obj
    } catch (err) {
      if (isCode(err, 409)) return serving
      throw err
    }
  }

  async function get(api: typeof ORDERS, namespace: string, name: string): Promise<Obj | undefined> {
    try {
      return (await custom.getNamespacedCustomObject({...api, namespace, name})) as Obj
    } catch (err) {
      if (isCode(err, 404)) return undefined
      throw err
    }
  }

  /** The objects listed, none while the CRD is missing, undefined while its storage initializes (429). */
  async function list(api: typeof ORDERS, namespace?: string): Promise<Obj[] | undefined> {
    try {
      const res = namespace ? await custom.listNamespacedCustomObject({...api, namespace}) : await custom.listClusterCustomObject(api)
      return (res as {items: Obj[]}).items
    } catch (err) {
      if (isCode(err, 404)) return []
      if (isCode(err, 429)) return undefined
      throw err
    }
  }

  return {
    round,
    restart,
    async promote(namespace, name) {
      const order = await get(ORDERS, namespace, name)
      const preparation = order?.status?.latestPreparationName as string | undefined
      if (!preparation) throw new Error(`Kokumi simulator: Order ${namespace}/${name} has no Preparation to promote`)
      await custom.patchNamespacedCustomObject(
        {...PREPARATIONS, namespace, name: preparation, body: {metadata: {labels: {[APPROVE_DEPLOY_LABEL]: 'true'}}}},
        mergePatch(),
      )
    },
  }
}

/** The Application serving_controller.go reconcileArgoApplication 208-259 builds. */
export function desiredApplication(serving: Obj, preparation: Obj): Obj & {apiVersion: string; kind: string} {
  const ociRef = String(preparation.spec?.artifact?.ociRef ?? '').replace(/^oci:\/\//, '')
  const [repository] = ociRef.split('@')
  return {
    apiVersion: 'argoproj.io/v1alpha1',
    kind: 'Application',
    metadata: {
      name: serving.metadata.name,
      namespace: ARGOCD_NAMESPACE,
      labels: {[ORDER_LABEL]: serving.spec?.orderName, [SERVING_LABEL]: serving.metadata.name},
      annotations: {[ALLOWED_ORDER_ANNOTATION]: serving.spec?.orderName},
    },
    spec: {
      project: 'default',
      source: {repoURL: `oci://${repository}`, targetRevision: preparation.spec?.artifact?.digest, path: '.'},
      destination: {server: 'https://kubernetes.default.svc', namespace: serving.metadata.namespace},
      syncPolicy: {automated: {prune: true, selfHeal: true}, syncOptions: ['ServerSideApply=true']},
    },
  }
}

/**
 * The auto-deploy label value: string(order.Spec.AutoDeploy) (order_controller.go 265). The 0.17
 * fixture's Order has promotion.mode instead; taken to stamp Enabled for Automatic (an assumption
 * of the fixture: 0.17 cannot be read here).
 */
function autoDeployOf(spec: Record<string, any> | undefined): string {
  if (spec?.promotion?.mode) return spec.promotion.mode === 'Automatic' ? 'Enabled' : 'Disabled'
  return String(spec?.autoDeploy ?? '')
}

/** Which CalculateSpecHash a Kokumi version runs: 0.14.0's, or main's (commit 5b113ca, #297, after 0.14.0). */
export type HashRule = 'kokumi-0.14.0' | 'kokumi-main'

/** As pullerFor: 0.14.x is the tag read, any other version behaves as main. */
export function hashRuleFor(kokumiVersion: string): HashRule {
  return /^v?0\.(\d+)\./.exec(kokumiVersion)?.[1] === '14' ? 'kokumi-0.14.0' : 'kokumi-main'
}

/**
 * renderer/hash.go CalculateSpecHash's inputs (not its bytes: only equality matters here). 0.14.0
 * hashes spec.source.oci as written; main hashes the resolved source URL (a plain oci URL
 * resolves to itself) and adds the resolved destination (`destOCI`), so the same Order hashes
 * differently under main than under 0.14.0.
 */
export function configHash(spec: Record<string, any>, rule: HashRule = 'kokumi-0.14.0', destOci?: string): string {
  const inputs = {
    oci: spec.source?.oci,
    version: spec.source?.version,
    menuRef: spec.menuRef?.name,
    ...(rule === 'kokumi-main' ? {destOCI: destOci} : {}),
    render: spec.render,
    patches: spec.patches,
    edits: spec.edits,
  }
  return `sha256:${createHash('sha256').update(JSON.stringify(inputs)).digest('hex')}`
}

export interface Normalized {
  text: string
  /** Documents kept. */
  kept: number
  /** The first document yaml.v3 could not decode; it and all after it are dropped, silently. */
  stoppedAt?: {index: number; error: string}
}

/**
 * renderer.go NormalizeYAML 50-65 (gopkg.in/yaml.v3 v3.0.1, go.mod of 0.14.0): documents are
 * decoded into yaml.Node one by one until the first error, which ends the loop with no error
 * (56-59), and encoded again with indent 2 (marshalYAMLNodes 263-278). A Node keeps key order,
 * scalar styles, tags, anchors and comments, so the text changes mostly in layout.
 * Reproduced with the `yaml` package; what differs from yaml.v3:
 * - what fails to decode: libyaml's reader refuses control characters (readerc.go 355-381)
 *   and a %YAML directive other than 1.1 (parserc.go 1195-1198), checked here by hand; other
 *   syntax errors are the `yaml` package's, which accepts and refuses nearly the same
 *   documents (duplicate keys are accepted, as a Node decode does not check them);
 * - layout: comment placement, and the style libyaml picks when a kept style cannot be
 *   emitted (a literal block with trailing spaces becomes double-quoted in yaml.v3), may
 *   differ; yaml.v3 does not wrap lines (apic.go 111, best_width -1): neither does this.
 */
export function normalizeYaml(content: string): Normalized {
  const docs = parseAllDocuments(content, {uniqueKeys: false, keepSourceTokens: true})
  const out: string[] = []
  let stoppedAt: Normalized['stoppedAt']
  for (const [index, doc] of (Array.isArray(docs) ? docs : [docs]).entries()) {
    const source = doc.range ? content.slice(doc.range[0], doc.range[2]) : ''
    const error = libyamlRefuses(source) ?? doc.errors[0]?.message
    if (error) {
      stoppedAt = {index, error}
      break
    }
    // A yaml.v3 Node holds no document markers: the Encoder writes them (below), so the
    // source's own `---` must not be written again (it would add an empty document).
    if (doc.directives) doc.directives.docStart = null
    out.push(doc.toString({indent: 2, indentSeq: true, lineWidth: 0, flowCollectionPadding: false}))
  }
  // yaml.v3's Encoder writes `---` before every document but the first.
  return {text: out.join('---\n'), kept: out.length, ...(stoppedAt ? {stoppedAt} : {})}
}

function libyamlRefuses(source: string): string | undefined {
  // #x9 | #xA | #xD | [#x20-#x7E] | #x85 | [#xA0-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]
  const bad = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ufffe\uffff]/.exec(source)
  if (bad) return `yaml: control characters are not allowed`
  const directive = /^%YAML[ \t]+(\d+)\.(\d+)/m.exec(source)
  if (directive && (directive[1] !== '1' || directive[2] !== '1')) return 'yaml: found incompatible YAML document'
  return undefined
}

function condition(previous: any[] | undefined, status: string, reason: string, message: string, generation: number | undefined) {
  const before = previous?.find((c) => c.type === 'Ready')
  // meta.SetStatusCondition: the transition time moves only when the status does.
  return {
    type: 'Ready',
    status,
    reason,
    message,
    observedGeneration: generation,
    lastTransitionTime: before?.status === status ? before.lastTransitionTime : FIXED_TIME,
  }
}

function isReady(o: Obj): boolean {
  return (o.status?.conditions as any[] | undefined)?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false
}

/** A ustar archive as Go's archive/tar writes one with an unset format: times rounded to the second. */
function ustar(entries: {name: string; mode: number; dir?: boolean; data?: Buffer}[], mtime: Date): Buffer {
  const blocks: Buffer[] = []
  const seconds = Math.round(mtime.getTime() / 1000)
  for (const e of entries) {
    const h = Buffer.alloc(512)
    const data = e.data ?? Buffer.alloc(0)
    h.write(e.name, 0, 100, 'utf8')
    h.write(`${e.mode.toString(8).padStart(7, '0')}\0`, 100)
    h.write('0000000\0', 108)
    h.write('0000000\0', 116)
    h.write(`${data.length.toString(8).padStart(11, '0')}\0`, 124)
    h.write(`${seconds.toString(8).padStart(11, '0')}\0`, 136)
    h.write('        ', 148)
    h.write(e.dir ? '5' : '0', 156)
    h.write('ustar\0' + '00', 257, 'binary')
    let sum = 0
    for (const b of h) sum += b
    h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148)
    blocks.push(h, data, Buffer.alloc((512 - (data.length % 512)) % 512))
  }
  blocks.push(Buffer.alloc(1024))
  return Buffer.concat(blocks)
}

function sha256(b: Buffer): string {
  return `sha256:${createHash('sha256').update(b).digest('hex')}`
}

/** encoding/json writes map keys sorted. */
function sortKeys(o: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
}

function keyOf(o: Obj): string {
  return `${o.metadata.namespace}/${o.metadata.name}`
}

function mergePatch() {
  return setHeaderOptions('Content-Type', 'application/merge-patch+json')
}

export function isCode(err: unknown, code: number): boolean {
  return (err as {code?: number}).code === code
}
