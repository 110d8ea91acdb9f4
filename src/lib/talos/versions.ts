// Talos and Kubernetes versions as ichor reads them from flags and machine configs, and the
// Talos config "contract" facts that decide which machine-config form a patch must use.
// Each fact names the Talos source it was read from (see README.md beside this file).
import {parseAllDocuments} from 'yaml'
import {pinnedAssets} from '../assets/lock.js'
import {defaultKubernetesFor, kubernetesRangeOfTalos, minorKeyOf, newestKubernetesPatch} from '../compatibility/queries.js'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'

export interface SemVer {
  major: number
  minor: number
  patch: number
}

export interface TalosVersion extends SemVer {
  /** Canonical form with the leading `v`, e.g. `v1.14.1`; what `talosctl gen config --talos-version` takes. */
  tag: string
}

export interface KubernetesVersion extends SemVer {
  /** Canonical form without the `v`, e.g. `1.37.0`; what `talosctl gen config --kubernetes-version` takes. */
  version: string
}

/**
 * Newest v1.14.x patch whose source could be confirmed (the Go module proxy serves
 * github.com/siderolabs/talos v1.14.0 and v1.14.1; later patches were not available).
 */
export const DEFAULT_TALOS_VERSION = 'v1.14.1'

/**
 * The Kubernetes version init installs when none is given: the newest patch ichor knows of the
 * newest minor that `talos` runs and the Cilium chart `cilium` (the pin, by default) is tested
 * on (compatibility.json), so a default is a combination someone tested; when no minor is both,
 * the newest patch of the newest minor Talos runs (Talos's own default).
 */
export function defaultKubernetesVersion(talos: string = DEFAULT_TALOS_VERSION, cilium: string = pinnedAssets().cilium.version): string {
  const tested = defaultKubernetesFor(talos, cilium)
  if (tested) return tested
  const range = kubernetesRangeOfTalos(minorKeyOf(talos))
  const newest = range && newestKubernetesPatch(minorKeyOf(range.max))
  return newest ?? (range ? range.max.replace(/\.99$/, '.0') : EXAMPLE_KUBERNETES_VERSION)
}

/** A Kubernetes version for examples in messages (Talos v1.14.1's `constants.DefaultKubernetesVersion`). */
const EXAMPLE_KUBERNETES_VERSION = '1.37.0'

/**
 * Talos versions ichor renders patches for: every field it writes exists from v1.10.0
 * (legacy v1alpha1 forms) and the multi-document Kubernetes kinds from v1.14.0.
 * A minor newer than `newestMinor` is refused: its config contract is unverified.
 */
export const SUPPORTED_TALOS = {oldest: 'v1.10.0', newestMinor: 'v1.14'} as const

const SEMVER = /^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$/

export function parseTalosVersion(input: string): TalosVersion {
  const {major, minor, patch} = parseReleaseVersion(input, '--talos-version', 'Talos', DEFAULT_TALOS_VERSION)
  return {major, minor, patch, tag: `v${major}.${minor}.${patch}`}
}

export function parseKubernetesVersion(input: string): KubernetesVersion {
  const {major, minor, patch} = parseReleaseVersion(input, '--kubernetes-version', 'Kubernetes', EXAMPLE_KUBERNETES_VERSION)
  return {major, minor, patch, version: `${major}.${minor}.${patch}`}
}

/** MAJOR.MINOR.PATCH with or without a leading `v`, or an error naming the flag (exit 2). */
function parseReleaseVersion(input: string, flag: string, product: string, example: string): {major: number; minor: number; patch: number} {
  const m = SEMVER.exec(input.trim())
  if (!m) {
    throw new IchorError(`${flag}: "${input}" is not a ${product} release version (accepted: vMAJOR.MINOR.PATCH or MAJOR.MINOR.PATCH, e.g. ${example})`, {
      exitCode: EXIT.usage,
    })
  }
  return {major: Number(m[1]), minor: Number(m[2]), patch: Number(m[3])}
}

/** Accepts a parsed version or the flag's text. */
function toTalosVersion(v: TalosVersion | string): TalosVersion {
  return typeof v === 'string' ? parseTalosVersion(v) : v
}

export function compareVersions(a: SemVer, b: SemVer): number {
  return a.major - b.major || a.minor - b.minor || a.patch - b.patch
}

/** Refuses a Talos version outside SUPPORTED_TALOS, naming the flag and the range. */
export function requireSupportedTalosVersion(v: TalosVersion | string): TalosVersion {
  const version = toTalosVersion(v)
  const oldest = parseTalosVersion(SUPPORTED_TALOS.oldest)
  const newest = parseTalosVersion(`${SUPPORTED_TALOS.newestMinor}.0`)
  const tooOld = compareVersions(version, oldest) < 0
  const tooNew = version.major > newest.major || (version.major === newest.major && version.minor > newest.minor)
  if (tooOld || tooNew) {
    throw new IchorError(`--talos-version: ${version.tag} is not supported (accepted: ${SUPPORTED_TALOS.oldest} to ${SUPPORTED_TALOS.newestMinor}.x)`, {
      exitCode: EXIT.usage,
    })
  }
  return version
}

// Talos compares config contracts by major.minor only (VersionContract.Greater in
// pkg/machinery/config/contract.go), so patch releases never change the form.
function atLeast(v: TalosVersion | string, major: number, minor: number): boolean {
  const t = toTalosVersion(v)
  return t.major > major || (t.major === major && t.minor >= minor)
}

/**
 * v1.14+ contract: Kubernetes settings live in their own documents (KubeProxyConfig,
 * KubeFlannelCNIConfig, KubeInlineManifestConfig, KubePrismConfig) and `gen config`
 * no longer writes `.cluster.proxy` / `.cluster.network` / `.machine.features.kubePrism`.
 * `MultidocKubernetesConfigSupported()` = `Greater(TalosVersion1_13)`.
 */
export function hasMultidocKubernetesConfig(v: TalosVersion | string): boolean {
  return atLeast(v, 1, 14)
}

/** v1.14+: host DNS is configured by the ResolverConfig document (`HostDNSMultidocConfig()`). */
export function hasMultidocHostDNSConfig(v: TalosVersion | string): boolean {
  return atLeast(v, 1, 14)
}

/**
 * v1.14+: `gen config` writes an UnattendedInstallConfig document (disk selector
 * `disk.dev_path == "<--install-disk>"`) instead of `machine.install`, and Talos installs by it
 * alone (`UnattendedInstallConfig()` = `Greater(TalosVersion1_13)`, config/generate/init.go).
 */
export function hasUnattendedInstallConfig(v: TalosVersion | string): boolean {
  return atLeast(v, 1, 14)
}

/** Refuses a Kubernetes version the given Talos version cannot run, naming both flags and the range. */
export function requireCompatibleKubernetesVersion(talos: TalosVersion | string, kubernetes: KubernetesVersion | string): KubernetesVersion {
  const t = requireSupportedTalosVersion(talos)
  const k = typeof kubernetes === 'string' ? parseKubernetesVersion(kubernetes) : kubernetes
  const range = kubernetesRangeOfTalos(`${t.major}.${t.minor}`)
  if (!range) throw new IchorError(`--talos-version: no Kubernetes compatibility is known for ${t.tag}`, {exitCode: EXIT.usage})
  if (compareVersions(k, parseKubernetesVersion(range.min)) < 0 || compareVersions(k, parseKubernetesVersion(range.max)) > 0) {
    throw new IchorError(
      `--kubernetes-version: ${k.version} does not run on Talos ${t.tag} (--talos-version) (accepted: ${range.min} to ${range.max.replace(/\.99$/, '.x')})`,
      {exitCode: EXIT.usage},
    )
  }
  return k
}

/**
 * The kube-apiserver image tag of a machine config: the KubeAPIServerConfig document (Talos
 * v1.14 multi-document form) or `cluster.apiServer.image` (v1alpha1), as talosctl v1.14
 * pkg/cluster/kubernetes `DetectLowestVersion` reads the APIServerConfig Talos derives from them.
 * Undefined when the config names no image (Talos then runs its default for the config's version).
 */
export function kubernetesVersionOfConfig(configYaml: string): string | undefined {
  const docs = parseAllDocuments(configYaml).map((d) => d.toJS() as Record<string, unknown> | null)
  const doc = docs.find((d) => d?.kind === 'KubeAPIServerConfig') as {image?: string} | undefined
  const legacy = docs.find((d) => d && !d.kind && !d.apiVersion) as {cluster?: {apiServer?: {image?: string}}} | undefined
  const image = doc?.image ?? legacy?.cluster?.apiServer?.image
  return image ? /:v?(\d+\.\d+\.\d+)(?:@.*)?$/.exec(image)?.[1] : undefined
}
