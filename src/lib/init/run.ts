// The real `ichor init`: one ordered task list (DESIGN.md "The flow of ichor init"), each
// step a read-only probe beside its action, so a rerun after a crash, from another
// machine or in a script converges to the same end state without regenerating what must
// not change (Talos secrets, generated passwords) or bumping a Helm revision for nothing.
import {createHash} from 'node:crypto'
import {existsSync, readFileSync, writeFileSync} from 'node:fs'
import {isDeepStrictEqual} from 'node:util'
import {CILIUM_RELEASE} from '../cilium/defaults.js'
import {IchorError, ValidationError, type Issue} from '../errors/errors.js'
import {helmInstall, readReleaseRecord, valuesHash, type ReleaseRecord} from '../helm/release.js'
import {createIfAbsent, serverSideApply} from '../kube/apply.js'
import {connectKube, type Kube} from '../kube/client.js'
import {acquireLease, breakLease, type HeldLease} from '../kube/lease.js'
import {deleteObject, getObject, KindNotServedError, listObjects, type KubeObject} from '../kube/objects.js'
import {openRegistryEndpoint, type RegistryEndpoint} from '../kube/portforward.js'
import {waitFor, waitForApiServer, waitForDaemonSetReady, waitForDeploymentRollout} from '../kube/wait.js'
import {OciClient} from '../oci/client.js'
import {publishBundle} from '../oci/publish.js'
import {generatedSecretObjects, stackSecretsWith, type GeneratedStackSecrets, type PreparedComponent} from '../stack/prepare.js'
import type {K8sObject} from '../stack/objects.js'
import {
  ICHOR_SYSTEM, ichorSystemNamespace, installationCrd, installationObject, readGeneratedSecrets, TALOS_SECRETS_SECRET,
  type InstallationSpec,
} from '../state/installation.js'
import {ensureStateDir, type LocalState} from '../state/local.js'
import {handOverCiliumFromTalos, talosHandoverPending} from '../talos/handover.js'
import {applyConfig, bootstrap, genConfig, genSecrets, isReachable, kubeconfig as fetchKubeconfig, validateConfig, type Reachability} from '../talos/talosctl.js'
import {runTasks, type OutputMode, type RunResult, type Task} from '../tasks/engine.js'
import type {Values} from '../values/path.js'
import type {InitInputs} from './inputs.js'
import type {InitRender} from './render.js'

export interface InitRunOptions {
  inputs: InitInputs
  /** May still be rendering: the nodes are probed meanwhile (read-only). */
  render: InitRender | Promise<InitRender>
  state: LocalState
  userValues: {cilium: Values; argocd: Values; kokumi: Values}
  /** Fresh values, used only where the cluster holds none yet. */
  generated: GeneratedStackSecrets
  /** --registry-endpoint: reach the registry here instead of a port-forward. */
  registryEndpoint?: string
  /** --kubeconfig: continue a cluster from a machine without the local state. */
  kubeconfig?: string
  /** Per wait, in milliseconds. */
  timeoutMs: number
  output: OutputMode
  dryRun: boolean
  stream?: NodeJS.WritableStream
  /** Lower bcrypt cost, tests only. */
  bcryptCost?: number
  /** --break-lock: delete a Lease left by a command that is gone, then take it. */
  breakLock?: boolean
}

export interface InitRunResult extends RunResult {
  /** The Kokumi admin password, present only on the run that created it (shown once). */
  kokumiAdminPassword?: string
  kubeconfig: string
  bundles: {component: string; repository: string; tag: string; digest: string}[]
}

interface Ctx extends Omit<InitRunOptions, 'render'> {
  render: InitRender
  /** What the pre-check saw, for the first probe of apply-configs (a re-probe asks again). */
  reachability?: Reachability[]
  kube?: Kube
  /** The cilium release record, read once per run (it carries the whole chart) until the adoption changes it. */
  release?: Promise<ReleaseRecord | undefined>
  lease?: HeldLease
  registry?: RegistryEndpoint
  createdAdminPassword?: string
}

const WANT_RUN = (reason: string) => ({done: false as const, reason})
const DONE = (detail?: string) => ({done: true as const, detail})

export async function runInit(opts: InitRunOptions): Promise<InitRunResult> {
  ensureStateDir(opts.state)
  // Rendering is CPU and helm; probing the nodes waits on talosctl: both at once. Nothing
  // is changed anywhere until both have passed.
  const [render, reachable] = await Promise.allSettled([opts.render, checkNodesReachable(opts.inputs, opts.state)])
  if (render.status === 'rejected') throw render.reason
  if (reachable.status === 'rejected') throw reachable.reason
  const ctx: Ctx = {...opts, render: render.value, reachability: reachable.value}
  try {
    if (!opts.dryRun && (await apiAnswers(ctx))) ctx.lease = await takeLease(ctx)
    const result = await runTasks(initTasks(), ctx, {output: opts.output, dryRun: opts.dryRun, stream: opts.stream})
    return {
      ...result,
      kokumiAdminPassword: ctx.createdAdminPassword,
      kubeconfig: kubeconfigPath(ctx),
      bundles: Object.values(ctx.render.stack.components).map((c) => ({component: c.component, repository: c.bundle.repository, tag: c.bundle.tag, digest: c.bundle.artifact.manifestDigest})),
    }
  } finally {
    await ctx.registry?.close()
    await ctx.lease?.release()
  }
}

/** Every node must answer (maintenance or configured) before any is touched. */
async function checkNodesReachable(inputs: InitInputs, state: LocalState): Promise<Reachability[]> {
  const talosconfig = existsSync(state.talosconfig) ? state.talosconfig : undefined
  const nodes = [...inputs.controlPlanes.map((n) => ['--control-plane', n] as const), ...inputs.workers.map((n) => ['--worker', n] as const)]
  const answers = await Promise.all(nodes.map(async ([flag, node]) => ({flag, r: await isReachable(node, {talosconfig, timeoutMs: 10_000})})))
  const issues: Issue[] = answers
    .filter(({r}) => r.state === 'unreachable')
    .map(({flag, r}) => ({path: flag, message: `${r.node} does not answer as a Talos node (${r.message ?? 'no answer'}); check the address and that it booted Talos`}))
  if (issues.length > 0) throw new ValidationError('ichor init: nodes unreachable, nothing was changed', issues)
  return answers.map(({r}) => r)
}

async function takeLease(ctx: Ctx): Promise<HeldLease> {
  const kube = await kubeOf(ctx)
  if (ctx.breakLock) await breakLease(kube)
  return acquireLease(kube, {command: 'init'})
}

function kubeconfigPath(ctx: Ctx): string {
  return ctx.kubeconfig ?? ctx.state.kubeconfig
}

async function kubeOf(ctx: Ctx): Promise<Kube> {
  ctx.kube ??= await connectKube({kubeconfig: kubeconfigPath(ctx)})
  return ctx.kube
}

async function apiAnswers(ctx: Ctx): Promise<boolean> {
  if (!existsSync(kubeconfigPath(ctx))) return false
  try {
    await kubeOf(ctx)
    return true
  } catch {
    ctx.kube = undefined
    return false
  }
}

/** An object of a kind the cluster may not serve yet (its CRD not installed): absent. */
async function getIfServed<T extends KubeObject>(kube: Kube, ref: Parameters<typeof getObject>[1]): Promise<T | undefined> {
  try {
    return await getObject<T>(kube, ref)
  } catch (error) {
    if (error instanceof KindNotServedError) return undefined
    throw error
  }
}

/** Would a server-side apply change anything? (a dry-run apply; nothing is persisted) */
async function applyWouldChange(kube: Kube, objects: KubeObject[]): Promise<string | undefined> {
  for (const obj of objects) {
    const existing = await getObject(kube, {apiVersion: obj.apiVersion, kind: obj.kind, name: obj.metadata.name, namespace: obj.metadata.namespace}, {metadataOnly: true})
    if (!existing) return `${obj.kind} ${obj.metadata.namespace ? `${obj.metadata.namespace}/` : ''}${obj.metadata.name} is missing`
  }
  const results = await serverSideApply(kube, objects, {dryRun: true})
  const changed = results.filter((r) => r.result !== 'unchanged')
  return changed.length > 0 ? `${changed.length} object(s) differ, e.g. ${changed[0]!.kind} ${changed[0]!.name}` : undefined
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex')
}

function desiredSpec(ctx: Ctx): InstallationSpec {
  const i = ctx.inputs
  return {
    talos: {clusterName: i.clusterName, endpoint: i.endpoint, talosVersion: i.talosVersion.tag, kubernetesVersion: i.kubernetesVersion.version, controlPlanes: i.controlPlanes, workers: i.workers},
    cni: {kubeProxy: i.kubeProxy, tunnel: i.tunnel, cilium: {values: ctx.userValues.cilium}},
    stack: {promotion: (ctx.render.stack.components.argocd.order.spec as {promotion: {mode: 'Automatic' | 'Manual'}}).promotion.mode, argocd: {values: ctx.userValues.argocd}, kokumi: {values: ctx.userValues.kokumi}},
  }
}

function configsInputHash(ctx: Ctx): string {
  const i = ctx.inputs
  return sha256(JSON.stringify([i.clusterName, i.endpoint, i.talosVersion.tag, i.kubernetesVersion.version, ctx.render.talos.controlPlane, ctx.render.talos.worker]))
}

function talosSecretObject(ctx: Ctx): K8sObject {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {name: TALOS_SECRETS_SECRET, namespace: ICHOR_SYSTEM, labels: {'app.kubernetes.io/managed-by': 'ichor'}},
    type: 'Opaque',
    data: {
      'secrets.yaml': readFileSync(ctx.state.secrets).toString('base64'),
      talosconfig: readFileSync(ctx.state.talosconfig).toString('base64'),
    },
  }
}

async function orderOf(kube: Kube, c: PreparedComponent): Promise<KubeObject | undefined> {
  return getIfServed(kube, {apiVersion: c.order.apiVersion, kind: 'Order', name: c.order.metadata.name, namespace: c.order.metadata.namespace})
}

function firstApplyTask(component: 'kokumi' | 'argocd', waitFor: string[]): Task<Ctx> {
  return {
    id: `${component}-apply`,
    title: component === 'kokumi' ? 'Apply Kokumi (first install only) and wait for its registry' : 'Apply Argo CD (first install only) and wait for server and repo-server',
    async probe(ctx) {
      const kube = await kubeOf(ctx)
      const c = ctx.render.stack.components[component]
      // Once its Order exists, Argo CD owns the component: ichor never applies it directly again.
      if (await orderOf(kube, c)) return DONE(`Order ${c.namespace}/${component} exists: Argo CD manages ${component}`)
      const diff = await applyWouldChange(kube, c.rendered.objects)
      if (diff) return WANT_RUN(diff)
      for (const name of waitFor) {
        const d = await getObject<KubeObject & {status?: {readyReplicas?: number}}>(kube, {apiVersion: 'apps/v1', kind: 'Deployment', name, namespace: c.namespace})
        if (!d?.status?.readyReplicas) return WANT_RUN(`Deployment ${c.namespace}/${name} is not ready`)
      }
      return DONE('applied and ready')
    },
    async run(ctx, progress) {
      const kube = await kubeOf(ctx)
      const c = ctx.render.stack.components[component]
      const results = await serverSideApply(kube, c.rendered.objects, {crdWait: {timeoutMs: ctx.timeoutMs}})
      progress(`${results.filter((r) => r.result !== 'unchanged').length} of ${results.length} objects created or changed`)
      for (const name of waitFor) await waitForDeploymentRollout(kube, c.namespace, name, {timeoutMs: ctx.timeoutMs, onProgress: progress})
    },
  }
}

async function registryClient(ctx: Ctx): Promise<OciClient> {
  ctx.registry ??= await openRegistryEndpoint(await kubeOf(ctx), {override: ctx.registryEndpoint})
  return new OciClient(ctx.registry.endpoint)
}

/** The path of a bundle inside the registry: the repository minus the in-cluster host. */
function repositoryPath(c: PreparedComponent): string {
  return c.bundle.repository.slice(c.bundle.repository.indexOf('/') + 1)
}

async function applicationState(kube: Kube, name: string): Promise<{sync?: string; health?: string; revision?: string} | undefined> {
  const app = await getIfServed<KubeObject & {status?: {sync?: {status?: string; revision?: string}; health?: {status?: string}}}>(kube, {apiVersion: 'argoproj.io/v1alpha1', kind: 'Application', name, namespace: 'argocd'})
  return app ? {sync: app.status?.sync?.status, health: app.status?.health?.status, revision: app.status?.sync?.revision} : undefined
}

type OrderStatus = {conditions?: {type: string; status: string}[]; observedGeneration?: number; latestArtifactDigest?: string}

/**
 * A component is delivered when its Order has seen its current spec (Ready, observed
 * generation) and its Application is Synced and Healthy at the artifact that Order
 * produced: an Application still healthy at the previous revision does not count.
 */
async function deliveryState(kube: Kube, c: PreparedComponent): Promise<{done: boolean; state: string}> {
  const order = (await orderOf(kube, c)) as (KubeObject & {status?: OrderStatus}) | undefined
  if (!order) return {done: false, state: 'no Order yet'}
  const ready = order.status?.conditions?.some((x) => x.type === 'Ready' && x.status === 'True') ?? false
  const current = order.status?.observedGeneration === undefined || order.status.observedGeneration === order.metadata.generation
  if (!ready || !current) return {done: false, state: `Order ${c.namespace}/${c.component} not Ready for its current version yet`}
  const app = await applicationState(kube, c.component)
  if (!app) return {done: false, state: `Application argocd/${c.component} not created yet`}
  const wanted = order.status?.latestArtifactDigest
  if (wanted && app.revision !== wanted) return {done: false, state: `Application argocd/${c.component} at ${app.revision ?? 'no revision'}, Order serves ${wanted}`}
  const done = app.sync === 'Synced' && app.health === 'Healthy'
  return {done, state: `Application argocd/${c.component} ${app.sync ?? 'Unknown'}/${app.health ?? 'Unknown'}`}
}

/** Steps that read the cluster: until it answers (a dry run before bootstrap), they would all run. */
function onCluster(task: Task<Ctx>): Task<Ctx> {
  return {
    ...task,
    async probe(ctx) {
      if (!(await apiAnswers(ctx))) return WANT_RUN('the cluster does not answer yet')
      return task.probe(ctx)
    },
  }
}

/** The steps of a real run, in order: what the offline dry run prints as its plan. */
export function initPlan(): {id: string; title: string}[] {
  return [{id: 'validate', title: 'Validate inputs, artifacts and Cilium values; probe the nodes (read-only)'}, ...initTasks().map(({id, title}) => ({id, title}))]
}

function initTasks(): Task<Ctx>[] {
  const [local, cluster] = [nodeTasks(), clusterTasks()]
  return [...local, ...cluster.map(onCluster)]
}

/** Steps on the local state and the Talos nodes, up to a running API server. */
function nodeTasks(): Task<Ctx>[] {
  return [
    {
      id: 'talos-secrets',
      title: 'Generate or reuse the Talos secrets bundle',
      async probe(ctx) {
        return existsSync(ctx.state.secrets) ? DONE(`reusing ${ctx.state.secrets}`) : WANT_RUN('no Talos secrets bundle yet')
      },
      async run(ctx, progress) {
        // Another machine continuing this cluster: take the bundle the cluster keeps.
        if (ctx.kubeconfig && (await apiAnswers(ctx))) {
          const secret = await getObject<KubeObject & {data?: Record<string, string>}>(await kubeOf(ctx), {apiVersion: 'v1', kind: 'Secret', name: TALOS_SECRETS_SECRET, namespace: ICHOR_SYSTEM})
          if (secret?.data?.['secrets.yaml'] && secret.data.talosconfig) {
            writeFileSync(ctx.state.secrets, Buffer.from(secret.data['secrets.yaml'], 'base64'), {mode: 0o600})
            writeFileSync(ctx.state.talosconfig, Buffer.from(secret.data.talosconfig, 'base64'), {mode: 0o600})
            progress(`restored from ${ICHOR_SYSTEM}/${TALOS_SECRETS_SECRET}`)
            return
          }
        }
        await genSecrets(ctx.state.secrets)
      },
    },
    {
      id: 'talos-configs',
      title: 'Render machine configs with the Cilium inline manifest',
      mutating: false,
      async probe(ctx) {
        const fresh = existsSync(ctx.state.configsHash) && readFileSync(ctx.state.configsHash, 'utf8').trim() === configsInputHash(ctx)
        return fresh && existsSync(ctx.state.controlPlaneConfig) && existsSync(ctx.state.talosconfig) ? DONE('machine configs are current') : WANT_RUN('machine configs are missing or stale')
      },
      async run(ctx) {
        const i = ctx.inputs
        // talosctl gen config also writes a talosconfig; a restored one is the same CA.
        await genConfig({
          clusterName: i.clusterName, endpoint: i.endpoint, secretsPath: ctx.state.secrets, talosVersion: i.talosVersion.tag,
          kubernetesVersion: i.kubernetesVersion.version, controlPlanePatch: ctx.render.talos.controlPlane, workerPatch: ctx.render.talos.worker, outDir: ctx.state.dir,
        })
        await validateConfig(ctx.state.controlPlaneConfig)
        if (i.workers.length > 0) await validateConfig(ctx.state.workerConfig)
        writeFileSync(ctx.state.configsHash, `${configsInputHash(ctx)}\n`)
      },
    },
    {
      id: 'apply-configs',
      title: 'Apply machine configs to nodes in maintenance mode',
      async probe(ctx) {
        const states = ctx.reachability ?? (await Promise.all([...ctx.inputs.controlPlanes, ...ctx.inputs.workers].map((n) => isReachable(n, {talosconfig: ctx.state.talosconfig}))))
        ctx.reachability = undefined
        const waiting = states.filter((s) => s.state !== 'configured').map((s) => s.node)
        return waiting.length === 0 ? DONE('every node is configured') : WANT_RUN(`in maintenance mode: ${waiting.join(', ')}`)
      },
      async run(ctx, progress) {
        for (const [role, nodes, file] of [['control plane', ctx.inputs.controlPlanes, ctx.state.controlPlaneConfig], ['worker', ctx.inputs.workers, ctx.state.workerConfig]] as const) {
          for (const node of nodes) {
            const {state} = await isReachable(node, {talosconfig: ctx.state.talosconfig})
            if (state !== 'maintenance') continue
            await applyConfig({node, file, insecure: true})
            progress(`${role} ${node} configured`)
          }
        }
      },
    },
    {
      id: 'bootstrap-etcd',
      title: 'Bootstrap etcd on the first control plane',
      async probe(ctx) {
        return (await apiAnswers(ctx)) ? DONE('the API server answers') : WANT_RUN('the cluster is not bootstrapped yet')
      },
      async run(ctx, progress) {
        const {alreadyBootstrapped} = await bootstrap({node: ctx.inputs.controlPlanes[0]!, talosconfig: ctx.state.talosconfig})
        if (alreadyBootstrapped) progress('etcd was already bootstrapped')
        await fetchKubeconfig({node: ctx.inputs.controlPlanes[0]!, talosconfig: ctx.state.talosconfig, outPath: ctx.state.kubeconfig})
        ctx.kube = await connectKube({kubeconfig: ctx.state.kubeconfig, probe: false})
        await waitForApiServer(ctx.kube, {timeoutMs: ctx.timeoutMs, onProgress: progress})
        ctx.kube = undefined
      },
    },
  ]
}

/** Steps through the API server, helm and the registry. */
function clusterTasks(): Task<Ctx>[] {
  return [
    {
      id: 'lease',
      title: `Take the ${ICHOR_SYSTEM} Lease`,
      mutating: false,
      async probe(ctx) {
        return ctx.lease && !ctx.lease.lost ? DONE(`held by ${ctx.lease.holder}`) : WANT_RUN('not held yet')
      },
      async run(ctx) {
        ctx.lease = await takeLease(ctx)
      },
    },
    {
      id: 'state-in-cluster',
      title: 'Install the IchorInstallation CRD and store the desired state and Talos secrets',
      async probe(ctx) {
        const kube = await kubeOf(ctx)
        const cr = await getIfServed<KubeObject & {spec?: unknown}>(kube, {apiVersion: 'ichor.maesh.dev/v1alpha1', kind: 'IchorInstallation', name: 'ichor'})
        if (!cr) return WANT_RUN('no IchorInstallation yet')
        if (!isDeepStrictEqual(cr.spec, desiredSpec(ctx))) return WANT_RUN('the desired state differs from the stored one')
        const secret = await getObject(kube, {apiVersion: 'v1', kind: 'Secret', name: TALOS_SECRETS_SECRET, namespace: ICHOR_SYSTEM})
        return secret ? DONE('stored') : WANT_RUN('the Talos secrets are not in the cluster yet')
      },
      async run(ctx) {
        const kube = await kubeOf(ctx)
        await serverSideApply(kube, [ichorSystemNamespace(), installationCrd()], {crdWait: {timeoutMs: ctx.timeoutMs}})
        await serverSideApply(kube, [installationObject(desiredSpec(ctx))])
        await createIfAbsent(kube, talosSecretObject(ctx))
      },
    },
    {
      id: 'wait-cilium',
      title: 'Wait for the Cilium DaemonSet',
      mutating: false,
      async probe(ctx) {
        const ds = await getObject<KubeObject & {status?: {numberReady?: number; desiredNumberScheduled?: number}}>(await kubeOf(ctx), {apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'cilium', namespace: CILIUM_RELEASE.namespace})
        const s = ds?.status
        return s && s.desiredNumberScheduled && s.numberReady === s.desiredNumberScheduled ? DONE(`${s.numberReady}/${s.desiredNumberScheduled} ready`) : WANT_RUN('the cilium DaemonSet is not ready')
      },
      async run(ctx, progress) {
        await waitForDaemonSetReady(await kubeOf(ctx), CILIUM_RELEASE.namespace, 'cilium', {timeoutMs: ctx.timeoutMs, onProgress: progress})
      },
    },
    {
      id: 'adopt-cilium',
      title: 'Adopt Cilium into Helm release kube-system/cilium (--take-ownership)',
      hint: 'the bootstrapped Cilium keeps running; rerun the same command to retry the adoption',
      async probe(ctx) {
        const record = await releaseOf(ctx)
        if (!record) return WANT_RUN('no Helm release cilium yet')
        if (record.status !== 'deployed') return WANT_RUN(`release cilium is ${record.status} (revision ${record.revision})`)
        const same = valuesHash(record.config) === valuesHash(ctx.render.cilium.effective)
        return DONE(`release cilium revision ${record.revision} (chart ${record.chartVersion})${same ? '' : '; its values differ from these: use `ichor cni values set` to change them'}`)
      },
      async run(ctx, progress) {
        const kube = await kubeOf(ctx)
        ctx.release = undefined
        if (await clearInterruptedAdoption(ctx, kube, progress)) return
        // No rollback on an adoption: rolling back an install would uninstall a running CNI.
        await helmInstall({
          release: CILIUM_RELEASE.name, namespace: CILIUM_RELEASE.namespace, chartPath: ctx.render.assets.cilium.path,
          values: ctx.render.cilium.effective, takeOwnership: true, wait: true, timeoutSeconds: Math.ceil(ctx.timeoutMs / 1000), kubeconfig: kubeconfigPath(ctx),
        })
      },
    },
    {
      id: 'talos-handover',
      title: 'Take Cilium out of Talos: inventory and inline-manifest entry',
      async probe(ctx) {
        const pending = await talosHandoverPending(await kubeOf(ctx), {talosconfig: ctx.state.talosconfig, controlPlanes: ctx.inputs.controlPlanes})
        if (pending.inlineManifestOn.length === 0 && !pending.inInventory) return DONE('Helm alone owns Cilium')
        return WANT_RUN([pending.inlineManifestOn.length ? `inline manifest on ${pending.inlineManifestOn.join(', ')}` : '', pending.inInventory ? "Cilium is in Talos's inventory" : ''].filter(Boolean).join('; '))
      },
      async run(ctx, progress) {
        const r = await handOverCiliumFromTalos(await kubeOf(ctx), {talosconfig: ctx.state.talosconfig, controlPlanes: ctx.inputs.controlPlanes})
        progress(`inline entry removed from ${r.patchedNodes.length} control plane(s)`)
      },
    },
    {
      id: 'stack-secrets',
      title: 'Create the generated Secrets once (Kokumi admin, Argo CD redis, repo-creds)',
      async probe(ctx) {
        const kube = await kubeOf(ctx)
        for (const id of ctx.render.stack.secretNames) {
          const [namespace, name] = id.split('/') as [string, string]
          if (!(await getObject(kube, {apiVersion: 'v1', kind: 'Secret', name, namespace}, {metadataOnly: true}))) return WANT_RUN(`Secret ${id} is missing`)
        }
        return DONE('every generated Secret exists (never reset)')
      },
      async run(ctx) {
        const kube = await kubeOf(ctx)
        const namespaces = ['kokumi', 'argocd'].map((name) => ({apiVersion: 'v1', kind: 'Namespace', metadata: {name}}))
        await serverSideApply(kube, namespaces)
        const [kokumiAdmin, redis] = generatedSecretObjects(ctx.generated)
        if ((await createIfAbsent(kube, kokumiAdmin!)) === 'created') ctx.createdAdminPassword = ctx.generated.kokumiAdminPassword
        await createIfAbsent(kube, redis!)
        // The cluster's values win: a crash between two creates must not mix passwords.
        const held = await readGeneratedSecrets(kube)
        const generated = {...ctx.generated, ...Object.fromEntries(Object.entries(held).filter(([, v]) => v))} as GeneratedStackSecrets
        for (const s of stackSecretsWith(ctx.render.stack, generated, ctx.bcryptCost)) {
          if (s.metadata.namespace !== ICHOR_SYSTEM) await createIfAbsent(kube, s)
        }
      },
    },
    firstApplyTask('kokumi', ['kokumi-registry']),
    firstApplyTask('argocd', ['argocd-server', 'argocd-repo-server']),
    {
      id: 'publish-bundles',
      title: 'Publish the kokumi and argocd bundles to the in-cluster registry',
      async probe(ctx) {
        const client = await registryClient(ctx)
        for (const c of Object.values(ctx.render.stack.components)) {
          const head = await client.headManifest(repositoryPath(c), c.bundle.tag)
          if (head?.digest !== c.bundle.artifact.manifestDigest) return WANT_RUN(`${c.component} ${c.bundle.tag} is not in the registry`)
        }
        return DONE('both bundles are in the registry at their digests')
      },
      async run(ctx, progress) {
        const client = await registryClient(ctx)
        for (const c of Object.values(ctx.render.stack.components)) {
          const r = await publishBundle(client, {repository: repositoryPath(c), tag: c.bundle.tag, layer: c.bundle.layer, layerDigest: c.bundle.layerDigest, annotations: {source: `oci://${c.bundle.repository}`, version: c.bundle.tag}})
          progress(`${c.component} ${c.bundle.tag} ${r.pushed ? `pushed (${r.uploadedBlobs} blobs)` : 'already there'}`)
        }
      },
    },
    {
      id: 'orders',
      title: 'Create or move the Kokumi Orders',
      async probe(ctx) {
        const kube = await kubeOf(ctx)
        for (const c of Object.values(ctx.render.stack.components)) {
          const order = (await orderOf(kube, c)) as (KubeObject & {spec?: unknown}) | undefined
          if (!order) return WANT_RUN(`no Order ${c.namespace}/${c.component}`)
          if (!isDeepStrictEqual(order.spec, c.order.spec)) return WANT_RUN(`Order ${c.namespace}/${c.component} points elsewhere`)
        }
        return DONE('both Orders point at the published bundles')
      },
      async run(ctx) {
        // ichor owns the Orders (label ichor.maesh.dev/managed): its fields win.
        const orders = Object.values(ctx.render.stack.components).map((c) => c.order)
        await serverSideApply(await kubeOf(ctx), orders, {force: true})
      },
    },
    {
      id: 'policies',
      title: 'Apply the CiliumNetworkPolicies last',
      async probe(ctx) {
        const policies = Object.values(ctx.render.stack.components).flatMap((c) => c.rendered.policies)
        const kube = await kubeOf(ctx)
        if (!(await kube.resourceFor('cilium.io/v2', 'CiliumNetworkPolicy'))) return WANT_RUN('CiliumNetworkPolicy is not served yet')
        const present = new Set<string>()
        for (const ns of new Set(policies.map((p) => p.metadata.namespace!))) {
          for (const p of await listObjects(kube, {apiVersion: 'cilium.io/v2', kind: 'CiliumNetworkPolicy', namespace: ns})) present.add(`${ns}/${p.metadata.name}`)
        }
        const missing = policies.find((p) => !present.has(`${p.metadata.namespace}/${p.metadata.name}`))
        if (missing) return WANT_RUN(`${missing.kind} ${missing.metadata.namespace}/${missing.metadata.name} is missing`)
        // Present: from here on Argo CD keeps them in line with the bundles.
        return DONE(`${policies.length} policies in place`)
      },
      async run(ctx) {
        const policies = Object.values(ctx.render.stack.components).flatMap((c) => c.rendered.policies)
        const kube = await kubeOf(ctx)
        if (!(await kube.resourceFor('cilium.io/v2', 'CiliumNetworkPolicy'))) {
          throw new IchorError('the cluster does not serve cilium.io/v2 CiliumNetworkPolicy: Cilium has not registered its CRDs', {hint: 'check that the cilium-operator Deployment in kube-system is running, then rerun'})
        }
        await serverSideApply(kube, policies)
      },
    },
    {
      id: 'wait-applications',
      title: 'Wait until both Applications are Synced and Healthy',
      mutating: false,
      async probe(ctx) {
        const kube = await kubeOf(ctx)
        for (const c of Object.values(ctx.render.stack.components)) {
          const s = await deliveryState(kube, c)
          if (!s.done) return WANT_RUN(s.state)
        }
        return DONE('argocd and kokumi are Synced and Healthy at their Orders\' artifacts')
      },
      async run(ctx, progress) {
        const kube = await kubeOf(ctx)
        for (const c of Object.values(ctx.render.stack.components)) {
          await waitFor(`Application argocd/${c.component} Synced and Healthy`, () => deliveryState(kube, c), {timeoutMs: ctx.timeoutMs, onProgress: progress})
        }
      },
    },
    {
      id: 'record-status',
      title: 'Record what was applied in the IchorInstallation status',
      async probe(ctx) {
        const cr = await getIfServed<KubeObject & {status?: unknown}>(await kubeOf(ctx), {apiVersion: 'ichor.maesh.dev/v1alpha1', kind: 'IchorInstallation', name: 'ichor'})
        const want = await desiredStatus(ctx)
        return isDeepStrictEqual(cr?.status, want) ? DONE('status is current') : WANT_RUN('status is out of date')
      },
      async run(ctx) {
        const kube = await kubeOf(ctx)
        const body = {apiVersion: 'ichor.maesh.dev/v1alpha1', kind: 'IchorInstallation', metadata: {name: 'ichor'}, status: await desiredStatus(ctx)}
        await kube.request('PATCH', '/apis/ichor.maesh.dev/v1alpha1/ichorinstallations/ichor/status', {
          body, contentType: 'application/apply-patch+yaml', query: {fieldManager: 'ichor-bootstrap', force: true},
        })
      },
    },
  ]
}

/**
 * A run killed during `helm install` leaves a record in pending-install (its helm process
 * may still be finishing: give it the time to). A record still pending after that, or a
 * failed one, describes an adoption that never completed; the objects it was adopting
 * are the bootstrap's and keep running, so the record alone is removed and the
 * adoption done again.
 */
async function clearInterruptedAdoption(ctx: Ctx, kube: Kube, progress: (m: string) => void): Promise<boolean> {
  let record = await readReleaseRecord(kube, CILIUM_RELEASE.name, CILIUM_RELEASE.namespace)
  if (!record) return false
  if (record.status === 'deployed') return true
  if (record.status.startsWith('pending')) {
    progress(`release cilium is ${record.status}: waiting for the interrupted helm to finish`)
    const deadline = Date.now() + Math.min(ctx.timeoutMs, 60_000)
    while (Date.now() < deadline && record?.status.startsWith('pending')) {
      await new Promise((r) => setTimeout(r, 1000))
      record = await readReleaseRecord(kube, CILIUM_RELEASE.name, CILIUM_RELEASE.namespace)
    }
    if (record?.status === 'deployed') return true
  }
  if (!record) return false
  const secrets = await listObjects(kube, {apiVersion: 'v1', kind: 'Secret', namespace: CILIUM_RELEASE.namespace}, {labelSelector: `owner=helm,name=${CILIUM_RELEASE.name}`})
  for (const s of secrets) {
    if (s.metadata.labels?.status !== 'deployed') await deleteObject(kube, {apiVersion: 'v1', kind: 'Secret', namespace: CILIUM_RELEASE.namespace, name: s.metadata.name})
  }
  progress(`removed the record of an adoption that did not finish (${record.status})`)
  return false
}

async function releaseOf(ctx: Ctx): Promise<ReleaseRecord | undefined> {
  const kube = await kubeOf(ctx)
  ctx.release ??= readReleaseRecord(kube, CILIUM_RELEASE.name, CILIUM_RELEASE.namespace)
  return ctx.release
}

async function desiredStatus(ctx: Ctx): Promise<Record<string, unknown>> {
  const kube = await kubeOf(ctx)
  const record = await releaseOf(ctx)
  const stack: Record<string, unknown> = {}
  for (const c of Object.values(ctx.render.stack.components)) {
    const app = await applicationState(kube, c.component)
    const order = (await orderOf(kube, c)) as (KubeObject & {status?: {conditions?: {type: string; status: string}[]}}) | undefined
    stack[c.component] = {
      publishedTag: c.bundle.tag,
      digest: c.bundle.artifact.manifestDigest,
      orderReady: order?.status?.conditions?.some((x) => x.type === 'Ready' && x.status === 'True') ?? false,
      applicationSync: app?.sync ?? 'Unknown',
      applicationHealth: app?.health ?? 'Unknown',
    }
  }
  return {
    cni: record ? {chartVersion: record.chartVersion, appliedValuesHash: valuesHash(record.config), releaseRevision: record.revision} : {},
    stack,
  }
}
