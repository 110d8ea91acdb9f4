// Talos machine-config patches for `talosctl gen config --config-patch-control-plane @file`
// and `--config-patch-worker @file`: Cilium as an inline manifest (control planes only),
// no flannel, kube-proxy off when Cilium replaces it, KubePrism on 7445.
//
// A patch file is a multi-document strategic merge patch (configpatcher.LoadPatch): each
// document is merged into the generated document with the same apiVersion/kind(/name),
// appended when there is none, and a document carrying `$patch: delete` removes its match.
// The form depends on the config contract of the target Talos version: from v1.14 the
// Kubernetes settings are their own documents and Talos refuses a config that also sets
// the legacy `.cluster.proxy` / `.cluster.network` fields, so the two forms never mix.
// Field names and kinds are verified against the Talos source (README.md beside this file).
import type {KubeProxyMode} from '../state/installation-types.js'
import {IchorError} from '../errors/errors.js'
import {toYaml} from '../yaml/emit.js'
import {hasMultidocHostDNSConfig, hasMultidocKubernetesConfig, requireSupportedTalosVersion, type TalosVersion} from './versions.js'
import {EXIT} from '../errors/exit-codes.js'

export const DEFAULT_INLINE_MANIFEST_NAME = 'cilium'
/** KubePrism's port on every node, which these patches enable; Cilium reaches the API server through it. */
export const KUBEPRISM_PORT = 7445
/** The taint Talos puts on control planes (pkg/machinery/constants LabelNodeRoleControlPlane). */
const CONTROL_PLANE_TAINT = 'node-role.kubernetes.io/control-plane'

export interface TalosPatchInput {
  talosVersion: TalosVersion | string
  kubeProxy: KubeProxyMode
  /**
   * The rendered Cilium manifest, already carrying Helm's ownership metadata. Null for a node
   * joining a cluster whose Cilium Helm already owns (node replace): no inline manifest, which
   * Talos would apply again over the release.
   */
  ciliumManifest: string | null
  /** Name of the inline manifest entry (default `cilium`); the hand-over removes it by this name. */
  inlineManifestName?: string
  /** Sets Talos host DNS `forwardKubeDNSToHost` when given; left as `gen config` made it otherwise. */
  forwardKubeDNSToHost?: boolean
  /**
   * Lets workloads run on the control planes: set when the cluster has no worker, since nothing
   * ichor installs (Kokumi, Argo CD) tolerates the control-plane NoSchedule taint.
   */
  allowSchedulingOnControlPlanes?: boolean
}

export interface TalosPatches {
  controlPlane: string
  worker: string
}

type Doc = Record<string, unknown>

// `v1alpha1` is the apiVersion of every multi-document kind used here
// (meta.Meta MetaAPIVersion in each New...V1Alpha1 constructor).
const API_VERSION = 'v1alpha1'

export function renderTalosPatches(input: TalosPatchInput): TalosPatches {
  const version = requireSupportedTalosVersion(input.talosVersion)
  const name = inlineManifestName(input.inlineManifestName)
  if (input.kubeProxy !== 'replaced' && input.kubeProxy !== 'kube-proxy') {
    throw new IchorError(`--kube-proxy: "${String(input.kubeProxy)}" is not a mode (accepted: replaced, kube-proxy)`, {exitCode: EXIT.usage})
  }
  if (input.ciliumManifest?.trim() === '') {
    throw new IchorError('the Cilium manifest for the inline manifest is empty')
  }
  const replaced = input.kubeProxy === 'replaced'
  const given = input.ciliumManifest
  const manifest = given === null ? undefined : given.endsWith('\n') ? given : `${given}\n`

  if (hasMultidocKubernetesConfig(version)) {
    const resolver = hasMultidocHostDNSConfig(version) ? resolverDocument(input.forwardKubeDNSToHost) : []
    // gen config writes KubeFlannelCNIConfig and KubeProxyConfig into the control-plane
    // config only (generateKubernetesControlplaneConfigs), KubePrismConfig into both.
    const controlPlane: Doc[] = [
      {apiVersion: API_VERSION, kind: 'KubeFlannelCNIConfig', $patch: 'delete'},
      // gen config taints control planes in their KubeNodeConfig document (config/generate/
      // kubernetes.go generateKubernetesUniversalConfigs, v1.14.1); a map key under
      // `$patch: delete` is removed (configloader/internal/decoder/selector.go deleteForPath).
      ...(input.allowSchedulingOnControlPlanes ? [{apiVersion: API_VERSION, kind: 'KubeNodeConfig', taints: {[CONTROL_PLANE_TAINT]: {$patch: 'delete'}}}] : []),
      ...(replaced ? [{apiVersion: API_VERSION, kind: 'KubeProxyConfig', enabled: false}] : []),
      {apiVersion: API_VERSION, kind: 'KubePrismConfig', port: KUBEPRISM_PORT},
      ...resolver,
      ...(manifest === undefined ? [] : [{apiVersion: API_VERSION, kind: 'KubeInlineManifestConfig', name, manifest}]),
    ]
    const worker: Doc[] = [{apiVersion: API_VERSION, kind: 'KubePrismConfig', port: KUBEPRISM_PORT}, ...resolver]
    return {controlPlane: renderDocuments(controlPlane), worker: renderDocuments(worker)}
  }

  // Below v1.14: one v1alpha1 document. Workers get the same cluster-wide switches as
  // control planes (as Talos's Cilium guide applies one patch to all nodes), never the manifest.
  const machine: Doc = {features: legacyFeatures(input.forwardKubeDNSToHost)}
  const cluster = (withManifest: boolean): Doc => ({
    // The legacy form's switch (v1alpha1_k8s_bridge.go k8sNodeConfigShim.Taints): control planes only.
    ...(withManifest && input.allowSchedulingOnControlPlanes ? {allowSchedulingOnControlPlanes: true} : {}),
    network: {cni: {name: 'none'}},
    ...(replaced ? {proxy: {disabled: true}} : {}),
    ...(withManifest && manifest !== undefined ? {inlineManifests: [{name, contents: manifest}]} : {}),
  })
  return {
    controlPlane: renderDocuments([{machine, cluster: cluster(true)}]),
    worker: renderDocuments([{machine, cluster: cluster(false)}]),
  }
}

/**
 * The patch that removes the Cilium inline manifest from a control plane's config once the
 * Helm release owns the objects (Talos never deletes what an inline manifest created, so
 * removing the entry only stops it being re-applied).
 */
export function removeInlineManifestPatch(talosVersion: TalosVersion | string, name = DEFAULT_INLINE_MANIFEST_NAME): string {
  const version = requireSupportedTalosVersion(talosVersion)
  const entry = inlineManifestName(name)
  if (hasMultidocKubernetesConfig(version)) {
    // A document-level delete selector, matched by apiVersion/kind/name.
    return renderDocuments([{apiVersion: API_VERSION, kind: 'KubeInlineManifestConfig', name: entry, $patch: 'delete'}])
  }
  // A sequence element delete: Talos selects the element by the first key:value beside
  // `$patch`, so `name` must come first. Unlike the document delete it fails ("lookup
  // failed") on a config without the entry: send it only where a probe found the entry.
  return renderDocuments([{cluster: {inlineManifests: [{name: entry, $patch: 'delete'}]}}])
}

function legacyFeatures(forwardKubeDNSToHost: boolean | undefined): Doc {
  return {
    kubePrism: {enabled: true, port: KUBEPRISM_PORT},
    ...(forwardKubeDNSToHost === undefined ? {} : {hostDNS: hostDNS(forwardKubeDNSToHost)}),
  }
}

function resolverDocument(forwardKubeDNSToHost: boolean | undefined): Doc[] {
  if (forwardKubeDNSToHost === undefined) return []
  return [{apiVersion: API_VERSION, kind: 'ResolverConfig', hostDNS: hostDNS(forwardKubeDNSToHost)}]
}

// Talos refuses forwardKubeDNSToHost: true unless host DNS is enabled, so turning it on
// says both; turning it off leaves host DNS itself as it is.
function hostDNS(forward: boolean): Doc {
  return forward ? {enabled: true, forwardKubeDNSToHost: true} : {forwardKubeDNSToHost: false}
}

// Talos requires a DNS-1123 subdomain for KubeInlineManifestConfig names; the legacy
// list has no such check, but one rule for both keeps the hand-over name portable.
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/

function inlineManifestName(name: string | undefined): string {
  const value = name ?? DEFAULT_INLINE_MANIFEST_NAME
  if (value.length > 253 || !DNS1123_SUBDOMAIN.test(value)) {
    throw new IchorError(`inline manifest name "${value}" is not a DNS-1123 subdomain (lower-case letters, digits, '-' and '.')`, {exitCode: EXIT.usage})
  }
  return value
}

/** Documents joined by `---`, keys in the order written here (apiVersion and kind first, as Talos documents read). */
function renderDocuments(docs: Doc[]): string {
  return docs.map((doc) => toYaml(doc, {sortKeys: false})).join('---\n')
}
