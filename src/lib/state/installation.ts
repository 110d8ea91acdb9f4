// The IchorInstallation singleton: desired state written by the CLI, status of what it
// applied. Plus the Secrets in ichor-system that hold what must never be regenerated.
import {parse as parseYaml} from 'yaml'
import {readPackagedAsset} from '../assets/packaged.js'
import type {KubeProxyMode, TunnelProtocol} from '../cilium/defaults.js'
import type {Kube} from '../kube/client.js'
import type {KubeObject} from '../kube/objects.js'
import {getObject} from '../kube/objects.js'
import type {PromotionMode} from '../stack/orders.js'
import type {GeneratedStackSecrets} from '../stack/prepare.js'
import type {Values} from '../values/path.js'

export const ICHOR_GROUP = 'ichor.maesh.dev'
export const INSTALLATION = {apiVersion: `${ICHOR_GROUP}/v1alpha1`, kind: 'IchorInstallation', name: 'ichor'} as const
export const ICHOR_SYSTEM = 'ichor-system'
export const TALOS_SECRETS_SECRET = 'ichor-talos'

export interface InstallationSpec {
  talos: {clusterName: string; endpoint: string; talosVersion: string; kubernetesVersion: string; controlPlanes: string[]; workers: string[]}
  cni: {kubeProxy: KubeProxyMode; tunnel: TunnelProtocol; cilium: {values: Values}}
  stack: {promotion: PromotionMode; argocd: {values: Values}; kokumi: {values: Values}}
}

export function installationCrd(): KubeObject {
  return parseYaml(readPackagedAsset('crds/ichorinstallation.yaml').toString('utf8')) as KubeObject
}

export function installationObject(spec: InstallationSpec): KubeObject {
  return {apiVersion: INSTALLATION.apiVersion, kind: INSTALLATION.kind, metadata: {name: INSTALLATION.name}, spec} as KubeObject
}

export function ichorSystemNamespace(): KubeObject {
  return {apiVersion: 'v1', kind: 'Namespace', metadata: {name: ICHOR_SYSTEM, labels: {'app.kubernetes.io/managed-by': 'ichor'}}}
}

export async function readInstallation(kube: Kube): Promise<(KubeObject & {spec?: InstallationSpec; status?: Record<string, unknown>}) | undefined> {
  const crd = await getObject(kube, {apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition', name: `ichorinstallations.${ICHOR_GROUP}`})
  if (!crd) return undefined
  return getObject(kube, {apiVersion: INSTALLATION.apiVersion, kind: INSTALLATION.kind, name: INSTALLATION.name})
}

/** The generated passwords as the cluster holds them, or undefined for those not created yet. */
export async function readGeneratedSecrets(kube: Kube): Promise<Partial<GeneratedStackSecrets>> {
  const read = async (name: string) => {
    const s = await getObject<KubeObject & {data?: Record<string, string>}>(kube, {apiVersion: 'v1', kind: 'Secret', name, namespace: ICHOR_SYSTEM})
    return Object.fromEntries(Object.entries(s?.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]))
  }
  const kokumi = await read('ichor-kokumi-admin')
  const redis = await read('ichor-argocd-redis')
  return {kokumiAdminPassword: kokumi.password, kokumiSigningKey: kokumi['signing-key'], argocdRedisPassword: redis.password}
}
