// The stack as ichor publishes it: each component rendered (user values through the
// values engine), split into publishable objects and Secrets, bundled into the exact
// OCI layer bytes, and its Order. Offline: the same function serves the dry run, the
// real run and `ichor stack` commands.
import {randomBytes} from 'node:crypto'
import {readChartArchive} from '../chart/archive.js'
import {ICHOR_SYSTEM, MANAGED_BY, STATE_SECRETS} from '../constants.js'
import {ValidationError} from '../errors/errors.js'
import {buildArtifact, type Artifact} from '../oci/artifact.js'
import {buildBundle, bundleTag} from '../oci/bundle.js'
import {checkLayeredValues} from '../values/engine.js'
import type {Values} from '../values/path.js'
import {ARGOCD_DEFAULT_VALUES, ARGOCD_OWNED_KEYS, ARGOCD_OWNED_VALUES, redisSecret} from './argocd.js'
import {hashBinding} from './bcrypt.js'
import {serverAuthSecret} from './kokumi.js'
import {splitSecrets} from './secrets.js'
import {renderComponent, type RenderedComponent} from './component.js'
import type {KubeObject} from '../kube/objects.js'
import type {GeneratedStackSecrets, PromotionMode, StackComponent} from '../state/installation-types.js'
import {buildOrder, BUNDLE_REPOSITORY_PREFIX, COMPONENT_NAMESPACE, IN_CLUSTER_REGISTRY} from './orders.js'

export function generateStackSecrets(): GeneratedStackSecrets {
  const token = (bytes: number) => randomBytes(bytes).toString('base64url')
  return {kokumiAdminPassword: token(18), kokumiSigningKey: token(32), argocdRedisPassword: token(24)}
}

/**
 * ichor-system Secrets holding the generated values, so a rerun never regenerates them. With
 * the bcrypt hash Kokumi gets (`kokumiPasswordHash`), ichor's copy also keeps that hash and its
 * binding to the password (bcrypt.ts hashBinding): checking later that both sides agree needs no bcrypt.
 */
export function generatedSecretObjects(g: GeneratedStackSecrets, kokumiPasswordHash?: string): KubeObject[] {
  const secret = (name: string, data: Record<string, string>): KubeObject => ({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {name, namespace: ICHOR_SYSTEM, labels: {...MANAGED_BY}},
    type: 'Opaque',
    stringData: data,
  })
  return [
    secret(STATE_SECRETS.kokumiAdmin, {
      username: 'admin',
      password: g.kokumiAdminPassword,
      'signing-key': g.kokumiSigningKey,
      ...(kokumiPasswordHash ? {'password-hash': kokumiPasswordHash, 'password-hash-binding': hashBinding(g.kokumiAdminPassword, kokumiPasswordHash)} : {}),
    }),
    secret(STATE_SECRETS.argocdRedis, {password: g.argocdRedisPassword}),
  ]
}

export interface StackInputs {
  argocdChartPath: string
  kokumiManifestPath: string
  kubeVersion?: string
  argocdValues?: Values
  kokumiValues?: Values
  promotion?: PromotionMode
  defaultStorageClass?: boolean
  generated: GeneratedStackSecrets
  /** Registry host:port as seen from inside the cluster. */
  registry?: string
}

export interface PreparedBundle {
  repository: string
  tag: string
  layer: Buffer
  layerDigest: string
  artifact: Artifact
}

export interface PreparedComponent {
  component: StackComponent
  namespace: string
  rendered: RenderedComponent
  bundle: PreparedBundle
  order: KubeObject
}

export interface PreparedStack {
  components: Record<StackComponent, PreparedComponent>
  /** How Kokumi promotes a new bundle, as the Orders say. */
  promotion: PromotionMode
  /** Every Secret a run creates once (stackSecretsWith builds them), sorted by namespace and name. */
  secretRefs: {namespace: string; name: string}[]
}

/** Effective Argo CD values: ichor defaults ⟶ user ⟶ owned, checked like Cilium's. */
export function argocdEffectiveValues(chartPath: string, user: Values = {}): Values {
  const {effective, issues} = checkLayeredValues(
    {
      chart: readChartArchive(chartPath),
      defaults: ARGOCD_DEFAULT_VALUES as Values,
      owned: ARGOCD_OWNED_VALUES,
      ownedKeys: ARGOCD_OWNED_KEYS,
    },
    user,
  )
  if (issues.length > 0) throw new ValidationError('Argo CD values are invalid', issues)
  return effective
}

export async function prepareStack(inputs: StackInputs): Promise<PreparedStack> {
  const registry = inputs.registry ?? IN_CLUSTER_REGISTRY
  const argocdValues = argocdEffectiveValues(inputs.argocdChartPath, inputs.argocdValues)
  const [kokumi, argocd] = await Promise.all([
    renderComponent('kokumi', {
      manifestPath: inputs.kokumiManifestPath,
      defaultStorageClass: inputs.defaultStorageClass ?? false,
      userValues: inputs.kokumiValues,
      // no generated values: the Secrets are built by stackSecretsWith with the cluster's
    }),
    renderComponent('argocd', {
      chartPath: inputs.argocdChartPath,
      values: argocdValues,
      redisPassword: inputs.generated.argocdRedisPassword,
      kubeVersion: inputs.kubeVersion,
      registryUrl: `oci://${registry}`,
    }),
  ])
  const promotion = inputs.promotion ?? 'Automatic'
  const components = {
    kokumi: prepareComponent(kokumi, registry, promotion),
    argocd: prepareComponent(argocd, registry, promotion),
  }
  const secrets = [...generatedSecretObjects(inputs.generated), ...kokumi.secrets, ...argocd.secrets]
  const secretRefs = secrets
    .map((s) => ({namespace: s.metadata.namespace!, name: s.metadata.name}))
    .sort((a, b) => a.namespace.localeCompare(b.namespace) || a.name.localeCompare(b.name))
  return {components, promotion, secretRefs}
}

function prepareComponent(rendered: RenderedComponent, registry: string, promotion: PromotionMode): PreparedComponent {
  const repository = `${registry}/${BUNDLE_REPOSITORY_PREFIX}/${rendered.component}`
  const tag = bundleTag(rendered.version, rendered.manifest)
  const {layer, layerDigest} = buildBundle([{path: 'manifest.yaml', content: rendered.manifest}])
  const artifact = buildArtifact({layer, layerDigest, annotations: {source: `oci://${repository}`, version: tag}})
  return {
    component: rendered.component,
    namespace: COMPONENT_NAMESPACE[rendered.component],
    rendered,
    bundle: {repository, tag, layer, layerDigest, artifact},
    order: buildOrder({component: rendered.component, repository: `oci://${repository}`, tag, promotion}),
  }
}

/**
 * The Secrets a run creates once, built from the generated values the cluster holds
 * (which win over the fresh ones a render used): only the Secrets depend on them, so
 * nothing published is rendered again.
 */
export function stackSecretsWith(prepared: PreparedStack, generated: GeneratedStackSecrets, bcryptCost?: number): KubeObject[] {
  const kokumi = prepared.components.kokumi.rendered
  const argocd = prepared.components.argocd.rendered
  const kokumiSecrets = serverAuthSecret(kokumi.secrets, {adminPassword: generated.kokumiAdminPassword, signingKey: generated.kokumiSigningKey}, bcryptCost)
  const argocdSecrets = argocd.secrets.map((s) => (s.metadata.name === 'argocd-redis' ? redisSecret(generated.argocdRedisPassword, argocd.objects) : s))
  return [...generatedSecretObjects(generated), ...splitSecrets([...kokumiSecrets, ...argocdSecrets]).secrets]
}
