// Shared pieces of the Talos e2e tests: a Cilium-like set of objects (the real chart is
// far too large to apply object by object here, and its DaemonSet would never run), a
// tiny chart holding the same objects for `helm install --take-ownership`, and a
// bootstrap of simulated nodes through the product's talosctl wrapper.
import {mkdirSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {KubernetesObjectApi, type KubeConfig, type KubernetesObject} from '@kubernetes/client-node'
import {execa} from 'execa'
import {stringify} from 'yaml'
import {addHelmOwnership} from '../../src/lib/talos/ownership.js'
import {applyConfig, bootstrap, genConfig, genSecrets, kubeconfig, validateConfig} from '../../src/lib/talos/talosctl.js'
import type {SimulatedNodes} from './simulated-nodes.js'

/** What the Cilium chart renders, in miniature: namespaced, cluster-scoped, RBAC with a colon, a workload. */
export const CILIUM_LIKE_OBJECTS = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: cilium
  namespace: kube-system
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cilium-config
  namespace: kube-system
data:
  tunnel-protocol: vxlan
  kube-proxy-replacement: "true"
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: cilium
rules:
  - apiGroups: [""]
    resources: [pods, nodes]
    verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: cilium:config-reader
  namespace: kube-system
rules:
  - apiGroups: [""]
    resources: [configmaps]
    verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: cilium
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: cilium
subjects:
  - kind: ServiceAccount
    name: cilium
    namespace: kube-system
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: cilium
  namespace: kube-system
spec:
  selector:
    matchLabels:
      k8s-app: cilium
  template:
    metadata:
      labels:
        k8s-app: cilium
    spec:
      serviceAccountName: cilium
      containers:
        - name: cilium-agent
          image: quay.io/cilium/cilium:v1.18.0
`

/** References of the objects above, for reading them back. */
export const CILIUM_LIKE_REFS = [
  {apiVersion: 'v1', kind: 'ServiceAccount', metadata: {name: 'cilium', namespace: 'kube-system'}},
  {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'cilium-config', namespace: 'kube-system'}},
  {apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: {name: 'cilium'}},
  {apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: {name: 'cilium:config-reader', namespace: 'kube-system'}},
  {apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: {name: 'cilium'}},
  {apiVersion: 'apps/v1', kind: 'DaemonSet', metadata: {name: 'cilium', namespace: 'kube-system'}},
] as const

/** The bootstrap render as ichor puts it in the inline manifest: with Helm's ownership metadata. */
export const CILIUM_INLINE_MANIFEST = addHelmOwnership(CILIUM_LIKE_OBJECTS)

/** A second inline manifest that is not Cilium's: the hand-over must leave it to Talos. */
export const OTHER_INLINE_MANIFEST = `apiVersion: v1
kind: ConfigMap
metadata:
  name: site-settings
  namespace: kube-system
data:
  owner: talos
`

export interface InlineManifest {
  name: string
  contents: string
}

/** A control-plane patch carrying inline manifests in the form the config contract uses. */
export function inlineManifestsPatch(talosVersion: string, manifests: InlineManifest[]): string {
  const [major, minor] = talosVersion.replace(/^v/, '').split('.').map(Number) as [number, number]
  if (major > 1 || minor >= 14) {
    return manifests.map((m) => stringify({apiVersion: 'v1alpha1', kind: 'KubeInlineManifestConfig', name: m.name, manifest: m.contents})).join('---\n')
  }
  return stringify({cluster: {inlineManifests: manifests}})
}

/** kube-proxy disabled in the form of the config contract (as ichor's own patches do). */
export function kubeProxyOffPatch(talosVersion: string): string {
  const [major, minor] = talosVersion.replace(/^v/, '').split('.').map(Number) as [number, number]
  if (major > 1 || minor >= 14) return stringify({apiVersion: 'v1alpha1', kind: 'KubeProxyConfig', enabled: false})
  return stringify({cluster: {proxy: {disabled: true}}})
}

export const CONTROL_PLANE_IP = '127.0.0.11'
export const WORKER_IP = '127.0.0.12'
export const SECOND_CONTROL_PLANE_IP = '127.0.0.13'

export interface BootstrappedCluster {
  talosconfig: string
  controlPlaneConfig: string
  kubeconfigPath: string
}

/** ichor's Talos flow on simulated nodes: secrets, configs, validate, apply (maintenance), bootstrap, kubeconfig. */
export async function bootstrapSimulatedCluster(
  sim: SimulatedNodes,
  opts: {talosVersion: string; manifests: InlineManifest[]; withWorker?: boolean},
): Promise<BootstrappedCluster> {
  const secrets = join(sim.workDir, 'secrets.yaml')
  await genSecrets(secrets)
  const outDir = join(sim.workDir, 'configs')
  mkdirSync(outDir, {recursive: true})
  const configs = await genConfig({
    clusterName: 'sim',
    endpoint: `https://${CONTROL_PLANE_IP}:6443`,
    secretsPath: secrets,
    talosVersion: opts.talosVersion,
    kubernetesVersion: '1.36.3',
    // kube-proxy off, as for Cilium: Talos would otherwise create its kube-proxy objects too.
    controlPlanePatch: `${inlineManifestsPatch(opts.talosVersion, opts.manifests)}---\n${kubeProxyOffPatch(opts.talosVersion)}`,
    outDir,
  })
  await validateConfig(configs.controlPlane)
  await applyConfig({node: CONTROL_PLANE_IP, file: configs.controlPlane, insecure: true})
  if (opts.withWorker) {
    await validateConfig(configs.worker)
    await applyConfig({node: WORKER_IP, file: configs.worker, insecure: true})
  }
  await bootstrap({node: CONTROL_PLANE_IP, talosconfig: configs.talosconfig})
  const kubeconfigPath = await kubeconfig({node: CONTROL_PLANE_IP, talosconfig: configs.talosconfig, outPath: join(sim.workDir, 'kubeconfig')})
  return {talosconfig: configs.talosconfig, controlPlaneConfig: configs.controlPlane, kubeconfigPath}
}

/**
 * A chart whose templates are the Cilium-like objects (Helm adds its own ownership
 * metadata); `tunnelProtocol` (default `vxlan`) and `kubeProxyReplacement` (default true:
 * the `kube-proxy-replacement` key, removed when false) render like the bootstrap by default.
 */
export function writeCiliumLikeChart(dir: string): string {
  mkdirSync(join(dir, 'templates'), {recursive: true})
  writeFileSync(join(dir, 'Chart.yaml'), 'apiVersion: v2\nname: cilium\nversion: 1.18.0\nappVersion: 1.18.0\n')
  writeFileSync(join(dir, 'values.yaml'), 'tunnelProtocol: vxlan\nkubeProxyReplacement: true\n')
  const templated = CILIUM_LIKE_OBJECTS.replace('tunnel-protocol: vxlan', 'tunnel-protocol: {{ .Values.tunnelProtocol | quote }}').replace(
    '  kube-proxy-replacement: "true"\n',
    '{{- if .Values.kubeProxyReplacement }}\n  kube-proxy-replacement: "true"\n{{- end }}\n',
  )
  if (!templated.includes('.Values.tunnelProtocol') || !templated.includes('.Values.kubeProxyReplacement'))
    throw new Error('fixture: a templated key is missing from the Cilium-like objects')
  writeFileSync(join(dir, 'templates', 'cilium.yaml'), templated)
  return dir
}

function helmBinary(): string {
  const helm = process.env.ICHOR_HELM
  if (!helm) throw new Error('ICHOR_HELM is not set: vitest.config.ts points ICHOR_HELM at the Helm 4 scripts/get-helm.sh puts in place')
  return helm
}

/** The real helm, invoked as `helm` (Helm 4 names its field manager after the binary). */
export async function helm(args: string[], kubeconfigPath: string): Promise<string> {
  const r = await execa(helmBinary(), [...args, '--kubeconfig', kubeconfigPath], {reject: false, timeout: 120_000})
  if (r.exitCode !== 0) throw new Error(`helm ${args.join(' ')} failed: ${r.stderr || r.stdout}`)
  return r.stdout
}

/** Reads each object; undefined for one that is gone. */
export async function readObjects(kc: KubeConfig, refs: readonly KubernetesObject[]): Promise<Array<KubernetesObject | undefined>> {
  const api = KubernetesObjectApi.makeApiClient(kc)
  return Promise.all(
    refs.map(async (ref) => {
      try {
        return await api.read(ref as KubernetesObject & {metadata: {name: string}})
      } catch (error) {
        if ((error as {code?: number}).code === 404) return undefined
        throw error
      }
    }),
  )
}
