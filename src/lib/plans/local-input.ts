// What a cluster command reads on this machine, checked before it connects: a bad file, an
// ichor-owned key or a malformed version is bad input (exit 2, named), also when the cluster
// is down or far away. The full checks (chart schema, the cluster's facts) still run later.
import {resolveAsset} from '../assets/resolve.js'
import {CILIUM_OWNED_KEYS, ciliumOwnedValues} from '../cilium/defaults.js'
import {parseCiliumVersion} from '../cilium/versions.js'
import {IchorError, ValidationError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import {nodeProblem} from '../talos/node-address.js'
import {parseKubernetesVersion, parseTalosVersion} from '../talos/versions.js'
import {ARGOCD_OWNED_KEYS, ARGOCD_OWNED_VALUES} from '../stack/argocd.js'
import type {StackComponent} from '../state/installation-types.js'
import {checkOwnedKeys} from '../values/engine.js'
import {givenValues, readValuesInput, type ReadValuesInput, type ValuesInput} from '../values/layer.js'
import type {Values} from '../values/path.js'

/** `--cilium-chart FILE` when given: it exists, is a regular file and a chart archive. */
export function checkCiliumChartFlag(chart: string | undefined): void {
  if (chart !== undefined) resolveAsset('cilium', {override: chart})
}

/**
 * The version of the Cilium chart a run will install (--cilium-chart, the fetched assets, the
 * embedded chart or the mirror, as resolveAsset finds it), so a default Kubernetes is one that
 * chart is tested on; undefined when none is found yet (the render names what is missing).
 */
export function ciliumChartVersionInUse(s: {ciliumChart?: string; mirror?: string; assetsDir?: string}): string | undefined {
  try {
    return resolveAsset('cilium', {override: s.ciliumChart, mirror: s.mirror, assetsDir: s.assetsDir}).version
  } catch {
    return undefined
  }
}

/** init's --cilium-chart, --argocd-chart and --kokumi-manifest, each when given. */
export function checkArtifactFlags(s: {ciliumChart?: string; argocdChart?: string; kokumiManifest?: string}): void {
  checkCiliumChartFlag(s.ciliumChart)
  if (s.argocdChart !== undefined) resolveAsset('argocd', {override: s.argocdChart})
  if (s.kokumiManifest !== undefined) resolveAsset('kokumi', {override: s.kokumiManifest})
}

/** The -f files and KEY=VALUE arguments of a Cilium values change: readable, and no owned key among them. */
export function checkCiliumValuesInput(input: ValuesInput): ReadValuesInput {
  const read = readValuesInput(input)
  // Before the cluster is read: the owned keys whose value does not depend on it (the kube-proxy
  // mode, the chart) are judged here; the others when the values are validated, before any change.
  const constants = ciliumOwnedValues({kubeProxy: 'kube-proxy', tunnel: 'vxlan'})
  const {issues} = checkOwnedKeys(CILIUM_OWNED_KEYS, givenValues(read), undefined, constants)
  if (issues.length > 0) throw new ValidationError('the Cilium values are invalid, nothing was changed', issues)
  return read
}

/** A stack component's user layer (files read, sets applied): no key ichor owns in it. */
function checkStackValues(component: StackComponent, values: Values): void {
  const {issues} = component === 'argocd' ? checkOwnedKeys(ARGOCD_OWNED_KEYS, values, ARGOCD_OWNED_VALUES) : {issues: []}
  if (issues.length > 0) throw new ValidationError(component === 'argocd' ? 'Argo CD values' : 'Kokumi values', issues)
}

/** The -f files and KEY=VALUE arguments of `stack values diff`. */
export function checkStackValuesInput(component: StackComponent, input: ValuesInput): ReadValuesInput {
  const read = readValuesInput(input)
  checkStackValues(component, givenValues(read))
  return read
}

/** `cni upgrade --to`: a Cilium version (MAJOR.MINOR.PATCH, `v` allowed). */
export function checkCiliumVersionFlag(to: string | undefined): void {
  if (to !== undefined && !parseCiliumVersion(to)) {
    throw new IchorError(`--to: "${to}" is not a Cilium version (accepted: MAJOR.MINOR.PATCH or vMAJOR.MINOR.PATCH, e.g. 1.19.6)`, {exitCode: EXIT.usage})
  }
}

/** `kubernetes upgrade --to`: a Kubernetes release version, the error naming --to. */
export function checkKubernetesVersionFlag(to: string): void {
  asToFlag(() => parseKubernetesVersion(to))
}

/** `talos upgrade --to` (a Talos release version) and its `--node`s (addresses), the errors naming the flag. */
export function checkTalosUpgradeFlags(to: string, nodes: readonly string[]): void {
  asToFlag(() => parseTalosVersion(to))
  for (const node of nodes) {
    const problem = nodeProblem(node)
    if (problem) throw new IchorError(`--node: ${problem}`, {exitCode: EXIT.usage})
  }
}

/** A version parser's refusal, naming --to instead of init's flag. */
function asToFlag(parse: () => unknown): void {
  try {
    parse()
  } catch (error) {
    if (error instanceof IchorError) throw new IchorError(error.message.replace(/^--[a-z-]+:/, '--to:'), {exitCode: EXIT.usage})
    throw error
  }
}
