// The IchorInstallation singleton: the desired state the CLI writes (spec) and what it
// last applied (status), as types with their read and write functions. Plus the Secrets
// in ichor-system that hold what must never be regenerated.
import type {GeneratedStackSecrets, KubeProxyMode, MachineConfigInputs, PromotionMode, StackComponent, TunnelProtocol} from './installation-types.js'
import {parse as parseYaml} from 'yaml'
import type {AssetId} from '../assets/lock.js'
import {readPackagedAsset} from '../assets/packaged.js'
import type {InstalledArtifact} from '../assets/pinning.js'
import {FIELD_MANAGER, ICHOR_SYSTEM, INSTALLATION, MANAGED_BY, STATE_SECRETS} from '../constants.js'
import {isDeepStrictEqual} from 'node:util'
import {setTimeout as sleep} from 'node:timers/promises'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import {serverSideApply} from '../kube/apply.js'
import {isConflict, KubeApiError, type Kube} from '../kube/client.js'
import {getObject, type KubeObject} from '../kube/objects.js'
import type {WaitOptions} from '../kube/wait.js'
import type {SecretWithData, StoredFormat, TalosBundle} from './sealed-bundle.js'
import type {StateKey} from './state-key.js'
import type {Values} from '../values/path.js'

export interface InstallationSpec {
  talos: {
    clusterName: string
    endpoint: string
    talosVersion: string
    kubernetesVersion: string
    controlPlanes: string[]
    workers: string[]
    /** The operator's install disk, installer image and config patches (absent: none, as before they existed). */
    machineConfig?: Partial<MachineConfigInputs>
  }
  cni: {kubeProxy: KubeProxyMode; tunnel: TunnelProtocol; cilium: {values: Values}}
  stack: {promotion: PromotionMode; argocd: {values: Values}; kokumi: {values: Values}}
}

/** What the Cilium release holds, as last recorded. Empty before the adoption. */
export interface CniStatus {
  chartVersion?: string
  appliedValuesHash?: string
  releaseRevision?: number
  /** The Cilium minor first installed ("1.18"): Cilium's upgradeCompatibility, kept across upgrades. */
  upgradeCompatibility?: string
}

export interface ComponentStatus {
  publishedTag: string
  digest: string
  orderReady: boolean
  applicationSync: string
  applicationHealth: string
}

/** The Kubernetes version `ichor kubernetes upgrade` last confirmed (absent before its first run). */
export interface KubernetesStatus {
  /** Verified: the control planes run it, Cilium and the stack survived it. */
  version?: string
  /** talosctl upgrade-k8s finished for this version (the verification may not have run yet). */
  upgradedTo?: string
}

/** What `ichor talos upgrade` and `ichor node remove` last saw of the nodes. */
export interface TalosUpgradeStatus {
  /** The Talos version each node was last seen running, by address. */
  nodes?: Record<string, string>
  /** The node an unfinished upgrade was upgrading (it may be rebooting: a rerun waits for it). */
  upgrading?: string
  /** The node an unfinished `ichor node remove` was resetting (it may be rebooting into maintenance mode). */
  removing?: string
  /** Nodes (their Kubernetes names) an unfinished upgrade cordoned, to make schedulable again. */
  uncordon?: string[]
}

export interface InstallationStatus {
  cni: CniStatus
  talos?: TalosUpgradeStatus
  kubernetes?: KubernetesStatus
  stack: Partial<Record<StackComponent, ComponentStatus>>
  /** The Kokumi admin password was put into a successful init's result (shown once, then only on demand). */
  kokumiAdminPasswordShown?: boolean
  /** The upstream artifacts the last init installed, and whether each was the pinned one. */
  artifacts?: Partial<Record<AssetId, InstalledArtifact>>
}

export interface Installation {
  metadata: KubeObject['metadata']
  spec: InstallationSpec
  status?: InstallationStatus
}

export function installationCrd(): KubeObject {
  return parseYaml(readPackagedAsset('crds/ichorinstallation.yaml').toString('utf8')) as KubeObject
}

function ichorSystemNamespace(): KubeObject {
  return {apiVersion: 'v1', kind: 'Namespace', metadata: {name: ICHOR_SYSTEM, labels: {...MANAGED_BY}}}
}

/** The singleton, or undefined when the cluster has none (or does not serve the kind yet). */
export async function readInstallation(kube: Kube): Promise<Installation | undefined> {
  return getObject<KubeObject & Installation>(kube, {apiVersion: INSTALLATION.apiVersion, kind: INSTALLATION.kind, name: INSTALLATION.name})
}

/**
 * The singleton, or the one error every command gives on a cluster ichor did not set up: it names
 * the kubeconfig context and server, and says to run `ichor init`. `read`: the read the caller
 * already started; `exitCode`: 1 unless the caller refuses with a usage error (2), as the plans of
 * `kubernetes upgrade` and `cni kube-proxy` always have.
 */
export async function requireInstallation(kube: Kube, options: {read?: Promise<Installation | undefined>; exitCode?: number} = {}): Promise<Installation> {
  const cr = await (options.read ?? readInstallation(kube))
  if (cr) return cr
  throw new IchorError(
    `kubeconfig context "${kube.context}" (${kube.server}) has no IchorInstallation "${INSTALLATION.name}": this cluster was not set up by ichor init`,
    {exitCode: options.exitCode, hint: 'run `ichor init` first, or point --kubeconfig/--context at the cluster ichor set up'},
  )
}

/** Installs the CRD (and ichor-system) when needed and writes the desired state. */
export async function writeInstallationSpec(
  kube: Kube,
  spec: InstallationSpec,
  options: {crdWait?: WaitOptions; crd?: boolean; readAt?: Installation} = {},
): Promise<Installation | undefined> {
  if (options.readAt) {
    // A day-2 write: the CRD may be an older ichor's (whose values layers were not atomic maps
    // yet, so emptying one was refused), so this ichor's schema is applied first; unchanged,
    // the apply changes nothing.
    const [crd] = await serverSideApply(kube, [installationCrd()], {crdWait: options.crdWait ?? {timeoutMs: 60_000}})
    const readAt = options.readAt
    if (crd?.result === 'unchanged') return guardedWrite(kube, readAt, '', {spec}, false)
    // The API server serves a changed CRD's schema once its informer has seen the change
    // (apiextensions-apiserver crdHandler): a refusal by the old schema is asked again.
    return withRetries(
      () => guardedWrite(kube, readAt, '', {spec}, false),
      (e) => e instanceof KubeApiError && e.code === 422,
      10,
      200,
    )
  }
  // crd: false where the CR (and so its CRD) is known to exist and only this write is wanted.
  if (options.crd !== false) await serverSideApply(kube, [ichorSystemNamespace(), installationCrd()], {crdWait: options.crdWait})
  await serverSideApply(kube, [{apiVersion: INSTALLATION.apiVersion, kind: INSTALLATION.kind, metadata: {name: INSTALLATION.name}, spec}])
  return undefined
}

/**
 * Replaces the status (ichor owns every status field; server-side apply on the status subresource).
 * With `readAt`, only over the version read (see guardedWrite); returns what was written.
 */
export async function writeInstallationStatus(
  kube: Kube,
  status: InstallationStatus,
  options: {readAt?: Installation} = {},
): Promise<Installation | undefined> {
  if (options.readAt) return guardedWrite(kube, options.readAt, '/status', {status}, true)
  const body = {apiVersion: INSTALLATION.apiVersion, kind: INSTALLATION.kind, metadata: {name: INSTALLATION.name}, status}
  await kube.request('PATCH', installationPath('/status'), {
    body,
    contentType: 'application/apply-patch+yaml',
    query: {fieldManager: FIELD_MANAGER, force: true},
  })
  return undefined
}

function installationPath(sub = ''): string {
  return `/apis/${INSTALLATION.apiVersion}/${INSTALLATION.plural}/${INSTALLATION.name}${sub}`
}

/**
 * A server-side apply carrying the resourceVersion the command read the object at: the API
 * server takes it as a precondition (a 409 when the object moved since; kubernetes v1.36.3
 * staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go, Store.Update), so a command resumed after a pause,
 * or racing one that broke its Lease, never writes over a change it did not see.
 */
async function guardedWrite(kube: Kube, readAt: Installation, sub: string, fields: Partial<Installation>, force: boolean): Promise<Installation> {
  const body = {
    apiVersion: INSTALLATION.apiVersion,
    kind: INSTALLATION.kind,
    metadata: {name: INSTALLATION.name, resourceVersion: readAt.metadata.resourceVersion},
    ...fields,
  }
  try {
    return await kube.request<Installation>('PATCH', installationPath(sub), {
      body,
      contentType: 'application/apply-patch+yaml',
      query: {fieldManager: FIELD_MANAGER, force: force ? true : undefined, fieldValidation: 'Strict'},
    })
  } catch (error) {
    // A 409 is also a field-ownership conflict of an unforced apply: only a moved version is a change.
    if (isConflict(error) && (await readInstallation(kube).catch(() => undefined))?.metadata.resourceVersion !== readAt.metadata.resourceVersion) {
      throw await installationChanged(kube, readAt, error)
    }
    throw error
  }
}

/**
 * A stack component's user layer replaced exactly, at the resourceVersion `cr` was read at.
 * Server-side apply alone cannot remove a key from this free-form subtree: a map it empties is
 * stored as null, which the schema refuses. The layer is replaced exactly first (a JSON patch
 * `add` replaces a member that exists), then applied, so ichor's apply owns it all. Both carry
 * the resourceVersion the layer was read at: a patch whose result names another version than
 * the stored one is refused with a 409 (kubernetes v1.36.3 staging/src/k8s.io/apiserver/pkg/
 * registry/generic/registry/store.go, Store.Update), so a change stored meanwhile is never dropped.
 */
export async function replaceStackValues(kube: Kube, cr: Installation, component: StackComponent, values: Values): Promise<void> {
  let patched: Installation
  try {
    patched = await kube.request<Installation>('PATCH', `/apis/${INSTALLATION.apiVersion}/${INSTALLATION.plural}/${INSTALLATION.name}`, {
      body: [
        {op: 'replace', path: '/metadata/resourceVersion', value: cr.metadata.resourceVersion},
        {op: 'add', path: `/spec/stack/${component}/values`, value: values},
      ],
      contentType: 'application/json-patch+json',
      query: {fieldManager: FIELD_MANAGER, fieldValidation: 'Strict'},
    })
  } catch (error) {
    if (isConflict(error)) throw await installationChanged(kube, cr, error)
    throw error
  }
  await writeInstallationSpec(kube, {...cr.spec, stack: {...cr.spec.stack, [component]: {values}}}, {readAt: patched})
}

/**
 * The IchorInstallation moved since `readAt` (another command, or someone with kubectl, wrote
 * it): exit 3 naming what changed, so the operator sees whose change would have been lost.
 */
export async function installationChanged(kube: Kube, readAt: Installation, cause?: unknown): Promise<IchorError> {
  const now = await readInstallation(kube).catch(() => undefined)
  const paths: string[] = []
  if (now) {
    changedPaths(readAt.spec, now.spec, 'spec', paths)
    changedPaths(readAt.status, now.status, 'status', paths)
  }
  const what = !now ? 'it was deleted' : paths.length ? `changed: ${paths.join(', ')}` : 'its metadata changed'
  return new IchorError(
    `the IchorInstallation ${INSTALLATION.name} changed since this command read it (resourceVersion ${readAt.metadata.resourceVersion} → ${now?.metadata.resourceVersion ?? 'none'}): ${what}; this command wrote nothing over it`,
    {
      exitCode: EXIT.lease,
      hint: 'another ichor command (or a kubectl edit) changed it meanwhile: check it (ichor cni status, ichor stack status), then run this command again',
      cause,
    },
  )
}

/** Up to six paths where `a` and `b` differ, as deep as the objects go. */
function changedPaths(a: unknown, b: unknown, at: string, out: string[]): void {
  if (out.length >= 6 || isDeepStrictEqual(a, b)) return
  const isMap = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x)
  if (isMap(a) && isMap(b)) {
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) changedPaths(a[k], b[k], `${at}.${k}`, out)
    return
  }
  out.push(at)
}

async function secretStrings(kube: Kube, name: string): Promise<Record<string, string> | undefined> {
  const s = await getObject<KubeObject & {data?: Record<string, string>}>(kube, {apiVersion: 'v1', kind: 'Secret', name, namespace: ICHOR_SYSTEM})
  return s && Object.fromEntries(Object.entries(s.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]))
}

/** The generated passwords as the cluster holds them, or undefined for those not created yet. */
export async function readGeneratedSecrets(kube: Kube): Promise<Partial<GeneratedStackSecrets>> {
  const kokumi = (await secretStrings(kube, STATE_SECRETS.kokumiAdmin)) ?? {}
  const redis = (await secretStrings(kube, STATE_SECRETS.argocdRedis)) ?? {}
  return {kokumiAdminPassword: kokumi.password, kokumiSigningKey: kokumi['signing-key'], argocdRedisPassword: redis.password}
}

/** The Secret holding the Talos bundle (sealed, or plaintext from an older ichor), or undefined. */
export async function readTalosBundleSecret(kube: Kube): Promise<SecretWithData | undefined> {
  return getObject<SecretWithData>(kube, {apiVersion: 'v1', kind: 'Secret', name: STATE_SECRETS.talos, namespace: ICHOR_SYSTEM})
}

/** The bundle the cluster keeps; `key` is asked for only when it is sealed. Undefined when there is none. */
export async function readTalosBundle(
  kube: Kube,
  key: () => Promise<StateKey>,
  warn: (warning: string) => void,
): Promise<{bundle: TalosBundle; format: StoredFormat} | undefined> {
  const secret = await readTalosBundleSecret(kube)
  if (!secret) return undefined
  // Loaded here: age (and its post-quantum crypto) is for the commands that open the bundle, not every reader of the CR.
  const {bundleOfSecret} = await import('./sealed-bundle.js')
  return bundleOfSecret(secret, key, warn)
}

/** `attempt`, asked again `tries - 1` times `pauseMs` apart while it fails with an error `retry` accepts. */
async function withRetries<T>(attempt: () => Promise<T>, retry: (error: unknown) => boolean, tries: number, pauseMs: number): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await attempt()
    } catch (error) {
      if (i >= tries || !retry(error)) throw error
      await sleep(pauseMs)
    }
  }
}
