// `stack sync`'s steps, which repair a running stack: republish the bundles the registry
// lost, make Kokumi render again what it lost, and apply again what drifted from the bundles.
import {opensRegistry} from '../session/tasks.js'
import {FIELD_MANAGER, ARGOCD_NAMESPACE} from '../constants.js'
import {IchorError} from '../errors/errors.js'
import {readApplication} from './delivery.js'
import type {Kube} from '../kube/client.js'
import {getObject, type KubeObject} from '../kube/objects.js'
import {waitFor} from '../kube/wait.js'
import {publishBundle} from '../oci/publish.js'
import type {Session} from '../session/session.js'
import {readInstallation} from '../state/installation.js'
import {holds, missing} from '../tasks/probe.js'
import type {Later, Task} from '../tasks/types.js'
import {newDriftRound, readBundleDrift, type DriftedObject} from './drift.js'
import {approvePreparation, listPreparations} from './promote.js'
import {orderPromotion} from './kokumi-api.js'
import type {OciClient} from '../oci/client.js'
import {preparationArtifact, readSameContentRerender, sameRenderedContent, type RenderedPreparation, type SameContentRerender} from './rerender.js'
import {COMPONENT_NAMESPACE, ORDER_API_VERSION, BUNDLE_REPOSITORY_PREFIX} from './orders.js'
import type {StackComponent} from '../state/installation-types.js'
import type {PreparedStack} from './prepare.js'

/** What ichor recorded as published, per component (the IchorInstallation status). */
export type PublishedBundles = Partial<Record<StackComponent, {tag: string; digest: string}>>

/**
 * `stack sync`: put back what the registry lost. The probe reads only the recorded tags and
 * the registry; the bundles are rendered again (same inputs ⟹ same digests) only when one is
 * missing, and a render that does not give the recorded digest is refused, never pushed.
 */
export function republishTask(p: {session: Session; published: Later<PublishedBundles>; stack: Later<PreparedStack>}): Task {
  const lost = async (): Promise<StackComponent[]> => {
    const client = await p.session.registry()
    const out: StackComponent[] = []
    for (const [c, b] of Object.entries(await p.published()) as [StackComponent, {tag: string; digest: string}][]) {
      if ((await client.headManifest(`${BUNDLE_REPOSITORY_PREFIX}/${c}`, b.tag))?.digest !== b.digest) out.push(c)
    }
    return out
  }
  return {
    id: 'republish-bundles',
    ...opensRegistry(p.session),
    title: 'Republish the bundles the registry lost (same inputs, same digests)',
    async probe() {
      const published = await p.published()
      if (Object.keys(published).length === 0) return missing('ichor has recorded no published bundle: run ichor init first')
      const gone = await lost()
      return gone.length > 0 ? missing(`the registry lost ${gone.join(' and ')}`) : holds('the registry holds every published bundle at its digest')
    },
    async run(progress) {
      const published = await p.published()
      if (Object.keys(published).length === 0)
        throw new IchorError('ichor has recorded no published bundle in the IchorInstallation status', {hint: 'run ichor init first'})
      const gone = await lost()
      const stack = await p.stack()
      const client = await p.session.registry()
      for (const name of gone) {
        const c = stack.components[name]
        const want = published[name]!
        if (c.bundle.tag !== want.tag || c.bundle.artifact.manifestDigest !== want.digest) {
          throw new IchorError(
            `re-rendering ${name} gives ${c.bundle.tag} (${c.bundle.artifact.manifestDigest}), not the published ${want.tag} (${want.digest}): the chart, manifest or values differ from the install`,
            {hint: 'pass the artifacts the cluster was installed with (--argocd-chart, --kokumi-manifest or --mirror)'},
          )
        }
        const r = await publishBundle(client, {
          repository: `${BUNDLE_REPOSITORY_PREFIX}/${name}`,
          tag: c.bundle.tag,
          layer: c.bundle.layer,
          layerDigest: c.bundle.layerDigest,
          annotations: {source: `oci://${c.bundle.repository}`, version: c.bundle.tag},
        })
        progress(`${name} ${c.bundle.tag} ${r.pushed ? 'pushed' : 'already there'}`)
      }
    },
  }
}

/**
 * `stack sync`: make Kokumi render again what the registry lost. Kokumi's Order controller
 * (0.14.0 and main, internal/controller/order_controller.go) renders only when the hash of the
 * render inputs differs from status.latestConfigHash; annotations and autoDeploy are not
 * inputs, so neither an annotation nor a generation bump re-renders. Clearing
 * latestConfigHash is what Kokumi's own failure path does (status/order.go Failed) before it
 * retries: the next reconcile pulls the source again and pushes the Preparation back. No
 * user object is deleted and the Order's spec is untouched.
 */
export function rerenderTask(p: {session: Session; components: readonly StackComponent[] | Later<readonly StackComponent[]>; timeoutMs: number}): Task {
  const lost = async (): Promise<{component: StackComponent; why: string}[]> => {
    const kube = await p.session.kube()
    const client = await p.session.registry()
    const out: {component: StackComponent; why: string}[] = []
    for (const c of typeof p.components === 'function' ? await p.components() : p.components) {
      const order = await readOrderArtifact(kube, c)
      if (!order) continue // no Order: init's business, not sync's
      if (!order.ready) out.push({component: c, why: `Order ${COMPONENT_NAMESPACE[c]}/${c} is not Ready`})
      else if (order.digest && !(await client.headManifest(order.repository, order.digest)))
        out.push({component: c, why: `the registry lost Preparation ${order.preparation ?? order.digest}`})
      else {
        // The Serving may serve an older Preparation than the Order's latest (promotion Manual):
        // its artifact is what Argo CD pulls, so it must be there too.
        const served = await readServedArtifact(kube, c)
        if (served && served.name !== order.preparation && !(await client.headManifest(order.repository, served.digest)))
          out.push({component: c, why: `the registry lost the served Preparation ${served.name}`})
      }
    }
    return out
  }
  return {
    id: 'rerender-orders',
    ...opensRegistry(p.session),
    title: 'Have Kokumi render again the Preparations the registry lost (promotion Manual: serve the same content again)',
    async probe() {
      const gone = await lost()
      return gone.length > 0
        ? missing(gone.map((g) => g.why).join('; '))
        : holds('every Order is Ready and the artifacts of its latest and served Preparations are in the registry')
    },
    async run(progress) {
      const kube = await p.session.kube()
      const client = await p.session.registry()
      const gone = await lost()
      for (const {component} of gone) {
        const order = await readOrderArtifact(kube, component)
        if (order?.ready && order.digest && (await client.headManifest(order.repository, order.digest))) continue // only the served one is gone
        await kube.request('PATCH', `/apis/${ORDER_API_VERSION}/namespaces/${COMPONENT_NAMESPACE[component]}/orders/${component}/status`, {
          body: {status: {latestConfigHash: null}},
          contentType: 'application/merge-patch+json',
          query: {fieldManager: FIELD_MANAGER},
        })
        progress(`${component}: render requested`)
      }
      const latestGone = async () => (await lost()).filter((g) => !g.why.includes('served Preparation'))
      await waitFor(
        'Kokumi to push the Preparations again',
        async () => {
          const left = await latestGone()
          return {done: left.length === 0, state: left.length === 0 ? 'all rendered' : left.map((g) => g.why).join('; ')}
        },
        {timeoutMs: p.timeoutMs, onProgress: progress},
      )
      for (const {component} of gone) await reserveSameContent(kube, client, component, progress)
      await waitFor(
        'the Servings to serve Preparations the registry holds',
        async () => {
          const left = await lost()
          return {done: left.length === 0, state: left.length === 0 ? 'all served' : left.map((g) => g.why).join('; ')}
        },
        {timeoutMs: p.timeoutMs, onProgress: progress},
      )
    },
  }
}

/** The Preparation the Order's Serving points at, and its artifact digest. */
async function readServedArtifact(
  kube: Kube,
  c: StackComponent,
): Promise<{name: string; digest: string; source?: {oci?: string; baseDigest?: string}; configHash?: string; object: RenderedPreparation} | undefined> {
  const ns = COMPONENT_NAMESPACE[c]
  const serving = await getObject<KubeObject & {spec?: {preparationName?: string}}>(kube, {
    apiVersion: ORDER_API_VERSION,
    kind: 'Serving',
    name: c,
    namespace: ns,
  })
  const name = serving?.spec?.preparationName
  if (!name) return undefined
  const prep = await getObject<RenderedPreparation>(kube, {apiVersion: ORDER_API_VERSION, kind: 'Preparation', name, namespace: ns})
  const digest = prep?.spec?.artifact?.digest
  return prep && digest ? {name, digest, source: prep.spec?.source, configHash: prep.spec?.configHash, object: prep} : undefined
}

/**
 * Promotion Manual after a registry loss: Kokumi renders the same bundle again under a new
 * artifact digest (oras stamps the push time), so a new Preparation, which waits for approval,
 * while the Serving still points at the old one whose artifact is gone. When the new render
 * holds the same content, approving it serves the same content again; anything else is a
 * person's decision, said with its command. Same content: the same files when the registry
 * still holds both artifacts (rerender.ts); with the served one lost, the same source (URL and
 * bundle digest ichor published) and the same destination, and either the same config hash or
 * an Order with no render inputs besides its source. Kokumi's hash is of those inputs only,
 * and its rule changed after 0.14.0 (main hashes the resolved source and destination too,
 * renderer/hash.go), so after a Kokumi upgrade the same inputs hash differently.
 */
async function reserveSameContent(kube: Kube, client: OciClient, c: StackComponent, progress: (line: string) => void): Promise<void> {
  const ns = COMPONENT_NAMESPACE[c]
  const order = await getObject<KubeObject & {spec?: Record<string, unknown>}>(kube, {apiVersion: ORDER_API_VERSION, kind: 'Order', name: c, namespace: ns})
  if (orderPromotion(order?.spec) !== 'Manual') return // Automatic: Kokumi serves the newest render itself
  const served = await readServedArtifact(kube, c)
  const latestName = (await readOrderArtifact(kube, c))?.preparation
  if (!served || !latestName || served.name === latestName) return
  const latest = (await listPreparations(kube, ns, c)).find((x) => x.metadata.name === latestName)
  const sameFiles = latest && served.object ? await sameRenderedContent(client, latest, served.object) : undefined
  const sameArtifactRepository = preparationArtifact(latest)?.repository === preparationArtifact(served.object)?.repository
  const onlySource = !['render', 'patches', 'edits', 'menuRef', 'destination'].some((k) => order?.spec?.[k] !== undefined && order.spec[k] !== null)
  const same =
    sameFiles ??
    (latest?.spec?.source?.baseDigest === served.source?.baseDigest &&
      latest?.spec?.source?.oci === served.source?.oci &&
      sameArtifactRepository &&
      (latest?.spec?.configHash === served.configHash || onlySource))
  if (!same) {
    throw new IchorError(
      `the registry lost Preparation ${served.name}, which ${c} serves, and Kokumi can render only the Order's current bundle (Preparation ${latestName}), which is other content waiting for approval`,
      {
        hint: `serve the current bundle with \`ichor stack promote ${c}\`, or set the served values back with \`ichor stack values set ${c}\` and run ichor stack sync again`,
      },
    )
  }
  await approvePreparation(kube, ns, c, latestName)
  progress(`${c}: ${latestName} (the same bundle as the lost ${served.name}) approved`)
}

/**
 * `stack sync`, promotion Manual: a Preparation Kokumi rendered again with the files of the one
 * it serves (after a Kokumi upgrade, whose config hash covers more inputs, or a retry) is no
 * change a person must approve, so it is approved, the only approval of its Order; Kokumi moves
 * the Serving and Argo CD syncs the same files at the new digest. Other content is left to
 * `ichor stack promote`.
 */
export function approveRerendersTask(p: {session: Session; components: readonly StackComponent[]}): Task {
  const waiting = async (): Promise<SameContentRerender[]> => {
    const kube = await p.session.kube()
    const client = await p.session.registry()
    const out: SameContentRerender[] = []
    for (const c of p.components) {
      const r = await readSameContentRerender(kube, client, c)
      if (r) out.push(r)
    }
    return out
  }
  return {
    id: 'approve-rerenders',
    ...opensRegistry(p.session),
    title: 'Approve the Preparations Kokumi rendered again with the served content (promotion Manual)',
    async probe() {
      const w = await waiting()
      return w.length > 0
        ? missing(w.map((r) => `${r.component}: ${r.preparation} re-renders the served ${r.served}, same content`).join('; '))
        : holds('no Order waits with a re-render of the content it serves')
    },
    async run(progress) {
      const kube = await p.session.kube()
      for (const r of await waiting()) {
        await approvePreparation(kube, COMPONENT_NAMESPACE[r.component], r.component, r.preparation)
        progress(`${r.component}: ${r.preparation} (re-rendered, same content as ${r.served}) approved`)
      }
    },
  }
}

type OrderWithArtifact = KubeObject & {status?: {conditions?: {type: string; status: string}[]; latestArtifactDigest?: string; latestPreparationName?: string}}

/** The Order's latest Preparation artifact: registry path (Kokumi's default destination `<ns>/<order>`) and digest. */
async function readOrderArtifact(
  kube: Kube,
  c: StackComponent,
): Promise<{ready: boolean; repository: string; digest?: string; preparation?: string} | undefined> {
  const ns = COMPONENT_NAMESPACE[c]
  const order = await getObject<OrderWithArtifact>(kube, {apiVersion: ORDER_API_VERSION, kind: 'Order', name: c, namespace: ns})
  if (!order) return undefined
  const ready = order.status?.conditions?.some((x) => x.type === 'Ready' && x.status === 'True') ?? false
  return {ready, repository: `${ns}/${c}`, digest: order.status?.latestArtifactDigest, preparation: order.status?.latestPreparationName}
}

/**
 * `stack sync`: objects of a published bundle changed out of band (see drift.ts) are put back
 * by Argo CD, not by ichor: the Application gets a sync operation at the revision it already
 * runs, which is what `argocd app sync` does (it sets the Application's `operation` field,
 * argoproj/argo-cd server/application/application.go Sync; the application controller runs
 * and then clears it, controller/appcontroller.go processRequestedAppOperations). The step
 * holds once no object differs any more.
 */
export function resyncDriftedTask(p: {session: Session; components: readonly StackComponent[]; timeoutMs: number}): Task {
  const drifted = async (): Promise<{component: StackComponent; objects: DriftedObject[]}[]> => {
    const kube = await p.session.kube()
    const client = await p.session.registry()
    const recorded = (await readInstallation(kube))?.status?.stack ?? {}
    const round = newDriftRound()
    const found = await Promise.all(
      p.components.map(async (component) => {
        const tag = recorded[component]?.publishedTag
        return {component, objects: tag ? ((await readBundleDrift(kube, client, component, tag, {round})) ?? []) : []}
      }),
    )
    return found.filter((f) => f.objects.length > 0)
  }
  const describe = (d: {component: StackComponent; objects: DriftedObject[]}[]) =>
    d.map((x) => `${x.component}: ${x.objects.map((o) => o.object).join(', ')}`).join('; ')
  return {
    id: 'resync-drifted',
    ...opensRegistry(p.session),
    title: 'Have Argo CD sync again the objects that differ from the published bundles',
    async probe() {
      const d = await drifted()
      return d.length > 0 ? missing(`changed out of band: ${describe(d)}`) : holds('every object of the published bundles is as published')
    },
    async run(progress) {
      const kube = await p.session.kube()
      for (const {component} of await drifted()) {
        const revision = (await readApplication(kube, component))?.revision
        if (!revision)
          throw new IchorError(`Application ${ARGOCD_NAMESPACE}/${component} has no synced revision to sync again`, {
            hint: 'wait for Kokumi to serve the Order, then rerun ichor stack sync',
          })
        await kube.request('PATCH', `/apis/argoproj.io/v1alpha1/namespaces/${ARGOCD_NAMESPACE}/applications/${component}`, {
          body: {operation: {initiatedBy: {username: FIELD_MANAGER}, sync: {revision, syncOptions: ['ServerSideApply=true']}}},
          contentType: 'application/merge-patch+json',
          query: {fieldManager: FIELD_MANAGER, fieldValidation: 'Strict'},
        })
        progress(`${component}: sync of ${revision.slice(0, 19)} requested`)
      }
      await waitFor(
        'Argo CD to sync the changed objects back',
        async () => {
          const d = await drifted()
          return {done: d.length === 0, state: d.length === 0 ? 'all as published' : describe(d)}
        },
        {timeoutMs: p.timeoutMs, onProgress: progress},
      )
    },
  }
}
