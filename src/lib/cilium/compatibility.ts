// The Kubernetes minors each Cilium minor is e2e tested on. Cilium does not refuse other
// versions ("older and newer Kubernetes versions ... depend on the forward / backward
// compatibility offered by Kubernetes"), so ichor warns and goes on.
// Source: the k8s Version column of Documentation/network/kubernetes/compatibility.rst in
// cilium/cilium at the tag named per row. Cilium keeps that list fixed for a release branch's
// whole maintenance period, so one patch's table stands for the minor.
import type {SemVer} from '../talos/versions.js'

export interface TestedKubernetes {
  /** Oldest and newest tested Kubernetes minor, "MAJOR.MINOR". */
  oldest: string
  newest: string
  /** The cilium/cilium tag whose compatibility.rst the row was read from. */
  source: string
}

export const KUBERNETES_TESTED_BY_CILIUM_MINOR: Readonly<Record<string, TestedKubernetes>> = {
  '1.18': {oldest: '1.30', newest: '1.33', source: 'v1.18.14'},
  '1.19': {oldest: '1.32', newest: '1.35', source: 'v1.19.3'},
}

const minorOf = (text: string) => text.split('.').slice(0, 2).map(Number) as [number, number]

/**
 * A warning when Kubernetes `kube` is outside the range the Cilium chart's minor is tested on;
 * undefined inside it, and for a Cilium minor whose table is not recorded here.
 */
export function kubernetesCompatibilityWarning(ciliumVersion: string, kube: Pick<SemVer, 'major' | 'minor'>): string | undefined {
  const [cMajor, cMinor] = minorOf(ciliumVersion)
  const tested = KUBERNETES_TESTED_BY_CILIUM_MINOR[`${cMajor}.${cMinor}`]
  if (!tested) return undefined
  const [oMajor, oMinor] = minorOf(tested.oldest)
  const [nMajor, nMinor] = minorOf(tested.newest)
  const k = kube.major * 1000 + kube.minor
  if (k >= oMajor * 1000 + oMinor && k <= nMajor * 1000 + nMinor) return undefined
  return `warning: Kubernetes ${kube.major}.${kube.minor} is outside the versions Cilium ${cMajor}.${cMinor} is tested on (${tested.oldest} to ${tested.newest}, Cilium's Kubernetes compatibility table at ${tested.source}); it may work, but nobody tested it`
}
