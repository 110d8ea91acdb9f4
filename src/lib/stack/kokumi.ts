// Kokumi's pinned install.yaml, made safe and small for a homelab (ADR-0099 decision 6).
// Each transformation is a small deterministic function over the parsed objects; each
// fails naming the object it expected when the manifest does not have it.
import {IchorError, ValidationError, type Issue} from '../errors/errors.js'
import {bcryptHash, deriveSalt} from './bcrypt.js'
import {cloneObjects, parseObjects, requireObject} from './objects.js'
import type {KubeObject} from '../kube/objects.js'

const SOURCE = 'Kokumi manifest'

/** The objects of install.yaml the transformations touch (names as in Kokumi 0.14.0). */
export const KOKUMI_OBJECTS = {
  registryService: 'kokumi-registry',
  serverService: 'kokumi-server',
  registryDeployment: 'kokumi-registry',
  registryPvc: 'kokumi-registry-pvc',
  controllerDeployment: 'kokumi-controller-manager',
  serverDeployment: 'kokumi-server',
  serverAuthSecret: 'kokumi-server-auth',
} as const

const KOKUMI_DEFAULT_MEMORY_LIMIT = '256Mi'
const KOKUMI_DEFAULT_REGISTRY_SIZE_LIMIT = '2Gi'

interface Container {
  name: string
  image?: string
  resources?: {limits?: Record<string, string>; requests?: Record<string, string>}
  [key: string]: unknown
}
interface Volume {
  name: string
  persistentVolumeClaim?: {claimName: string}
  emptyDir?: {sizeLimit?: string}
  [key: string]: unknown
}
interface PodTemplate {
  spec: {containers: Container[]; volumes?: Volume[]; [key: string]: unknown}
  [key: string]: unknown
}

function deploymentSpec(objects: KubeObject[], name: string): {replicas?: number; template: PodTemplate} {
  const dep = requireObject(objects, 'Deployment', name, SOURCE)
  const spec = dep.spec as {replicas?: number; template?: PodTemplate} | undefined
  if (!spec?.template?.spec?.containers) throw new IchorError(`Deployment ${name} in the ${SOURCE} has no pod template`)
  return spec as {replicas?: number; template: PodTemplate}
}

/** The Deployment's only container, or the one with that name when it has several. */
function mainContainer(objects: KubeObject[], deployment: string): Container {
  const {containers} = deploymentSpec(objects, deployment).template.spec
  if (containers.length === 1) return containers[0]!
  throw new IchorError(`Deployment ${deployment} in the ${SOURCE} has ${containers.length} containers; expected one`)
}

/**
 * A NodePort Service becomes ClusterIP, its nodePorts dropped. Applied to the registry (the
 * shipped NodePort 30050 would expose an anonymous, writable registry on every node) and to
 * the server UI (NodePort 30051); both are reached by port-forward instead.
 */
export function serviceToClusterIP(objects: KubeObject[], name: string): KubeObject[] {
  const out = cloneObjects(objects)
  const svc = requireObject(out, 'Service', name, SOURCE)
  const spec = (svc.spec ?? {}) as {type?: string; ports?: Array<Record<string, unknown>>; externalTrafficPolicy?: unknown}
  spec.type = 'ClusterIP'
  delete spec.externalTrafficPolicy
  for (const port of spec.ports ?? []) delete port.nodePort
  svc.spec = spec
  return out
}

/**
 * Registry storage: without a default StorageClass the PVC would stay Pending forever (Talos
 * ships none), so the volume becomes an emptyDir with a size limit and the PVC goes away.
 * With one, the PVC stays as shipped.
 */
export function registryStorage(objects: KubeObject[], opts: {defaultStorageClass: boolean; sizeLimit: string}): KubeObject[] {
  const out = cloneObjects(objects)
  const pvc = requireObject(out, 'PersistentVolumeClaim', KOKUMI_OBJECTS.registryPvc, SOURCE)
  const {template} = deploymentSpec(out, KOKUMI_OBJECTS.registryDeployment)
  const volume = (template.spec.volumes ?? []).find((v) => v.persistentVolumeClaim?.claimName === pvc.metadata.name)
  if (!volume) {
    throw new IchorError(`Deployment ${KOKUMI_OBJECTS.registryDeployment} in the ${SOURCE} mounts no volume from PersistentVolumeClaim ${pvc.metadata.name}`)
  }
  if (opts.defaultStorageClass) return out
  delete volume.persistentVolumeClaim
  volume.emptyDir = {sizeLimit: opts.sizeLimit}
  return out.filter((o) => o !== pvc)
}

/** Sets the memory limit of a Deployment's container (Kokumi ships 128Mi, too little for a render). */
export function setMemoryLimit(objects: KubeObject[], deployment: string, memory: string): KubeObject[] {
  const out = cloneObjects(objects)
  const container = mainContainer(out, deployment)
  container.resources ??= {}
  container.resources.limits = {...container.resources.limits, memory}
  return out
}

export function setReplicas(objects: KubeObject[], deployment: string, replicas: number): KubeObject[] {
  const out = cloneObjects(objects)
  deploymentSpec(out, deployment).replicas = replicas
  return out
}

export interface KokumiGenerated {
  /** The admin password, generated once and kept in ichor-system/ichor-kokumi-admin. */
  adminPassword: string
  /** The key Kokumi signs its session tokens with (HS256). */
  signingKey: string
}

/**
 * `kokumi-server-auth` with the generated credentials instead of admin/admin. Kokumi reads
 * the keys `username`, `password-hash` (bcrypt) and `signing-key`; the shipped Secret has
 * exactly those, and a manifest whose Secret lacks one fails here rather than at login.
 */
/** The bcrypt hash kokumi-server-auth holds: the same password and signing key give the same bytes. */
export function kokumiPasswordHash(generated: KokumiGenerated, bcryptCost = 10): string {
  return bcryptHash(generated.adminPassword, deriveSalt(generated.adminPassword, generated.signingKey), bcryptCost)
}

export function serverAuthSecret(objects: KubeObject[], generated: KokumiGenerated, bcryptCost = 10): KubeObject[] {
  const issues: Issue[] = []
  if (generated.adminPassword.length < 16) issues.push({path: 'adminPassword', message: 'must be at least 16 characters (a generated password)'})
  if (generated.adminPassword.trim().toLowerCase() === 'admin') issues.push({path: 'adminPassword', message: 'must not be "admin"'})
  if (generated.signingKey.length < 32 || generated.signingKey.startsWith('CHANGEME')) {
    issues.push({path: 'signingKey', message: 'must be a generated key of at least 32 characters'})
  }
  if (issues.length > 0) throw new ValidationError('Kokumi server credentials', issues)
  const out = cloneObjects(objects)
  const secret = requireObject(out, 'Secret', KOKUMI_OBJECTS.serverAuthSecret, SOURCE)
  const data = {...(secret.stringData as Record<string, string> | undefined)}
  for (const [k, v] of Object.entries((secret.data as Record<string, string> | undefined) ?? {})) data[k] ??= Buffer.from(v, 'base64').toString('utf8')
  for (const key of ['username', 'password-hash', 'signing-key']) {
    if (!(key in data)) throw new IchorError(`Secret ${KOKUMI_OBJECTS.serverAuthSecret} in the ${SOURCE} has no key ${key}`)
  }
  data['password-hash'] = kokumiPasswordHash(generated, bcryptCost)
  data['signing-key'] = generated.signingKey
  delete secret.data
  secret.stringData = data
  return out
}

/** The Kokumi version the manifest installs: the tag of the controller's image. */
export function kokumiManifestVersion(objects: KubeObject[]): string {
  const image = mainContainer(objects, KOKUMI_OBJECTS.controllerDeployment).image ?? ''
  const tag = /:([^:/@]+)(@.*)?$/.exec(image)?.[1]
  if (!tag)
    throw new IchorError(
      `Deployment ${KOKUMI_OBJECTS.controllerDeployment} in the ${SOURCE} has no image tag to read the Kokumi version from (${image || 'no image'})`,
    )
  return tag.replace(/^v/, '')
}

// ---------------------------------------------------------------------------------------
// User values. Kokumi has no chart, so its values accept only the keys Ichor maps to a patch
// it controls (ADR-0099 decision 7). Anything else is refused, naming the path.

export interface KokumiValues {
  controller?: {replicas?: number; resources?: {limits?: {memory?: string}}}
  server?: {replicas?: number; resources?: {limits?: {memory?: string}}}
  registry?: {resources?: {limits?: {memory?: string}}; storage?: {sizeLimit?: string}}
}

type Kind = 'memory' | 'replicas' | 'size'
/** Every accepted path, what it patches, and the kind of value it takes. */
const KOKUMI_VALUE_KEYS: Readonly<Record<string, {kind: Kind; patches: string}>> = {
  'controller.replicas': {kind: 'replicas', patches: `Deployment ${KOKUMI_OBJECTS.controllerDeployment} spec.replicas`},
  'controller.resources.limits.memory': {
    kind: 'memory',
    patches: `Deployment ${KOKUMI_OBJECTS.controllerDeployment} memory limit (default ${KOKUMI_DEFAULT_MEMORY_LIMIT})`,
  },
  'server.replicas': {kind: 'replicas', patches: `Deployment ${KOKUMI_OBJECTS.serverDeployment} spec.replicas`},
  'server.resources.limits.memory': {
    kind: 'memory',
    patches: `Deployment ${KOKUMI_OBJECTS.serverDeployment} memory limit (default ${KOKUMI_DEFAULT_MEMORY_LIMIT})`,
  },
  'registry.resources.limits.memory': {kind: 'memory', patches: `Deployment ${KOKUMI_OBJECTS.registryDeployment} memory limit (none by default)`},
  'registry.storage.sizeLimit': {
    kind: 'size',
    patches: `size limit of the registry's emptyDir (default ${KOKUMI_DEFAULT_REGISTRY_SIZE_LIMIT}; unused with a default StorageClass)`,
  },
}

const QUANTITY = /^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$/

/** Checks user values; returns them typed, or throws one ValidationError listing every problem. */
export function validateKokumiValues(values: unknown): KokumiValues {
  if (values === undefined || values === null) return {}
  const accepted = Object.keys(KOKUMI_VALUE_KEYS).join(', ')
  const issues: Issue[] = []
  const walk = (value: unknown, path: string): void => {
    const key = KOKUMI_VALUE_KEYS[path]
    if (key) {
      issues.push(...checkValue(path, key.kind, value))
      return
    }
    const isPrefix = path === '' || Object.keys(KOKUMI_VALUE_KEYS).some((k) => k.startsWith(`${path}.`))
    if (!isPrefix) {
      issues.push({path, message: `Kokumi values accept only keys Ichor maps to a patch: ${accepted}`})
      return
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      issues.push({path: path || '(root)', message: 'must be an object'})
      return
    }
    for (const [k, v] of Object.entries(value)) walk(v, path ? `${path}.${k}` : k)
  }
  walk(values, '')
  if (issues.length > 0) throw new ValidationError('Kokumi values', issues)
  return values as KokumiValues
}

function checkValue(path: string, kind: Kind, value: unknown): Issue[] {
  if (kind === 'replicas') {
    return Number.isInteger(value) && (value as number) >= 0 && (value as number) <= 10 ? [] : [{path, message: 'must be an integer from 0 to 10'}]
  }
  if (typeof value !== 'string' || !QUANTITY.test(value)) return [{path, message: 'must be a Kubernetes quantity string such as "256Mi" or "2Gi"'}]
  return []
}

// ---------------------------------------------------------------------------------------

export interface RenderKokumiInput {
  /** The pinned install.yaml, as text. */
  manifestText: string
  /** Whether the cluster has a default StorageClass (then the registry keeps its PVC). */
  defaultStorageClass: boolean
  /** The user layer of Kokumi values (spec.stack.kokumi.values). */
  userValues?: unknown
  /** Absent: kokumi-server-auth is left as shipped (never to be applied as such). */
  generated?: KokumiGenerated
  /** bcrypt cost for the admin password hash (tests lower it). */
  bcryptCost?: number
}

export interface RenderedKokumi {
  version: string
  /** Every object, Secrets included (split them with splitSecrets). */
  objects: KubeObject[]
}

/** install.yaml with every transformation of ADR-0099 decision 6 and the user's values applied. */
export function renderKokumi(input: RenderKokumiInput): RenderedKokumi {
  const values = validateKokumiValues(input.userValues)
  let objects = parseObjects(input.manifestText, SOURCE)
  const version = kokumiManifestVersion(objects)
  objects = serviceToClusterIP(objects, KOKUMI_OBJECTS.registryService)
  objects = serviceToClusterIP(objects, KOKUMI_OBJECTS.serverService)
  objects = registryStorage(objects, {
    defaultStorageClass: input.defaultStorageClass,
    sizeLimit: values.registry?.storage?.sizeLimit ?? KOKUMI_DEFAULT_REGISTRY_SIZE_LIMIT,
  })
  objects = setMemoryLimit(objects, KOKUMI_OBJECTS.controllerDeployment, values.controller?.resources?.limits?.memory ?? KOKUMI_DEFAULT_MEMORY_LIMIT)
  objects = setMemoryLimit(objects, KOKUMI_OBJECTS.serverDeployment, values.server?.resources?.limits?.memory ?? KOKUMI_DEFAULT_MEMORY_LIMIT)
  const registryMemory = values.registry?.resources?.limits?.memory
  if (registryMemory) objects = setMemoryLimit(objects, KOKUMI_OBJECTS.registryDeployment, registryMemory)
  if (values.controller?.replicas !== undefined) objects = setReplicas(objects, KOKUMI_OBJECTS.controllerDeployment, values.controller.replicas)
  if (values.server?.replicas !== undefined) objects = setReplicas(objects, KOKUMI_OBJECTS.serverDeployment, values.server.replicas)
  // Without generated values the Secret stays as shipped: a caller that only needs the
  // publishable objects (and the Secrets' names) does not pay for a bcrypt hash.
  if (input.generated) objects = serverAuthSecret(objects, input.generated, input.bcryptCost)
  return {version, objects}
}
