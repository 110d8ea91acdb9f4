// `ichor stack status`: per component what ichor published (the IchorInstallation status),
// whether Kokumi's registry still holds it, the Order and its latest Preparation, and the
// Application Kokumi made. Read-only: the same reads serve `stack sync`'s probes.
import type {Kube} from '../kube/client.js'
import {credentialExpiryWarnings, type ExpiryWarning} from '../talos/credential-expiry.js'
import {getObject, type KubeObject} from '../kube/objects.js'
import {explainApplicationHealth, readApplication, readOrder, type ApplicationState} from './delivery.js'
import type {OciClient} from '../oci/client.js'
import type {Session} from '../session/session.js'
import {readInstallation} from '../state/installation.js'
import {newDriftRound, readBundleDrift, type DriftedObject, type DriftRound} from './drift.js'
import {findSecretMismatches} from './generated-secrets.js'
import {installedKokumiVersion, orderPromotion} from './kokumi-api.js'
import {readSameContentRerender} from './rerender.js'
import {ARGOCD_NAMESPACE} from '../constants.js'
import {type PromotionMode, STACK_COMPONENTS, type StackComponent} from '../state/installation-types.js'
import {BUNDLE_REPOSITORY_PREFIX, COMPONENT_NAMESPACE, IN_CLUSTER_REGISTRY, ORDER_API_VERSION} from './orders.js'

export interface PublishedBundle {
  /** As Kokumi and Argo CD address it, `kokumi-registry.kokumi.svc.cluster.local:5000/ichor/argocd`. */
  repository: string
  tag: string
  digest: string
}

export interface ComponentStackStatus {
  component: StackComponent
  namespace: string
  /** From the IchorInstallation status; undefined before init recorded it. */
  published?: PublishedBundle
  registry: {
    /** The registry holds the published tag at the published digest. */
    bundle: boolean
    /** What the tag resolves to now (undefined: the tag is gone). */
    bundleDigest?: string
    /** The artifact of the Order's latest Preparation (what Argo CD pulls) is still there. */
    preparation: boolean
  }
  order: {
    exists: boolean
    version?: string
    promotion?: PromotionMode
    ready: boolean
    reason?: string
    message?: string
    latestPreparation?: string
    latestArtifactDigest?: string
  }
  preparation?: {name: string; sourceDigest?: string; artifact?: string}
  application: {exists: boolean} & ApplicationState
  /**
   * Promotion Manual: the Order's latest Preparation is Kokumi's render again of the files the
   * served one holds (after a Kokumi upgrade, or a retry): nothing to approve, `stack sync` serves it.
   */
  rerendered?: {preparation: string; sameContentAs: string}
  /** Ways in which what runs is not what ichor published; empty when in line. */
  drift: string[]
  /** Objects of the published bundle a sync would change (a dry-run apply as Argo CD's manager). */
  driftedObjects: DriftedObject[]
  /** Everything that makes the component degraded (drift included); empty when healthy. */
  problems: string[]
  healthy: boolean
}

export interface StackStatus {
  healthy: boolean
  kokumiVersion?: string
  components: ComponentStackStatus[]
  /** The kubeconfig's client certificate when it ends within 30 days (a warning: the stack stays healthy). */
  warnings: ExpiryWarning[]
}

type OrderObject = KubeObject & {
  spec?: {source?: {version?: string}}
  status?: {conditions?: {type: string; status: string; reason?: string; message?: string}[]; latestPreparationName?: string; latestArtifactDigest?: string}
}
type PreparationObject = KubeObject & {spec?: {source?: {baseDigest?: string}; artifact?: {ociRef?: string; digest?: string}}}

/** The path of a repository inside the registry: `host:port/ichor/argocd` → `ichor/argocd`. */
function registryPath(repository: string): string {
  const withoutScheme = repository.replace(/^oci:\/\//, '')
  return withoutScheme.slice(withoutScheme.indexOf('/') + 1)
}

async function readStackStatus(session: Session): Promise<StackStatus> {
  const kube = await session.kube()
  const [installation, kokumiVersion] = await Promise.all([readInstallation(kube), installedKokumiVersion(kube)])
  let registry: OciClient | undefined
  let registryError: string | undefined
  try {
    registry = await session.registry()
  } catch (error) {
    registryError = (error as Error).message.split('\n')[0]
  }
  // bcrypt (about 0.1 s of CPU) while the components' requests are out.
  const mismatches = findSecretMismatches(kube)
  mismatches.catch(() => {}) // awaited below
  const round = newDriftRound()
  const components = await Promise.all(
    STACK_COMPONENTS.map(async (c) => {
      const s = installation?.status?.stack?.[c]
      const published = s && {repository: `${IN_CLUSTER_REGISTRY}/${BUNDLE_REPOSITORY_PREFIX}/${c}`, tag: s.publishedTag, digest: s.digest}
      const status = await readComponentStatus(kube, c, published, registry, registryError, round)
      // A generated Secret that no longer opens the component: the next init would stop on it.
      for (const m of (await mismatches).filter((x) => x.component === c)) status.problems.push(m.message)
      return {...status, healthy: status.problems.length === 0}
    }),
  )
  return {healthy: components.every((c) => c.healthy), kokumiVersion, components, warnings: credentialExpiryWarnings({kubeconfig: kube.kubeconfig})}
}

async function readComponentStatus(
  kube: Kube,
  component: StackComponent,
  published: PublishedBundle | undefined,
  registry: OciClient | undefined,
  registryError: string | undefined,
  round: DriftRound,
): Promise<ComponentStackStatus> {
  const namespace = COMPONENT_NAMESPACE[component]
  const problems: string[] = []
  const drift: string[] = []
  const [orderObject, orderState, app] = await Promise.all([
    getObject<OrderObject>(kube, {apiVersion: ORDER_API_VERSION, kind: 'Order', name: component, namespace}),
    readOrder(kube, component),
    readApplication(kube, component),
  ])
  const ready = orderObject?.status?.conditions?.find((x) => x.type === 'Ready')
  const order: ComponentStackStatus['order'] = {
    exists: orderObject !== undefined,
    version: orderObject?.spec?.source?.version,
    promotion: orderObject ? orderPromotion(orderObject.spec) : undefined,
    ready: orderState?.ready ?? false,
    reason: ready?.reason,
    message: ready?.message,
    latestPreparation: orderObject?.status?.latestPreparationName,
    latestArtifactDigest: orderObject?.status?.latestArtifactDigest,
  }
  const prepObject = order.latestPreparation
    ? await getObject<PreparationObject>(kube, {apiVersion: ORDER_API_VERSION, kind: 'Preparation', name: order.latestPreparation, namespace}).catch(
        () => undefined,
      )
    : undefined
  const preparation = order.latestPreparation
    ? {name: order.latestPreparation, sourceDigest: prepObject?.spec?.source?.baseDigest, artifact: prepObject?.spec?.artifact?.ociRef}
    : undefined

  const reg: ComponentStackStatus['registry'] = {bundle: false, preparation: false}
  if (!registry) problems.push(`the registry cannot be reached: ${registryError}`)
  if (registry && published) {
    reg.bundleDigest = (await registry.headManifest(registryPath(published.repository), published.tag))?.digest
    reg.bundle = reg.bundleDigest === published.digest
    if (!reg.bundleDigest) problems.push(`the registry lost ${published.tag} (published at ${published.digest})`)
    else if (!reg.bundle) problems.push(`the registry holds ${published.tag} at ${reg.bundleDigest}, not the published ${published.digest}`)
  }
  if (registry && order.latestArtifactDigest) {
    const at = preparation?.artifact?.replace(/^oci:\/\//, '').split('@')[0] ?? `${IN_CLUSTER_REGISTRY}/${namespace}/${component}`
    reg.preparation = (await registry.headManifest(registryPath(at), order.latestArtifactDigest)) !== undefined
    if (!reg.preparation)
      problems.push(`the registry lost the artifact of Preparation ${order.latestPreparation ?? '?'} (${order.latestArtifactDigest}) that Argo CD pulls`)
  }

  if (!published) problems.push('ichor has recorded no published bundle (run ichor init)')
  if (!order.exists) problems.push(`no Order ${namespace}/${component}`)
  else if (!order.ready) problems.push(`Order ${namespace}/${component} is not Ready${order.message ? `: ${order.message}` : ''}`)
  if (!app) problems.push(`no Application ${ARGOCD_NAMESPACE}/${component}`)
  else if (app.sync !== 'Synced' || app.health !== 'Healthy') {
    const why = app.health === 'Healthy' ? [] : await explainApplicationHealth(kube, app)
    problems.push(
      `Application ${ARGOCD_NAMESPACE}/${component} is ${app.sync ?? 'Unknown'}/${app.health ?? 'Unknown'}${why.length > 0 ? `: ${why.join('; ')}` : ''}`,
    )
  }

  // Drift: the chain published digest → Order → Preparation → Application is broken somewhere.
  if (published && order.version && order.version !== published.tag) drift.push(`the Order asks for ${order.version}, ichor published ${published.tag}`)
  if (published && preparation?.sourceDigest && preparation.sourceDigest !== published.digest)
    drift.push(`Preparation ${preparation.name} was rendered from ${preparation.sourceDigest}, ichor published ${published.digest}`)
  let rerendered: ComponentStackStatus['rerendered']
  if (app && order.latestArtifactDigest && app.revision !== order.latestArtifactDigest) {
    // With Manual promotion a newer Preparation waits for a person: say how, it is not drift.
    // A render of the served files again is no change to approve (rerender.ts).
    const again = order.promotion === 'Manual' && registry ? await readSameContentRerender(kube, registry, component) : undefined
    if (again) rerendered = {preparation: again.preparation, sameContentAs: again.served}
    else if (order.promotion === 'Manual')
      problems.push(`Preparation ${order.latestPreparation ?? order.latestArtifactDigest} waits for approval: run ichor stack promote ${component}`)
    else drift.push(`the Application is at ${app.revision ?? 'no revision'}, the Order's latest Preparation is ${order.latestArtifactDigest}`)
  }
  // Objects changed out of band: only against a bundle the registry still holds.
  const driftedObjects =
    registry && published && reg.bundle ? ((await readBundleDrift(kube, registry, component, published.tag, {round, digest: reg.bundleDigest})) ?? []) : []
  for (const d of driftedObjects)
    drift.push(`${d.object} differs from the published bundle (${d.fields.join(', ')}): run ichor stack sync to have Argo CD sync it again`)
  problems.push(...drift)
  return {
    component,
    namespace,
    published,
    registry: reg,
    order,
    preparation,
    application: {exists: app !== undefined, sync: app?.sync, health: app?.health, revision: app?.revision},
    ...(rerendered ? {rerendered} : {}),
    drift,
    driftedObjects,
    problems,
    healthy: problems.length === 0,
  }
}

export interface StackSessionOptions {
  kubeconfig?: string
  context?: string
  registryEndpoint?: string
}

/** Opens a session, reads, closes: the whole of `ichor stack status`. */
export async function stackStatus(options: StackSessionOptions): Promise<StackStatus> {
  const {withSession} = await import('../session/session.js')
  return withSession({command: 'stack status', ...options}, readStackStatus)
}

/** The human form: one block per component, the problems last. */
export function renderStackStatus(s: StackStatus): string {
  const lines = [`Kokumi ${s.kokumiVersion ?? '(version unknown)'}; stack ${s.healthy ? 'healthy' : 'DEGRADED'}`]
  for (const c of s.components) {
    lines.push('', `${c.component} (${c.namespace}): ${c.healthy ? 'healthy' : 'degraded'}`)
    lines.push(`  published    ${c.published ? `${c.published.tag} ${c.published.digest}` : 'none recorded'}`)
    lines.push(`  registry     bundle ${c.registry.bundle ? 'present' : 'MISSING'}, preparation ${c.registry.preparation ? 'present' : 'MISSING'}`)
    lines.push(
      `  order        ${c.order.exists ? `${c.order.version} ${c.order.promotion} ${c.order.ready ? 'Ready' : `not Ready (${c.order.reason ?? 'no status'})`}${c.order.latestPreparation ? `, Preparation ${c.order.latestPreparation}` : ''}` : 'none'}`,
    )
    lines.push(
      `  application  ${c.application.exists ? `${c.application.sync ?? 'Unknown'}/${c.application.health ?? 'Unknown'} at ${c.application.revision ?? 'no revision'}` : 'none'}`,
    )
    if (c.rerendered)
      lines.push(
        `  re-rendered  ${c.rerendered.preparation}, same content as the served ${c.rerendered.sameContentAs}: nothing to approve (ichor stack sync serves it)`,
      )
    for (const p of c.problems) lines.push(`  ! ${p}`)
  }
  if (!s.healthy) lines.push('', 'Run `ichor stack sync` to republish lost bundles and have Kokumi render again.')
  for (const w of s.warnings) lines.push('', `warning: ${w.what}`, `  fix: ${w.fix}`)
  return lines.join('\n')
}
