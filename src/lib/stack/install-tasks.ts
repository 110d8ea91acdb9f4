// Steps that install and hand over the stack: the generated Secrets, the first apply of
// Kokumi and Argo CD, the bundles in Kokumi's registry, the Orders, the policies, and the
// wait for Argo CD to deliver both (which every stack plan ends with). The steps that
// repair a running stack (`stack sync`) are in sync-tasks.ts.
import {opensRegistry} from '../session/tasks.js'
import {ICHOR_SYSTEM, STATE_SECRETS} from '../constants.js'
import {IchorError} from '../errors/errors.js'
import {readDelivery, readOrder} from './delivery.js'
import {createIfAbsent, serverSideApply} from '../kube/apply.js'
import type {Kube} from '../kube/client.js'
import {getObject, listObjects, type KubeObject} from '../kube/objects.js'
import {waitFor, waitForDeploymentRollout} from '../kube/wait.js'
import {publishBundle} from '../oci/publish.js'
import type {Session} from '../session/session.js'
import {readGeneratedSecrets, readInstallation, writeInstallationStatus} from '../state/installation.js'
import {holds, missing} from '../tasks/probe.js'
import type {Later, Task} from '../tasks/types.js'
import {isDeepStrictEqual} from 'node:util'
import {ARGOCD_FIELD_MANAGER} from './argocd.js'
import {findSecretMismatches, secretMismatchError} from './generated-secrets.js'
import {approveLatestPreparation, readAwaitingApproval, readFirstPromotion} from './promote.js'
import {readKokumiOrderApi, shapeOrder, type KokumiOrderApi} from './kokumi-api.js'
import {COMPONENT_NAMESPACE} from './orders.js'
import type {GeneratedStackSecrets, PromotionMode, StackComponent} from '../state/installation-types.js'
import {kokumiPasswordHash} from './kokumi.js'
import {generatedSecretObjects, stackSecretsWith, type PreparedComponent, type PreparedStack} from './prepare.js'
import {once} from '../tasks/memo.js'

const components = async (stack: Later<PreparedStack>): Promise<PreparedComponent[]> => Object.values((await stack()).components)

/** What the summary shows: the Kokumi admin password, on the first successful run (see showKokumiPasswordOnceTask). */
export interface StackSecretsOutcome {
  kokumiAdminPassword?: string
}

export function stackSecretsTask(p: {
  session: Session
  stack: Later<PreparedStack>
  /** Fresh values, used only where the cluster holds none yet. */
  generated: GeneratedStackSecrets
  /** Lower bcrypt cost: tests inject it. */
  bcryptCost?: number
}): Task {
  return {
    id: 'stack-secrets',
    title: 'Create the generated Secrets once (Kokumi admin, Argo CD redis, repo-creds)',
    async probe() {
      const kube = await p.session.kube()
      const [mismatch] = await findSecretMismatches(kube)
      if (mismatch) return missing(mismatch.message)
      for (const ref of (await p.stack()).secretRefs) {
        if (!(await getObject(kube, {apiVersion: 'v1', kind: 'Secret', ...ref}, {metadataOnly: true})))
          return missing(`Secret ${ref.namespace}/${ref.name} is missing`)
      }
      return holds('every generated Secret exists (never reset)')
    },
    async run() {
      const kube = await p.session.kube()
      // ichor's copy lost while the component still runs with the old password: stop, never mint.
      const mismatches = await findSecretMismatches(kube)
      if (mismatches.length > 0) throw secretMismatchError(mismatches)
      const stack = await p.stack()
      const namespaces = Object.values(stack.components).map((c) => ({apiVersion: 'v1', kind: 'Namespace', metadata: {name: c.namespace}}))
      await serverSideApply(kube, namespaces)
      const hash = kokumiPasswordHash({adminPassword: p.generated.kokumiAdminPassword, signingKey: p.generated.kokumiSigningKey}, p.bcryptCost)
      const [kokumiAdmin, redis] = generatedSecretObjects(p.generated, hash)
      await createIfAbsent(kube, kokumiAdmin!)
      await createIfAbsent(kube, redis!)
      // The cluster's values win: a crash between two creates must not mix passwords.
      const held = await readGeneratedSecrets(kube)
      const generated = {...p.generated, ...Object.fromEntries(Object.entries(held).filter(([, v]) => v))} as GeneratedStackSecrets
      for (const s of stackSecretsWith(stack, generated, p.bcryptCost)) {
        if (s.metadata.namespace !== ICHOR_SYSTEM) await createIfAbsent(kube, s)
      }
    },
  }
}

/**
 * The last step of init: put the Kokumi admin password into the result of the first run that
 * gets this far, whichever run created it (a run that failed after creating it showed
 * nothing), and record in the IchorInstallation status that it was shown. Later runs show it
 * no more; `ichor stack password kokumi` prints it on demand.
 */
export function showKokumiPasswordOnceTask(p: {session: Session; outcome: StackSecretsOutcome}): Task {
  return {
    id: 'show-kokumi-password',
    title: 'Show the Kokumi admin password in the summary (once)',
    async probe() {
      const cr = await readInstallation(await p.session.kube())
      return cr?.status?.kokumiAdminPasswordShown ? holds('already shown once (ichor stack password kokumi prints it)') : missing('not shown yet')
    },
    async run() {
      const kube = await p.session.kube()
      const password = (await readGeneratedSecrets(kube)).kokumiAdminPassword
      if (!password)
        throw new IchorError(`Secret ${ICHOR_SYSTEM}/${STATE_SECRETS.kokumiAdmin} holds no password`, {
          hint: 'rerun ichor init: it creates the Secret when it is missing',
        })
      const cr = await readInstallation(kube)
      // Recorded before the summary prints: a crash in between loses only this showing, never the password.
      await writeInstallationStatus(kube, {cni: {}, stack: {}, ...cr?.status, kokumiAdminPasswordShown: true})
      p.outcome.kokumiAdminPassword = password
    },
  }
}

/** Would a server-side apply change anything? (a dry-run apply; nothing is persisted) */
async function applyWouldChange(kube: Kube, objects: KubeObject[], fieldManager: string): Promise<string | undefined> {
  for (const obj of objects) {
    const existing = await getObject(
      kube,
      {apiVersion: obj.apiVersion, kind: obj.kind, name: obj.metadata.name, namespace: obj.metadata.namespace},
      {metadataOnly: true},
    )
    if (!existing) return `${obj.kind} ${obj.metadata.namespace ? `${obj.metadata.namespace}/` : ''}${obj.metadata.name} is missing`
  }
  const results = await serverSideApply(kube, objects, {dryRun: true, fieldManager})
  const changed = results.filter((r) => r.result !== 'unchanged')
  return changed.length > 0 ? `${changed.length} object(s) differ, e.g. ${changed[0]!.kind} ${changed[0]!.name}` : undefined
}

const FIRST_APPLY: Record<StackComponent, {title: string; deployments: string[]}> = {
  kokumi: {title: 'Apply Kokumi (first install only) and wait for its registry', deployments: ['kokumi-registry']},
  argocd: {title: 'Apply Argo CD (first install only) and wait for server and repo-server', deployments: ['argocd-server', 'argocd-repo-server']},
}

/**
 * The first install of a component; once its Order exists Argo CD owns it and ichor never applies it again.
 *
 * Ownership hand-off: the objects are applied as Argo CD's own field manager, not ichor's.
 * Argo CD syncs with server-side apply as `argocd-controller` (forced), so a later bundle that
 * drops a field (an env entry, a ConfigMap key) removes it only if no other manager owns it;
 * under ichor's manager the field would stay forever while Argo CD shows Synced. Applying as
 * Argo CD from the start, rather than removing ichor's managedFields entry after the first
 * Synced, leaves no window to close and nothing to finish later: with Manual promotion the
 * first sync may come long after ichor's run, and a run killed between sync and hand-off
 * would otherwise leave ichor's ownership behind.
 */
export function firstApplyTask(p: {session: Session; component: StackComponent; stack: Later<PreparedStack>; timeoutMs: number}): Task {
  const {title, deployments} = FIRST_APPLY[p.component]
  const prepared = async () => (await p.stack()).components[p.component]
  return {
    id: `${p.component}-apply`,
    title,
    async probe() {
      const kube = await p.session.kube()
      const c = await prepared()
      if (await readOrder(kube, p.component)) return holds(`Order ${c.namespace}/${p.component} exists: Argo CD manages ${p.component}`)
      const diff = await applyWouldChange(kube, [...((await policiesServed(kube)) ? c.rendered.policies : []), ...c.rendered.objects], ARGOCD_FIELD_MANAGER)
      if (diff) return missing(diff)
      for (const name of deployments) {
        const d = await getObject<KubeObject & {status?: {readyReplicas?: number}}>(kube, {
          apiVersion: 'apps/v1',
          kind: 'Deployment',
          name,
          namespace: c.namespace,
        })
        if (!d?.status?.readyReplicas) return missing(`Deployment ${c.namespace}/${name} is not ready`)
      }
      return holds('applied and ready')
    },
    async run(progress) {
      const kube = await p.session.kube()
      const c = await prepared()
      // The policies go first, so the registry (anonymous, writable) never runs open to every
      // pod. Cilium registers their CRD before it gets ready, which init waits for; if it is
      // not served, the policies step at the end applies them.
      if (await policiesServed(kube)) await serverSideApply(kube, c.rendered.policies, {fieldManager: ARGOCD_FIELD_MANAGER})
      const results = await serverSideApply(kube, c.rendered.objects, {fieldManager: ARGOCD_FIELD_MANAGER, crdWait: {timeoutMs: p.timeoutMs}})
      progress(`${results.filter((r) => r.result !== 'unchanged').length} of ${results.length} objects created or changed`)
      for (const name of deployments) await waitForDeploymentRollout(kube, c.namespace, name, {timeoutMs: p.timeoutMs, onProgress: progress})
    },
  }
}

/** The path of a bundle inside the registry: the repository minus the in-cluster host. */
function repositoryPath(c: PreparedComponent): string {
  return c.bundle.repository.slice(c.bundle.repository.indexOf('/') + 1)
}

export function publishBundlesTask(p: {session: Session; stack: Later<PreparedStack>}): Task {
  return {
    id: 'publish-bundles',
    ...opensRegistry(p.session),
    title: 'Publish the kokumi and argocd bundles to the in-cluster registry',
    async probe() {
      const client = await p.session.registry()
      for (const c of await components(p.stack)) {
        const head = await client.headManifest(repositoryPath(c), c.bundle.tag)
        if (head?.digest !== c.bundle.artifact.manifestDigest) return missing(`${c.component} ${c.bundle.tag} is not in the registry`)
      }
      return holds('both bundles are in the registry at their digests')
    },
    async run(progress) {
      const client = await p.session.registry()
      for (const c of await components(p.stack)) {
        const annotations = {source: `oci://${c.bundle.repository}`, version: c.bundle.tag}
        const r = await publishBundle(client, {
          repository: repositoryPath(c),
          tag: c.bundle.tag,
          layer: c.bundle.layer,
          layerDigest: c.bundle.layerDigest,
          annotations,
        })
        progress(`${c.component} ${c.bundle.tag} ${r.pushed ? `pushed (${r.uploadedBlobs} blobs)` : 'already there'}`)
      }
    },
  }
}

export function ordersTask(p: {session: Session; stack: Later<PreparedStack>}): Task {
  // The installed Kokumi decides the Order's shape (read once per run, after Kokumi is applied).
  const api = once((): Promise<KokumiOrderApi> => p.session.kube().then(readKokumiOrderApi))
  const desired = async (): Promise<KubeObject[]> => {
    const shape = await api()
    return (await components(p.stack)).map((c) => shapeOrder(c.order, shape))
  }
  return {
    id: 'orders',
    title: 'Create or move the Kokumi Orders',
    async probe() {
      const kube = await p.session.kube()
      for (const order of await desired()) {
        const where = `${order.metadata.namespace}/${order.metadata.name}`
        const live = await readOrder(kube, order.metadata.name as StackComponent)
        if (!live) return missing(`no Order ${where}`)
        if (!isDeepStrictEqual(live.spec, order.spec)) return missing(`Order ${where} points elsewhere`)
      }
      return holds('both Orders point at the published bundles')
    },
    async run() {
      // ichor owns the Orders (label ichor.maesh.dev/managed): its fields win.
      await serverSideApply(await p.session.kube(), await desired(), {force: true})
    },
  }
}

/**
 * `--promotion Manual` makes each new bundle wait for a person (`ichor stack promote`). The
 * first install has nothing to protect: nothing is served yet, and without an approval init
 * would wait for Applications nobody creates. So init approves the first Preparation of each
 * component itself; once a component's Serving points at a Preparation, every later bundle
 * waits for `ichor stack promote <component>` as Manual promises.
 */
export function promoteFirstInstallTask(p: {session: Session; stack: Later<PreparedStack>; timeoutMs: number}): Task {
  const pending = async (): Promise<StackComponent[]> => {
    if ((await p.stack()).promotion === 'Automatic') return []
    const kube = await p.session.kube()
    const out: StackComponent[] = []
    for (const c of await components(p.stack)) {
      const s = await readFirstPromotion(kube, c.namespace, c.component)
      if (!s.served && !s.approved) out.push(c.component)
    }
    return out
  }
  return {
    id: 'promote-first-install',
    title: 'Promotion Manual: approve the first install of each component (nothing is served yet)',
    async probe() {
      if ((await p.stack()).promotion === 'Automatic') return holds('promotion Automatic: Kokumi serves each bundle')
      const left = await pending()
      if (left.length > 0) return missing(`first install of ${left.join(' and ')}: nothing served yet`)
      return holds('each component was promoted once; later bundles wait for `ichor stack promote <component>`')
    },
    async run(progress) {
      const kube = await p.session.kube()
      for (const component of await pending()) {
        const ns = COMPONENT_NAMESPACE[component]
        await waitFor(
          `Kokumi to render the first Preparation of Order ${ns}/${component}`,
          async () => {
            const s = await readFirstPromotion(kube, ns, component)
            return {
              done: Boolean(s.preparation),
              state: s.preparation ? `Preparation ${s.preparation} rendered` : `Order ${ns}/${component} has no Preparation yet`,
            }
          },
          {timeoutMs: p.timeoutMs, onProgress: progress},
        )
        progress(`${component}: approved ${await approveLatestPreparation(kube, ns, component)}`)
      }
    },
  }
}

const POLICY = {apiVersion: 'cilium.io/v2', kind: 'CiliumNetworkPolicy'} as const
const policiesServed = async (kube: Kube): Promise<boolean> => Boolean(await kube.resourceFor(POLICY.apiVersion, POLICY.kind))

export function policiesTask(p: {session: Session; stack: Later<PreparedStack>}): Task {
  const policies = async () => (await components(p.stack)).flatMap((c) => c.rendered.policies)
  return {
    id: 'policies',
    title: 'Make sure the CiliumNetworkPolicies are in place (applied with each component)',
    async probe() {
      const kube = await p.session.kube()
      if (!(await kube.resourceFor(POLICY.apiVersion, POLICY.kind))) return missing('CiliumNetworkPolicy is not served yet')
      const wanted = await policies()
      const present = new Set<string>()
      for (const ns of new Set(wanted.map((x) => x.metadata.namespace!))) {
        for (const x of await listObjects(kube, {...POLICY, namespace: ns})) present.add(`${ns}/${x.metadata.name}`)
      }
      const absent = wanted.find((x) => !present.has(`${x.metadata.namespace}/${x.metadata.name}`))
      if (absent) return missing(`${absent.kind} ${absent.metadata.namespace}/${absent.metadata.name} is missing`)
      // Present: from here on Argo CD keeps them in line with the bundles.
      return holds(`${wanted.length} policies in place`)
    },
    async run() {
      const kube = await p.session.kube()
      if (!(await kube.resourceFor(POLICY.apiVersion, POLICY.kind))) {
        throw new IchorError('the cluster does not serve cilium.io/v2 CiliumNetworkPolicy: Cilium has not registered its CRDs', {
          hint: 'check that the cilium-operator Deployment in kube-system is running, then rerun',
        })
      }
      // They are part of the bundles: Argo CD's manager, as firstApplyTask explains.
      await serverSideApply(kube, await policies(), {fieldManager: ARGOCD_FIELD_MANAGER})
    },
  }
}

/** The wait's title; with the promotion mode known (the offline plan), only what applies to it. */
export function waitApplicationsTitle(promotion?: PromotionMode): string {
  const base = 'Wait until both Applications are Synced and Healthy at the bundles ichor pushed'
  if (promotion === 'Automatic') return base
  if (promotion === 'Manual') return `${base}, or until each new bundle waits for approval (promotion Manual)`
  return `${base} (promotion Manual: until each new bundle waits for approval)`
}

export function waitApplicationsTask(p: {
  session: Session
  stack?: Later<PreparedStack>
  components?: readonly StackComponent[]
  timeoutMs: number
  /** Filled with what waits for approval, per component (promotion Manual), for the command's closing words. */
  awaiting?: Map<StackComponent, string>
}): Task {
  // Only the names are needed: a plan that renders nothing (stack sync) passes them directly.
  const names = async (): Promise<readonly StackComponent[]> => p.components ?? (await components(p.stack!)).map((c) => c.component)
  // The digest ichor pushed per component: delivery is checked against it, not only against
  // the Order (which names a tag). Rendered now, or as recorded in the IchorInstallation status.
  const pushed = async (kube: Kube): Promise<Partial<Record<StackComponent, {pushedDigest?: string; pushedTag?: string}>>> => {
    if (p.stack)
      return Object.fromEntries(
        (await components(p.stack)).map((c) => [c.component, {pushedDigest: c.bundle.artifact.manifestDigest, pushedTag: c.bundle.tag}]),
      )
    const recorded = (await readInstallation(kube))?.status?.stack ?? {}
    return Object.fromEntries(Object.entries(recorded).map(([c, s]) => [c, {pushedDigest: s?.digest, pushedTag: s?.publishedTag}]))
  }
  // Promotion Manual: a bundle Kokumi rendered and nothing serves yet moves only with
  // `ichor stack promote`; waiting for it would only wait out --timeout. Delivered, or rendered
  // and waiting for approval (said, with the command that approves it), ends the wait.
  const delivered = async (kube: Kube, c: StackComponent, digests: Awaited<ReturnType<typeof pushed>>) => {
    const waiting = await readAwaitingApproval(kube, c, digests[c]?.pushedTag)
    if (waiting) {
      p.awaiting?.set(c, waiting.message)
      return {done: true, state: waiting.message}
    }
    p.awaiting?.delete(c)
    return readDelivery(kube, c, digests[c])
  }
  return {
    id: 'wait-applications',
    title: waitApplicationsTitle(),
    mutating: false,
    async probe() {
      const kube = await p.session.kube()
      const digests = await pushed(kube)
      const said: string[] = []
      for (const c of await names()) {
        const s = await delivered(kube, c, digests)
        if (!s.done) return missing(s.state)
        if (p.awaiting?.has(c)) said.push(s.state)
      }
      return holds(
        said.length > 0 ? said.join('; ') : "argocd and kokumi are Synced and Healthy at their Orders' artifacts, rendered from the bundles ichor pushed",
      )
    },
    async run(progress) {
      const kube = await p.session.kube()
      const digests = await pushed(kube)
      for (const c of await names()) {
        await waitFor(`Application argocd/${c} Synced and Healthy`, () => delivered(kube, c, digests), {timeoutMs: p.timeoutMs, onProgress: progress})
      }
    },
  }
}
