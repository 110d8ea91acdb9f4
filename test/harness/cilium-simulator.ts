// Cilium operator simulator. The Cilium chart ships no CRDs: in a real cluster the
// cilium-operator registers them every time it starts, the CRDs of ITS OWN version. No operator
// pod runs on the harness, so this does what a starting operator does, with Cilium's real CRDs
// (full OpenAPI schema) from the Cilium Go module of that version (test/cilium-crds/v<version>,
// fetched by scripts/fetch-cilium-crds.sh). Behaviour and where it comes from, in
// github.com/cilium/cilium at v1.18.0, v1.19.6 and v1.20.0 (the same in all three unless said):
//
// - When: the operator starts when kube-system/cilium-operator appears and again on every
//   rollout of it, i.e. whenever its pod template changes (a `cni upgrade` changes the image).
//   Registering runs in the operator's start hook (pkg/k8s/apis/cell.go, createCRDs), skipped
//   when `skip-crd-creation` is true in cilium-config (operator.skipCRDCreation).
// - Which version: the tag of the Deployment's cilium-operator image
//   (`quay.io/cilium/operator-generic:vX.Y.Z@sha256:…` as the chart renders it), else a
//   `helm.sh/chart: cilium-X.Y.Z` label. The CRDs come from the module pinned for that
//   version, or for the nearest older pinned one when the Go module proxy does not serve it
//   (1.18.12: v1.18.0's CRDs; logged, and noted in `registrations`). An older version than
//   every pin, or none found, fails loudly.
// - Which CRDs: CreateCustomResourceDefinitions (pkg/k8s/apis/cilium.io/client/register.go)
//   registers synced.AllCiliumCRDResourceNames() (pkg/k8s/synced/crd.go): for the chart's
//   defaults CiliumNetworkPolicy, CiliumClusterwideNetworkPolicy, CiliumCIDRGroup,
//   CiliumIdentity, CiliumEndpoint, CiliumNode, CiliumPodIPPool, CiliumLoadBalancerIPPool,
//   CiliumL2AnnouncementPolicy and CiliumNodeConfig; the others when cilium-config (which the
//   operator reads from --config-dir at start, pkg/option/config.go Populate) enables them.
//   `ciliumCrdNamesFor` below lists the conditions per minor. Not simulated: the MCS-API CRDs
//   pkg/clustermesh/mcsapi/cell.go adds from 1.19 with clustermesh-enable-mcs-api.
// - How: each CRD is the go:embed-ed crds/v2 or crds/v2alpha1 YAML (GetPregeneratedCRD) wrapped
//   by constructV1CRD: its name, the label io.cilium.k8s.crd.schema.version set to
//   CustomResourceDefinitionSchemaVersion (pkg/k8s/apis/cilium.io/register.go: 1.31.11 in
//   v1.18.0, 1.32.7 in v1.19.6, 1.33.11 in v1.20.0), group cilium.io, the names without
//   listKind, scope, versions and conversion. Then CreateUpdateCRD
//   (pkg/k8s/apis/crdhelpers/register.go): create when missing (already exists: done); else
//   update when the live CRD's first version has no schema, has no schema-version label, or a
//   label that does not parse or is older than the operator's; the update replaces the labels
//   and the whole spec (preserveUnknownFields false), retrying on a conflict. A newer label is
//   left alone: an operator never downgrades a CRD (a rollback keeps the newer CRDs). It does
//   not delete CRDs a newer version dropped (v1.18's v2alpha1 CiliumBGPPeeringPolicy). Then it
//   waits until each CRD is Established.
//
// So the real apiserver validates every policy ichor applies against the schema of the Cilium
// version that is running, and a `cni upgrade` changes the CRDs as on a real cluster.
import {AppsV1Api, CoreV1Api, KubeConfig, type V1Deployment} from '@kubernetes/client-node'
import {execFileSync} from 'node:child_process'
import {existsSync, readdirSync, readFileSync} from 'node:fs'
import {request} from 'node:https'
import {join} from 'node:path'
import {parse as parseYaml} from 'yaml'
import {PROJECT_ROOT} from '../support/upstream.js'
import {loadKubeConfig, waitForCrdEstablished} from './kube.js'
import {wakeOnWatch} from './wake-on-watch.js'

/** A CRD as plain JSON, with the API's own key names. */
export interface RawCrd {
  apiVersion: 'apiextensions.k8s.io/v1'
  kind: 'CustomResourceDefinition'
  metadata: {name: string; labels?: Record<string, string>; resourceVersion?: string; [k: string]: unknown}
  spec: Record<string, unknown> & {versions: {schema?: unknown}[]}
  status?: {conditions?: {type: string; status: string; reason?: string}[]}
}

const PINS_DIR = join(PROJECT_ROOT, 'test', 'cilium-crds')
const CLIENT_PACKAGE = join('pkg', 'k8s', 'apis', 'cilium.io')
const SCHEMA_VERSION_LABEL = 'io.cilium.k8s.crd.schema.version'
/** The version of the CRDs `ciliumPolicyCrds()` and `installCiliumCrdsSimulated()` give by default: the pinned chart's. */
export const DEFAULT_CILIUM_VERSION = '1.18.0'

type Semver = [number, number, number]
function semver(v: string): Semver | undefined {
  const m = /^v?(\d+)\.(\d+)\.(\d+)(?:[-+].*)?$/.exec(v.trim())
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : undefined
}
function compare(a: Semver, b: Semver): number {
  return a[0] - b[0] || a[1] - b[1] || a[2] - b[2]
}

/** The Cilium versions whose Go module is pinned (test/cilium-crds/v<version>), oldest first. */
export function pinnedCiliumVersions(): string[] {
  return readdirSync(PINS_DIR)
    .filter((d) => /^v\d+\.\d+\.\d+$/.test(d) && existsSync(join(PINS_DIR, d, 'go.mod')))
    .map((d) => d.slice(1))
    .sort((a, b) => compare(semver(a)!, semver(b)!))
}

/**
 * Which pinned module serves an operator of `version`: the same version, else the nearest older
 * pinned one (a version the Go module proxy does not serve, such as 1.18.12), with a note saying so.
 */
export function ciliumModuleFor(version: string): {module: string; note?: string} {
  const want = semver(version)
  if (!want) throw new Error(`cilium operator simulator: "${version}" is not a Cilium version`)
  const pinned = pinnedCiliumVersions()
  const older = pinned.filter((p) => compare(semver(p)!, want) <= 0)
  const module = older.at(-1)
  if (!module)
    throw new Error(`cilium operator simulator: no Cilium module pinned at or below ${version} (pinned: ${pinned.join(', ')}); add test/cilium-crds/v<version>`)
  if (module === version.replace(/^v/, '')) return {module}
  return {
    module,
    note: `Cilium ${version}'s Go module is not pinned (not served by the module proxy): registering the CRDs of ${module}, the nearest older pinned version`,
  }
}

const moduleDirs = new Map<string, string>()

/**
 * The folder of the Cilium module pinned for `version` (exactly), from scripts/fetch-cilium-crds.sh
 * (downloaded on first use; a failure throws, so a test that needs it fails loudly).
 * ICHOR_CILIUM_MODULES names another folder holding `cilium@v<version>` folders (the module cache's layout).
 */
export function ciliumModuleDir(version: string = DEFAULT_CILIUM_VERSION): string {
  let dir = moduleDirs.get(version)
  if (dir) return dir
  const other = process.env.ICHOR_CILIUM_MODULES
  dir = other
    ? join(other, `cilium@v${version}`)
    : execFileSync('bash', [join(PROJECT_ROOT, 'scripts', 'fetch-cilium-crds.sh'), version], {encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit']}).trim()
  moduleDirs.set(version, dir)
  return dir
}

/** cilium-config's data; a missing key is the operator's default. */
export type CiliumConfig = Readonly<Record<string, string>>

/** viper's GetBool on a config-dir file (cast.ToBool: strconv.ParseBool; anything else is false). */
function bool(config: CiliumConfig, key: string, dflt: boolean): boolean {
  const v = config[key]
  if (v === undefined) return dflt
  return ['1', 't', 'T', 'TRUE', 'true', 'True'].includes(v.trim())
}

/**
 * The CRD names (`<plural>.cilium.io`) an operator of module `module` registers with `config`:
 * synced.AllCiliumCRDResourceNames() in pkg/k8s/synced/crd.go of that tag (agentCRDResourceNames,
 * GatewayAPIResourceNames, CiliumNodeConfig), the flags as pkg/option/config.go reads them.
 */
export function ciliumCrdNamesFor(module: string, config: CiliumConfig = {}): string[] {
  const [, minor] = semver(module)!
  const names: string[] = ['ciliumidentities', 'ciliumpodippools']
  const cnp = bool(config, 'enable-cilium-network-policy', true)
  const ccnp = bool(config, 'enable-cilium-clusterwide-network-policy', true)
  // Populate turns disable-endpoint-crd back off without a kvstore while any policy
  // enforcement is on (NetworkPolicyEnabled, pkg/option/features.go; the chart sets no kvstore).
  const policyEnabled =
    (config['enable-policy'] ?? 'default') !== 'never' ||
    bool(config, 'enable-k8s-networkpolicy', true) ||
    cnp ||
    ccnp ||
    (config['identity-allocation-mode'] ?? 'crd') !== 'crd'
  const endpointCrd = !bool(config, 'disable-endpoint-crd', false) || (!config.kvstore && policyEnabled)
  if (endpointCrd) names.push('ciliumendpoints')
  // Up to 1.19 CiliumEndpointSlice needs the CiliumEndpoint CRD; 1.20 checks it alone.
  if (bool(config, 'enable-cilium-endpoint-slice', false) && (minor >= 20 || endpointCrd)) names.push('ciliumendpointslices')
  // 1.18: CiliumNode always. 1.19+: enable-ciliumnode-crd (default true), which
  // PopulateEnableCiliumNodeCRD turns back on unless IPAM is delegated-plugin, identities are
  // allocated as CRDs and health checking is off.
  const nodeCrd =
    minor < 19 ||
    bool(config, 'enable-ciliumnode-crd', true) ||
    config.ipam !== 'delegated-plugin' ||
    (config['identity-allocation-mode'] ?? 'crd') !== 'crd' ||
    bool(config, 'enable-health-checking', true)
  if (nodeCrd) names.push('ciliumnodes')
  if (cnp) names.push('ciliumnetworkpolicies')
  if (ccnp) names.push('ciliumclusterwidenetworkpolicies')
  if (cnp || ccnp) names.push('ciliumcidrgroups')
  // 1.18 also takes the older enable-ipv4-egress-gateway.
  if (bool(config, 'enable-egress-gateway', false) || (minor < 19 && bool(config, 'enable-ipv4-egress-gateway', false)))
    names.push('ciliumegressgatewaypolicies')
  if (bool(config, 'enable-local-redirect-policy', false)) names.push('ciliumlocalredirectpolicies')
  if (bool(config, 'enable-envoy-config', false)) names.push('ciliumclusterwideenvoyconfigs', 'ciliumenvoyconfigs')
  if (bool(config, 'enable-bgp-control-plane', false)) {
    // 1.18 still registers the v2alpha1 BGPv1 CiliumBGPPeeringPolicy.
    if (minor < 19) names.push('ciliumbgppeeringpolicies')
    names.push('ciliumbgpclusterconfigs', 'ciliumbgpadvertisements', 'ciliumbgppeerconfigs', 'ciliumbgpnodeconfigs', 'ciliumbgpnodeconfigoverrides')
  }
  if (minor >= 20 && bool(config, 'enable-datapath-plugins', false)) names.push('ciliumdatapathplugins')
  names.push('ciliumloadbalancerippools', 'ciliuml2announcementpolicies')
  // operator/option/config.go: enable-gateway-api.
  if (bool(config, 'enable-gateway-api', false)) names.push('ciliumgatewayclassconfigs')
  names.push('ciliumnodeconfigs')
  return names.map((n) => `${n}.cilium.io`)
}

const crdCache = new Map<string, RawCrd>()

/** The schema version an operator of module `module` stamps (CustomResourceDefinitionSchemaVersion). */
export function ciliumSchemaVersion(module: string): string {
  const file = join(ciliumModuleDir(module), CLIENT_PACKAGE, 'register.go')
  const v = /CustomResourceDefinitionSchemaVersion = "([^"]+)"/.exec(readFileSync(file, 'utf8'))?.[1]
  if (!v) throw new Error(`cilium operator simulator: no CustomResourceDefinitionSchemaVersion in ${file}`)
  return v
}

/** One CRD of module `module` as its operator creates it (GetPregeneratedCRD + constructV1CRD). */
export function ciliumCrd(module: string, name: string): RawCrd {
  const key = `${module}/${name}`
  const cached = crdCache.get(key)
  if (cached) return cached
  const plural = name.replace(/\.cilium\.io$/, '')
  const crds = join(ciliumModuleDir(module), CLIENT_PACKAGE, 'client', 'crds')
  const file = ['v2', 'v2alpha1'].map((v) => join(crds, v, `${plural}.yaml`)).find(existsSync)
  if (!file) throw new Error(`cilium operator simulator: Cilium ${module} has no pregenerated CRD ${name}`)
  const generated = parseYaml(readFileSync(file, 'utf8')) as RawCrd & {spec: {names: Record<string, unknown>}}
  const {kind, plural: p, shortNames, singular, categories} = generated.spec.names
  const {scope, versions, conversion} = generated.spec
  const crd: RawCrd = {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {name, labels: {[SCHEMA_VERSION_LABEL]: ciliumSchemaVersion(module)}},
    spec: {
      group: 'cilium.io',
      names: Object.fromEntries(Object.entries({kind, plural: p, shortNames, singular, categories}).filter(([, v]) => v !== undefined)),
      scope,
      versions,
      ...(conversion ? {conversion} : {}),
    },
  }
  crdCache.set(key, crd)
  return crd
}

/** Cilium's real policy CRDs (CiliumNetworkPolicy, CiliumClusterwideNetworkPolicy) as an operator of `version` creates them. */
export function ciliumPolicyCrds(version: string = DEFAULT_CILIUM_VERSION): readonly RawCrd[] {
  const {module} = ciliumModuleFor(version)
  return ['ciliumnetworkpolicies.cilium.io', 'ciliumclusterwidenetworkpolicies.cilium.io'].map((n) => ciliumCrd(module, n))
}

/** CreateUpdateCRD's needs-update check (crdhelpers/register.go): no schema, no label, an unparsable or older label. */
function needsUpdate(live: RawCrd, own: Semver): boolean {
  if (!live.spec.versions?.[0]?.schema) return true
  const label = live.metadata.labels?.[SCHEMA_VERSION_LABEL]
  if (label === undefined) return true
  const v = semver(label)
  return !v || compare(v, own) < 0
}

/** What one registration did, per CRD. */
export type CrdAction = 'created' | 'updated' | 'unchanged'

/**
 * Registers the CRDs an operator of `version` registers with `config`, as
 * CreateCustomResourceDefinitions does, and waits until they are Established.
 */
export async function registerCiliumCrds(
  kc: KubeConfig,
  version: string,
  config: CiliumConfig = {},
  timeoutMs = 60_000,
): Promise<{module: string; note?: string; actions: Record<string, CrdAction>}> {
  const {module, note} = ciliumModuleFor(version)
  const own = semver(ciliumSchemaVersion(module))!
  const actions: Record<string, CrdAction> = {}
  for (const name of ciliumCrdNamesFor(module, config)) {
    const target = ciliumCrd(module, name)
    actions[name] = await createUpdateCrd(kc, target, own, timeoutMs)
  }
  for (const name of Object.keys(actions)) await waitForCrdEstablished(kc, name, timeoutMs)
  return {module, ...(note ? {note} : {}), actions}
}

async function createUpdateCrd(kc: KubeConfig, target: RawCrd, own: Semver, timeoutMs: number): Promise<CrdAction> {
  const path = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${target.metadata.name}`
  let live = await crdRequest(kc, 'GET', path)
  if (live.status === 404) {
    const created = await crdRequest(kc, 'POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', target)
    // Another operator raced it in: it updates it, so this one is done.
    if (created.status === 409) return 'unchanged'
    if (created.status !== 201) throw crdError('creating', target, created)
    return 'created'
  }
  if (live.status !== 200) throw crdError('reading', target, live)
  if (!needsUpdate(live.body as RawCrd, own)) return 'unchanged'
  // Poll every 500 ms for up to 60 s (the operator's poller), re-reading and re-checking each time.
  const deadline = Date.now() + Math.min(timeoutMs, 60_000)
  for (;;) {
    const current = live.body as RawCrd
    if (!needsUpdate(current, own)) return 'unchanged'
    const updated = await crdRequest(kc, 'PUT', path, {
      ...current,
      metadata: {...current.metadata, labels: target.metadata.labels},
      spec: {...target.spec, preserveUnknownFields: false},
    })
    if (updated.status === 200) return 'updated'
    if (updated.status !== 409 || Date.now() > deadline) throw crdError('updating', target, updated)
    await new Promise((r) => setTimeout(r, 500))
    live = await crdRequest(kc, 'GET', path)
    if (live.status !== 200) throw crdError('reading', target, live)
  }
}

function crdError(what: string, crd: RawCrd, res: {status: number; text: string}): Error {
  return Object.assign(new Error(`cilium operator simulator: ${what} the CRD ${crd.metadata.name} answered ${res.status}: ${res.text.slice(0, 500)}`), {
    code: res.status,
  })
}

/**
 * A CRD request with a plain JSON body. Not through client-node's typed API: its serializer drops
 * keys it has no model field under that exact name, such as `x-kubernetes-preserve-unknown-fields`.
 */
async function crdRequest(kc: KubeConfig, method: string, path: string, body?: object): Promise<{status: number; text: string; body: unknown}> {
  const cluster = kc.getCurrentCluster()
  if (!cluster) throw new Error('cilium operator simulator: the kubeconfig has no current cluster')
  const options: Parameters<typeof request>[1] = {method, headers: {'Content-Type': 'application/json', Accept: 'application/json'}}
  await kc.applyToHTTPSOptions(options)
  const {status, text} = await new Promise<{status: number; text: string}>((resolve, reject) => {
    const req = request(new URL(path, cluster.server), options, (res) => {
      let text = ''
      res.on('data', (c: Buffer) => (text += c.toString()))
      res.on('end', () => resolve({status: res.statusCode ?? 0, text}))
    })
    req.on('error', reject)
    req.end(body === undefined ? undefined : JSON.stringify(body))
  })
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    parsed = undefined
  }
  return {status, text, body: parsed}
}

/** Creates a CRD from plain JSON (already there: an error with code 409, unless `ignoreExisting`). */
export async function createCrdRaw(kc: KubeConfig, crd: object, opts: {ignoreExisting?: boolean} = {}): Promise<void> {
  const res = await crdRequest(kc, 'POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd)
  if (res.status === 201 || (res.status === 409 && opts.ignoreExisting)) return
  throw Object.assign(new Error(`creating a CRD answered ${res.status}: ${res.text.slice(0, 500)}`), {code: res.status})
}

/**
 * Registers the CRDs an operator of `version` (default: the pinned chart's) registers with
 * cilium-config's defaults, create-or-update as the operator does, and waits until they are Established.
 */
export async function installCiliumCrdsSimulated(
  kubeconfigPath: string,
  timeoutMs = 30_000,
  opts: {version?: string; config?: CiliumConfig} = {},
): Promise<void> {
  const kc = loadKubeConfig(kubeconfigPath)
  await registerCiliumCrds(kc, opts.version ?? DEFAULT_CILIUM_VERSION, opts.config ?? {}, timeoutMs)
}

/** The Cilium version of an operator Deployment: its cilium-operator image's tag, else a `helm.sh/chart: cilium-X.Y.Z` label. */
export function operatorVersionOf(d: V1Deployment): string | undefined {
  const containers = d.spec?.template.spec?.containers ?? []
  const container = containers.find((c) => c.name === 'cilium-operator') ?? containers.find((c) => /\/operator(-[a-z]+)?[:@]/.test(c.image ?? ''))
  const tag = /:v?(\d+\.\d+\.\d+)(?:@|$)/.exec((container?.image ?? '').replace(/@sha256:[0-9a-f]+$/, ''))?.[1]
  if (tag) return tag
  const chart = d.metadata?.labels?.['helm.sh/chart'] ?? d.spec?.template.metadata?.labels?.['helm.sh/chart']
  return /^cilium-(\d+\.\d+\.\d+)$/.exec(chart ?? '')?.[1]
}

export interface CiliumOperatorStart {
  /** The operator's version (image tag) and the pinned module whose CRDs it registered. */
  version: string
  module: string
  note?: string
  actions: Record<string, CrdAction>
}

export interface CiliumOperatorSimulator {
  /** Resolves once the first operator start registered its CRDs and they are Established; rejects if that failed. */
  readonly installed: Promise<void>
  /** Every simulated operator start that registered CRDs, oldest first. */
  readonly starts: readonly CiliumOperatorStart[]
  /** Resolves, with the last start, once the simulator has seen the live operator Deployment's current generation (its pod template started, CRDs registered). */
  synced(timeoutMs?: number): Promise<CiliumOperatorStart>
  stop(): Promise<void>
}

/**
 * Watches the Deployment `kube-system/cilium-operator` (as the inline manifest or Helm creates
 * it): when it appears and whenever its pod template changes (a rollout starts a new operator),
 * registers the CRDs of the version its image names, with the cilium-config of that moment.
 */
export function startCiliumOperatorSimulator(opts: {
  kubeconfigPath: string
  /** Resync period (default 5000 ms): a tick runs at once on a watch event of the Deployment, and 300 ms after a failed one (an operator that fails restarts). */
  intervalMs?: number
}): CiliumOperatorSimulator {
  // Downloaded if missing, now: a missing module fails the harness start, not a later wait.
  for (const v of pinnedCiliumVersions()) ciliumModuleDir(v)
  const kc = loadKubeConfig(opts.kubeconfigPath)
  const apps = kc.makeApiClient(AppsV1Api)
  const core = kc.makeApiClient(CoreV1Api)
  const starts: CiliumOperatorStart[] = []
  let started: string | undefined // The pod template last started.
  let observed: {uid?: string; generation?: number} = {} // The Deployment as the last finished tick saw it.
  let lastError: Error | undefined
  let stopped = false
  let resolveInstalled!: () => void
  let rejectInstalled!: (err: Error) => void
  const installed = new Promise<void>((res, rej) => ((resolveInstalled = res), (rejectInstalled = rej)))
  // A caller that never awaits `installed` must not see an unhandled rejection at stop.
  installed.catch(() => undefined)

  async function tick(): Promise<void> {
    let deployment: V1Deployment
    try {
      deployment = await apps.readNamespacedDeployment({namespace: 'kube-system', name: 'cilium-operator'})
    } catch (err) {
      // Deleted: a Deployment created again starts a new operator.
      if ((err as {code?: number}).code === 404) return void ((started = undefined), (observed = {}))
      throw err
    }
    const seen = {uid: deployment.metadata?.uid, generation: deployment.metadata?.generation}
    const template = JSON.stringify(deployment.spec?.template ?? {})
    if (template === started) return void (observed = seen)
    const version = operatorVersionOf(deployment)
    if (!version)
      throw Object.assign(
        new Error('cilium operator simulator: kube-system/cilium-operator names no Cilium version (no vX.Y.Z image tag, no helm.sh/chart label)'),
        {permanent: true},
      )
    let config: CiliumConfig = {}
    try {
      config = (await core.readNamespacedConfigMap({namespace: 'kube-system', name: 'cilium-config'})).data ?? {}
    } catch (err) {
      if ((err as {code?: number}).code !== 404) throw err
    }
    if (bool(config, 'skip-crd-creation', false)) {
      // pkg/k8s/apis/cell.go: "Skipping creation of CRDs".
      starts.push({version, module: '', note: 'skip-crd-creation is true: no CRD registered', actions: {}})
      started = template
      observed = seen
      return
    }
    let result: Awaited<ReturnType<typeof registerCiliumCrds>>
    try {
      result = await registerCiliumCrds(kc, version, config)
    } catch (err) {
      // No module for this version: retrying cannot help.
      if (/no Cilium module pinned|not a Cilium version|has no pregenerated CRD/.test((err as Error).message)) Object.assign(err as object, {permanent: true})
      throw err
    }
    if (result.note) console.warn(`cilium operator simulator: ${result.note}`)
    started = template
    observed = seen
    starts.push({version, ...result})
    resolveInstalled()
  }

  const waker = wakeOnWatch(kc, [{path: '/apis/apps/v1/namespaces/kube-system/deployments', query: {fieldSelector: 'metadata.name=cilium-operator'}}])
  const loop = (async () => {
    while (!stopped) {
      try {
        await tick()
        lastError = undefined
      } catch (err) {
        // A real operator that fails to register exits and is restarted: try again next tick,
        // but a failure no retry can fix fails `installed` at once.
        lastError = err as Error
        if ((err as {permanent?: boolean}).permanent) rejectInstalled(lastError)
      }
      await waker.wait(lastError ? Math.min(300, opts.intervalMs ?? 300) : (opts.intervalMs ?? 5000))
    }
  })()

  return {
    installed,
    starts,
    async synced(timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs
      for (;;) {
        const d = await apps.readNamespacedDeployment({namespace: 'kube-system', name: 'cilium-operator'})
        // Seen at this generation or later (not merely an equal template: a rollback's is an older one's).
        if (observed.uid === d.metadata?.uid && (observed.generation ?? 0) >= (d.metadata?.generation ?? 0) && starts.length) return starts.at(-1)!
        if (Date.now() > deadline)
          throw new Error(
            `cilium operator simulator: the operator's current pod template was not started within ${timeoutMs} ms${lastError ? `: ${lastError.message}` : ''}`,
          )
        await new Promise((r) => setTimeout(r, 50))
      }
    },
    async stop() {
      stopped = true
      waker.stop()
      await loop
    },
  }
}
