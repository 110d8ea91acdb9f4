// Argo CD from its pinned Helm chart (ADR-0099 decisions 5 and 6): Ichor's defaults, the
// keys Ichor owns, and the post-render steps the chart has no switch for.
import {existsSync, readFileSync, statSync} from 'node:fs'
import {join} from 'node:path'
import type {OwnedKey} from '../values/engine.js'
import type {Values} from '../values/path.js'
import {parse as parseYaml} from 'yaml'
import {readChartArchive} from '../chart/archive.js'
import {ARGOCD_NAMESPACE} from '../constants.js'
import {IchorError, ValidationError} from '../errors/errors.js'
import {helmTemplate} from '../helm/template.js'
import {cloneObjects, objectId, parseObjects, requireObject} from './objects.js'
import type {KubeObject} from '../kube/objects.js'

export const ARGOCD_RELEASE = 'argocd'

/**
 * The field manager of Argo CD's server-side syncs (argoproj/argo-cd common/common.go
 * `ArgoCDSSAManager`, not configurable). ichor's first apply of Kokumi and Argo CD, and of
 * their policies, uses it too: see firstApplyTask.
 */
export const ARGOCD_FIELD_MANAGER = 'argocd-controller'

/**
 * Ichor's layer under the user's values. The chart renders no Secret holding a value Ichor
 * generates: the redis-secret-init hook (which would make the redis password) is off and
 * Ichor emits `argocd-redis` itself; `argocd-secret` is rendered empty and Argo CD fills it.
 * `applicationSet.enabled` does not exist in the chart (its controller is dropped after render).
 */
export const ARGOCD_DEFAULT_VALUES = {
  crds: {keep: true},
  dex: {enabled: false},
  notifications: {enabled: false},
  'redis-ha': {enabled: false},
  redisSecretInit: {enabled: false},
  global: {networkPolicy: {create: false}},
} as const

/** The Lua health checks for Kokumi's kinds, keyed by their argocd-cm key. */
const KOKUMI_HEALTH_KINDS = ['Order', 'Preparation', 'Serving'] as const
const KOKUMI_GROUP = 'delivery.kokumi.dev'

export function healthCheckKey(kind: string, group = KOKUMI_GROUP): string {
  return `resource.customizations.health.${group}_${kind}`
}

/**
 * Health from the Ready condition every Kokumi kind reports (api/v1alpha1 condition.go):
 * Progressing until the controller has seen the current generation and set Ready,
 * Healthy on Ready=True, Degraded on Ready=False. Lua 5.1 as Argo CD's gopher-lua runs it.
 */
function kokumiHealthLua(kind: string): string {
  return `-- Ichor: health of a Kokumi ${kind} from its Ready condition
local hs = {}
hs.status = "Progressing"
hs.message = "Waiting for Kokumi to report Ready"
if obj.status == nil then
  return hs
end
if obj.status.observedGeneration ~= nil and obj.metadata.generation ~= nil and obj.status.observedGeneration < obj.metadata.generation then
  hs.message = "Waiting for Kokumi to observe generation " .. obj.metadata.generation
  return hs
end
if obj.status.conditions == nil then
  return hs
end
for _, condition in ipairs(obj.status.conditions) do
  if condition.type == "Ready" then
    if condition.status == "True" then
      hs.status = "Healthy"
    elseif condition.status == "False" then
      hs.status = "Degraded"
    end
    if condition.message ~= nil and condition.message ~= "" then
      hs.message = condition.message
    elseif condition.reason ~= nil then
      hs.message = condition.reason
    end
    return hs
  end
end
return hs
`
}

export const ARGOCD_HEALTH_CHECKS: Readonly<Record<string, string>> = Object.fromEntries(
  KOKUMI_HEALTH_KINDS.map((kind) => [healthCheckKey(kind), kokumiHealthLua(kind)]),
)

/** Values users may not set for Argo CD; the values engine refuses them naming the key and the reason. */
export const ARGOCD_OWNED_KEYS: readonly OwnedKey[] = [
  {
    path: ['configs', 'credentialTemplates'],
    reason: "Ichor owns the repository credentials: one repo-creds Secret for Kokumi's in-cluster registry, with no credential in it",
  },
  {
    path: ['configs', 'repositories'],
    reason: "Argo CD reads only from Kokumi's in-cluster registry; it has no other repository",
  },
  ...KOKUMI_HEALTH_KINDS.map((kind) => ({
    path: ['configs', 'cm', healthCheckKey(kind)] as const,
    reason: `Ichor ships the health check of Kokumi's ${kind}, which its status reporting relies on`,
  })),
  {
    path: ['global', 'networkPolicy', 'create'],
    reason: "the chart's NetworkPolicies (argocd-server's admits all ingress) would widen Ichor's CiliumNetworkPolicies",
  },
]

/** The values of the owned keys that Ichor sets through the chart (the others it sets outside it). */
export const ARGOCD_OWNED_VALUES: Values = {global: {networkPolicy: {create: false}}}

/** Objects Ichor creates itself; a user value that makes the chart render one (extraObjects) is refused. */
const ARGOCD_OWNED_OBJECTS: ReadonlyArray<{kind: string; name: string; reason: string}> = [
  {kind: 'AppProject', name: 'default', reason: 'Ichor creates the default AppProject'},
  {kind: 'Secret', name: 'argocd-redis', reason: 'Ichor generates the redis password and keeps it in ichor-system'},
  {kind: 'Secret', name: 'ichor-kokumi-registry', reason: "Ichor creates the repo-creds Secret for Kokumi's registry"},
]

export interface RenderArgoCdInput {
  /** The chart archive (.tgz) or an unpacked chart directory. */
  chartPath: string
  /** Effective values: defaults, user values and owned keys already merged by the values engine. */
  values: unknown
  /** The generated redis password (kept in ichor-system); becomes Secret argocd-redis. */
  redisPassword: string
  /** Kubernetes version the render targets (helm --kube-version). */
  kubeVersion?: string
}

export interface RenderedArgoCd {
  /** The chart's version, e.g. 10.1.1. */
  version: string
  appVersion?: string
  /** Every object, Secrets included (split them with splitSecrets). */
  objects: KubeObject[]
  /** `Kind name` of each object the post-render steps removed. */
  dropped: string[]
}

/**
 * `helm template` of the chart (release argocd, namespace argocd, CRDs included), then:
 * the ApplicationSet controller dropped (its CRD kept), every hook dropped, every chart
 * NetworkPolicy dropped, Secret argocd-redis added from the supplied password and the
 * health checks for Kokumi's kinds added to argocd-cm.
 */
export async function renderArgoCd(input: RenderArgoCdInput): Promise<RenderedArgoCd> {
  if (input.redisPassword.length < 16) {
    throw new ValidationError('Argo CD generated values', [{path: 'redisPassword', message: 'must be a generated password of at least 16 characters'}])
  }
  const chart = chartMetadata(input.chartPath)
  const text = await helmTemplate({
    chartPath: input.chartPath,
    releaseName: ARGOCD_RELEASE,
    namespace: ARGOCD_NAMESPACE,
    values: input.values,
    kubeVersion: input.kubeVersion,
    includeCrds: true,
  })
  return postProcessArgoCd(text, chart, input.redisPassword)
}

/** Everything after the helm subprocess; in-process and deterministic. */
export function postProcessArgoCd(text: string, chart: {version: string; appVersion?: string}, redisPassword: string): RenderedArgoCd {
  const rendered = parseObjects(text, `Argo CD chart ${chart.version}`)
  refuseOwnedObjects(rendered)
  const dropped: string[] = []
  let objects = rendered.filter((obj) => {
    const drop = isHook(obj) || isApplicationSetController(obj) || isChartNetworkPolicy(obj)
    if (drop) dropped.push(objectId(obj))
    return !drop
  })
  objects = addKokumiHealthChecks(objects)
  objects.push(redisSecret(redisPassword, objects))
  return {version: chart.version, appVersion: chart.appVersion, objects, dropped}
}

function chartMetadata(chartPath: string): {version: string; appVersion?: string} {
  if (existsSync(chartPath) && statSync(chartPath).isDirectory()) {
    const meta = parseYaml(readFileSync(join(chartPath, 'Chart.yaml'), 'utf8')) as {version?: string; appVersion?: string}
    if (!meta?.version) throw new IchorError(`${chartPath}/Chart.yaml has no version`)
    return {version: String(meta.version), appVersion: meta.appVersion}
  }
  const archive = readChartArchive(chartPath)
  return {version: archive.version, appVersion: archive.appVersion}
}

function isHook(obj: KubeObject): boolean {
  return obj.metadata.annotations?.['helm.sh/hook'] !== undefined
}

/** The chart has no switch for the ApplicationSet controller; its CRD stays (Argo CD's own types need it). */
function isApplicationSetController(obj: KubeObject): boolean {
  if (obj.kind === 'CustomResourceDefinition') return false
  return (
    obj.metadata.labels?.['app.kubernetes.io/component'] === 'applicationset-controller' ||
    obj.metadata.name.startsWith(`${ARGOCD_RELEASE}-applicationset-controller`)
  )
}

function isChartNetworkPolicy(obj: KubeObject): boolean {
  return obj.kind === 'NetworkPolicy' && obj.apiVersion.startsWith('networking.k8s.io/')
}

function refuseOwnedObjects(objects: KubeObject[]): void {
  const issues = ARGOCD_OWNED_OBJECTS.flatMap((owned) =>
    objects.some((o) => o.kind === owned.kind && o.metadata.name === owned.name)
      ? [{path: 'extraObjects', message: `renders ${owned.kind} ${owned.name}, which Ichor owns: ${owned.reason}`}]
      : [],
  )
  if (issues.length > 0) throw new ValidationError('Argo CD values', issues)
}

/** argocd-cm gains the Lua health checks; a differing value already there means an owned key got through. */
function addKokumiHealthChecks(objects: KubeObject[]): KubeObject[] {
  const out = cloneObjects(objects)
  const cm = requireObject(out, 'ConfigMap', 'argocd-cm', 'Argo CD render')
  const data = {...((cm.data as Record<string, string> | undefined) ?? {})}
  for (const [key, lua] of Object.entries(ARGOCD_HEALTH_CHECKS)) {
    if (data[key] !== undefined && data[key] !== lua) throw new IchorError(`argocd-cm already holds ${key}, which Ichor owns`)
    data[key] = lua
  }
  cm.data = data
  return out
}

/**
 * The Secret the chart's redis-secret-init hook would create (`argocd admin
 * redis-initial-password`): name argocd-redis, key `auth`, which the redis Deployment and
 * the Argo CD components read through secretKeyRef.
 */
export function redisSecret(password: string, objects: KubeObject[] = []): KubeObject {
  const redis = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'argocd-redis')
  const partOf = redis?.metadata.labels?.['app.kubernetes.io/part-of'] ?? 'argocd'
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: 'argocd-redis',
      namespace: ARGOCD_NAMESPACE,
      labels: {'app.kubernetes.io/component': 'redis', 'app.kubernetes.io/part-of': partOf, 'app.kubernetes.io/managed-by': 'ichor'},
    },
    type: 'Opaque',
    stringData: {auth: password},
  }
}
