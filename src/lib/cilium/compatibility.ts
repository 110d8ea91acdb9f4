// The Kubernetes minors each Cilium minor is e2e tested on. Cilium does not refuse other
// versions ("older and newer Kubernetes versions ... depend on the forward / backward
// compatibility offered by Kubernetes"), so ichor warns and goes on.
// Source: the k8s Version column of Documentation/network/kubernetes/compatibility.rst in
// cilium/cilium at the tag named per row. Cilium keeps that list fixed for a release branch's
// whole maintenance period, so one patch's table stands for the minor.
import {KUBERNETES_RANGE_BY_TALOS_MINOR, type SemVer} from '../talos/versions.js'

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
 * A warning when Kubernetes `kube` is outside the range the Cilium chart's minor is tested on,
 * saying what to do (the newest tested minor that Talos `talos` also runs); undefined inside
 * it, and for a Cilium minor whose table is not recorded here. No "warning: " prefix: callers
 * print it with one and keep it bare in a --json result's `warnings`.
 */
export function kubernetesCompatibilityWarning(
  ciliumVersion: string,
  kube: Pick<SemVer, 'major' | 'minor'>,
  talos?: Pick<SemVer, 'major' | 'minor'>,
): string | undefined {
  const [cMajor, cMinor] = minorOf(ciliumVersion)
  const tested = KUBERNETES_TESTED_BY_CILIUM_MINOR[`${cMajor}.${cMinor}`]
  if (!tested) return undefined
  const [oMajor, oMinor] = minorOf(tested.oldest)
  const [nMajor, nMinor] = minorOf(tested.newest)
  const k = kube.major * 1000 + kube.minor
  if (k >= oMajor * 1000 + oMinor && k <= nMajor * 1000 + nMinor) return undefined
  const what = `Kubernetes ${kube.major}.${kube.minor} is outside the versions Cilium ${cMajor}.${cMinor} is tested on (${tested.oldest} to ${tested.newest}, Cilium's Kubernetes compatibility table at ${tested.source}); it may work, but nobody tested it`
  return `${what}: ${whatToDo(tested, talos)}`
}

/** The newest tested Kubernetes minor the Talos version runs, as a flag to pass; or what else is left. */
function whatToDo(tested: TestedKubernetes, talos: Pick<SemVer, 'major' | 'minor'> | undefined): string {
  const range = talos ? KUBERNETES_RANGE_BY_TALOS_MINOR[`${talos.major}.${talos.minor}`] : undefined
  const asMinor = (text: string) => {
    const [major, minor] = minorOf(text)
    return major * 1000 + minor
  }
  const newest = range ? Math.min(asMinor(tested.newest), asMinor(range.max)) : asMinor(tested.newest)
  const oldest = range ? Math.max(asMinor(tested.oldest), asMinor(range.min)) : asMinor(tested.oldest)
  if (newest < oldest)
    return `no Kubernetes minor is both tested by this Cilium and run by Talos v${talos!.major}.${talos!.minor}; go on knowingly, or pick a Cilium chart tested on your Kubernetes (--cilium-chart)`
  const flag = `--kubernetes-version ${Math.floor(newest / 1000)}.${newest % 1000}.N`
  return `to stay on a tested combination pass ${flag} (the newest tested minor${talos ? ` that Talos v${talos.major}.${talos.minor} runs` : ''}), or go on knowingly`
}
