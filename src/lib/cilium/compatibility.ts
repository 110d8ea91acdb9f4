// The Kubernetes minors each Cilium minor is e2e tested on, as compatibility.json records them
// (the k8s Version column of Cilium's Documentation/network/kubernetes/compatibility.rst, one
// row per minor: Cilium keeps that list fixed for a release branch's whole maintenance period).
// Cilium does not refuse other versions ("older and newer Kubernetes versions ... depend on the
// forward / backward compatibility offered by Kubernetes"), so init warns and goes on, and
// `kubernetes upgrade` asks for --allow-untested.
import {kubernetesRangeOfTalos, testedKubernetesByCiliumMinor, testedKubernetesOfCilium, type TestedKubernetes} from '../compatibility/queries.js'
import {parseKubernetesVersion, type KubernetesVersion, type SemVer} from '../talos/versions.js'
import {minorOf, nextCiliumUpgrade} from './versions.js'

const minorNumbers = (text: string) => text.split('.').slice(0, 2).map(Number) as [number, number]

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
  const [cMajor, cMinor] = minorNumbers(ciliumVersion)
  const tested = testedKubernetesOfCilium(`${cMajor}.${cMinor}`)
  if (!tested) return undefined
  const [oMajor, oMinor] = minorNumbers(tested.oldest)
  const [nMajor, nMinor] = minorNumbers(tested.newest)
  const k = kube.major * 1000 + kube.minor
  if (k >= oMajor * 1000 + oMinor && k <= nMajor * 1000 + nMinor) return undefined
  const what = `Kubernetes ${kube.major}.${kube.minor} is outside the versions Cilium ${cMajor}.${cMinor} is tested on (${tested.oldest} to ${tested.newest}; ${tested.source}); it may work, but nobody tested it`
  return `${what}: ${whatToDo(tested, talos)}`
}

/** The newest tested Kubernetes minor the Talos version runs, as a flag to pass; or what else is left. */
function whatToDo(tested: TestedKubernetes, talos: Pick<SemVer, 'major' | 'minor'> | undefined): string {
  const range = talos ? kubernetesRangeOfTalos(`${talos.major}.${talos.minor}`) : undefined
  const rankOf = (text: string) => {
    const [major, minor] = minorNumbers(text)
    return major * 1000 + minor
  }
  const newest = range ? Math.min(rankOf(tested.newest), rankOf(range.max)) : rankOf(tested.newest)
  const oldest = range ? Math.max(rankOf(tested.oldest), rankOf(range.min)) : rankOf(tested.oldest)
  if (newest < oldest)
    return `no Kubernetes minor is both tested by this Cilium and run by Talos v${talos!.major}.${talos!.minor}; go on knowingly, or pick a Cilium chart tested on your Kubernetes (--cilium-chart)`
  const flag = `--kubernetes-version ${Math.floor(newest / 1000)}.${newest % 1000}.N`
  return `to stay on a tested combination pass ${flag} (the newest tested minor${talos ? ` that Talos v${talos.major}.${talos.minor} runs` : ''}), or go on knowingly`
}

// The table as `kubernetes upgrade` (kubernetes/policy.ts) and `cni status` read it.
const asMinor = (v: Pick<KubernetesVersion, 'major' | 'minor'>) => v.major * 1000 + v.minor
const parseMinor = (text: string) => {
  const [major, minor] = text.split('.').map(Number) as [number, number]
  return {major, minor}
}

/** Why Kubernetes `to` is outside the Cilium minor's tested range, and the cni upgrades that fix it; undefined inside. */
export function ciliumUntested(
  ciliumVersion: string,
  to: Pick<KubernetesVersion, 'major' | 'minor'>,
): {message: string; fix: string; cilium?: string} | undefined {
  const minor = minorOf(ciliumVersion)
  const table = testedKubernetesByCiliumMinor()
  const tested = table[minor]
  const k = `${to.major}.${to.minor}`
  const covering = Object.entries(table)
    .filter(([, t]) => asMinor(parseMinor(t.oldest)) <= asMinor(to) && asMinor(to) <= asMinor(parseMinor(t.newest)))
    .map(([m]) => m)
    .sort((a, b) => asMinor(parseMinor(a)) - asMinor(parseMinor(b)))
  if (tested && asMinor(parseMinor(tested.oldest)) <= asMinor(to) && asMinor(to) <= asMinor(parseMinor(tested.newest))) return undefined
  const message = tested
    ? `Cilium ${minor} is tested on Kubernetes ${tested.oldest} to ${tested.newest}, not ${k} (${tested.source})`
    : `no tested Kubernetes range is known for Cilium ${minor} (ichor knows ${Object.keys(table).join(', ')})`
  const target = covering.find((m) => asMinor(parseMinor(m)) > asMinor(parseMinor(minor)))
  if (!target) return {message, fix: `no Cilium minor ichor knows is tested on Kubernetes ${k}`}
  // The cni upgrade steps, as its own policy takes them: newest patch first, one minor at a time.
  const steps: string[] = []
  for (let v: string | undefined = ciliumVersion; v && minorOf(v) !== target;) {
    v = nextCiliumUpgrade(v)
    if (v) steps.push(`ichor cni upgrade --to ${v}`)
  }
  return {message, fix: `upgrade Cilium to ${target} first: ${steps.join(', then ')}`, cilium: target}
}

/** What `cni status` says about the next Kubernetes minor. */
export function nextMinorNeedsCilium(
  ciliumVersion: string,
  kubernetes: string,
): {next: string; needsCiliumUpgrade: boolean; cilium?: string; message?: string} {
  const k = parseKubernetesVersion(kubernetes)
  const next = {major: k.major, minor: k.minor + 1}
  const untested = ciliumUntested(ciliumVersion, next)
  if (!untested) return {next: `${next.major}.${next.minor}`, needsCiliumUpgrade: false}
  return {next: `${next.major}.${next.minor}`, needsCiliumUpgrade: true, cilium: untested.cilium, message: `${untested.message}; ${untested.fix}`}
}
