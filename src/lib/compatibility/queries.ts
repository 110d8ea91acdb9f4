// The questions the policies ask of the compatibility data (compatibility.json), by minor key
// ("1.14", "1.36", "1.20"). Pure lookups over compatibility(); the rules that use them live in
// the policies (talos-upgrade, kubernetes, cilium).
import {compatibility} from './data.js'

export interface KubernetesRange {
  min: string
  max: string
  source: string
}

export interface TestedKubernetes {
  /** Oldest and newest tested Kubernetes minor, "MAJOR.MINOR". */
  oldest: string
  newest: string
  source: string
}

/** A minor ("1.36") as a number that orders minors, and the minor after it. */
export function minorRank(minorKey: string): number {
  const [major, minor] = minorKey.split('.').map(Number) as [number, number]
  return major * 1000 + minor
}
export function nextMinorOf(minorKey: string): string {
  const [major, minor] = minorKey.split('.').map(Number) as [number, number]
  return `${major}.${minor + 1}`
}

/** "1.14" of "v1.14.1", "1.36" of "1.36.3". */
export function minorKeyOf(version: string): string {
  return version.replace(/^v/, '').split('.').slice(0, 2).join('.')
}

/** The Kubernetes versions a Talos minor runs. */
export function kubernetesRangeOfTalos(talosMinor: string): KubernetesRange | undefined {
  const row = compatibility().talos.minors[talosMinor]
  return row && {...row.kubernetes, source: row.source}
}

/** The newest Talos patch ichor knows of a minor ("v1.13.9"). */
export function newestTalosPatch(talosMinor: string): string | undefined {
  return compatibility().talos.minors[talosMinor]?.newestPatch
}

/** The newest Kubernetes patch ichor knows of a minor ("1.36.3"). */
export function newestKubernetesPatch(kubernetesMinor: string): string | undefined {
  return compatibility().kubernetes.minors[kubernetesMinor]?.newestPatch
}

/** The Kubernetes minors a Cilium minor is e2e tested on. */
export function testedKubernetesOfCilium(ciliumMinor: string): TestedKubernetes | undefined {
  const row = compatibility().cilium.minors[ciliumMinor]
  return row && {...row.testedKubernetes, source: row.source}
}

/** Every Cilium minor's tested range, keyed by minor. */
export function testedKubernetesByCiliumMinor(): Record<string, TestedKubernetes> {
  return Object.fromEntries(Object.keys(compatibility().cilium.minors).map((m) => [m, testedKubernetesOfCilium(m)!]))
}

/** The Cilium chart versions ichor knows, with the digest the cilium/charts index records. */
export function knownCiliumCharts(): readonly {version: string; sha256: string}[] {
  return compatibility().cilium.charts
}

/** The Kubernetes minors inside both ranges, oldest first ("1.33", …). */
export function kubernetesMinorsOf(talosMinor: string, ciliumMinor: string): string[] {
  const talos = kubernetesRangeOfTalos(talosMinor)
  const cilium = testedKubernetesOfCilium(ciliumMinor)
  if (!talos || !cilium) return []
  const low = Math.max(minorRank(minorKeyOf(talos.min)), minorRank(cilium.oldest))
  const high = Math.min(minorRank(minorKeyOf(talos.max)), minorRank(cilium.newest))
  const out: string[] = []
  for (let r = low; r <= high; r++) out.push(`${Math.floor(r / 1000)}.${r % 1000}`)
  return out
}

/**
 * The default Kubernetes for a Talos and Cilium pair: the newest patch ichor knows of the newest
 * minor that Talos runs and Cilium is tested on; undefined when no minor is both.
 */
export function defaultKubernetesFor(talosVersion: string, ciliumVersion: string): string | undefined {
  const minors = kubernetesMinorsOf(minorKeyOf(talosVersion), minorKeyOf(ciliumVersion)).reverse()
  for (const m of minors) {
    const patch = newestKubernetesPatch(m)
    if (patch) return patch
  }
  return undefined
}

/** The rules' sources, for a planner that names why a hop comes first. */
export function upgradePathRules() {
  const c = compatibility()
  return {talos: c.talos.upgradePath, kubernetes: c.kubernetes.upgradePath, cilium: c.cilium.upgradePath}
}
