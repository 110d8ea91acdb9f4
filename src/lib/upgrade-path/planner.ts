// The upgrade planner (`ichor upgrade plan`, `cni status`'s next upgrade): from what the cluster runs to a target combination, the ordered
// hops each upgrade command takes, every one allowed by the rules the commands themselves apply
// (compatibility.json): Talos and Cilium leave a minor from its newest patch and move one minor
// at a time; Kubernetes moves one minor at a time, only to a minor the running Talos runs and the
// running Cilium is tested on; a Talos minor needs the running Kubernetes inside its range; a
// Cilium minor needs the running Kubernetes inside its tested range. Nothing goes down. Pure.
import {pinnedAssets} from '../assets/lock.js'
import {compareVersions} from '../assets/resolve.js'
import {compatibility} from '../compatibility/data.js'
import {
  kubernetesRangeOfTalos,
  knownCiliumCharts,
  minorKeyOf,
  minorRank,
  newestKubernetesPatch,
  nextMinorOf,
  newestTalosPatch,
  testedKubernetesOfCilium,
  upgradePathRules,
} from '../compatibility/queries.js'
import {DEFAULT_TALOS_VERSION, defaultKubernetesVersion, SUPPORTED_TALOS} from '../talos/versions.js'

export type Component = 'talos' | 'cilium' | 'kubernetes'

export interface Versions {
  /** "v1.14.1" */
  talos: string
  /** "1.36.3" */
  kubernetes: string
  /** "1.20.0" */
  cilium: string
}

export interface Hop {
  component: Component
  from: string
  to: string
  /** The exact command that makes the hop. */
  command: string
  /** Why this hop, and why now (what it comes before). */
  why: string
  /** Where the rule comes from (compatibility.json's row or path rule). */
  source: string
}

export interface UpgradePlan {
  current: Versions
  target: Versions
  hops: Hop[]
  /** Why the target cannot be reached from here with the rules ichor knows; the hops up to there are still right. */
  blocked?: string
}

type Candidate = {hop: Hop} | {blockedBy: Component; need: string; because: string} | undefined

const newer = (a: string, b: string) => compareVersions(a, b) > 0
const rangeText = (r: {min: string; max: string}) => `${minorKeyOf(r.min)} to ${minorKeyOf(r.max)}`

const COMMAND: Record<Component, string> = {talos: 'ichor talos upgrade', cilium: 'ichor cni upgrade', kubernetes: 'ichor kubernetes upgrade'}

function hopOf(component: Component, from: string, to: string, why: string, source: string): {hop: Hop} {
  return {hop: {component, from, to, command: `${COMMAND[component]} --to ${to}`, why, source}}
}

/**
 * What every component does first: inside the target's minor, the target itself (or nothing when
 * it runs it or newer); past the target's minor, nothing; below it, 'minor' (the component's own
 * rules say how it leaves its minor).
 */
function withinTarget(c: Component, s: Versions, target: Versions): Candidate | 'minor' {
  const minor = minorKeyOf(s[c])
  if (minor === minorKeyOf(target[c]))
    return newer(target[c], s[c]) ? hopOf(c, s[c], target[c], `the target, ${target[c]}`, upgradePathRules()[c].source) : undefined
  return minorRank(minor) > minorRank(minorKeyOf(target[c])) ? undefined : 'minor'
}

function newestCiliumPatch(minor: string): string | undefined {
  return knownCiliumCharts()
    .map((c) => c.version)
    .filter((v) => minorKeyOf(v) === minor)
    .sort((a, b) => compareVersions(b, a))[0]
}

/** Talos and Cilium leave a minor from its newest patch (their upgrade guides): that patch first, when one is newer. */
function newestPatchHop(c: 'talos' | 'cilium', s: Versions, newest: string | undefined): {hop: Hop} | undefined {
  if (!newest || !newer(newest, s[c])) return undefined
  return hopOf(c, s[c], newest, `the newest ${versionText(c, s[c])} patch: a ${NAMES[c]} minor is left from it`, upgradePathRules()[c].source)
}

/** The next Talos hop, or what it waits for. */
function nextTalos(s: Versions, target: Versions): Candidate {
  const first = withinTarget('talos', s, target)
  if (first !== 'minor') return first
  const minor = minorKeyOf(s.talos)
  const patch = newestPatchHop('talos', s, newestTalosPatch(minor))
  if (patch) return patch
  const n = nextMinorOf(minor)
  const range = kubernetesRangeOfTalos(n)
  const to = n === minorKeyOf(target.talos) ? target.talos : newestTalosPatch(n)
  if (!range || !to) return {blockedBy: 'talos', need: n, because: `ichor knows no Talos v${n} release`}
  if (compareVersions(s.kubernetes, range.min) < 0)
    return {blockedBy: 'kubernetes', need: minorKeyOf(range.min), because: `Talos v${n} runs Kubernetes ${rangeText(range)}`}
  return hopOf('talos', s.talos, to, `the next Talos minor toward ${target.talos} (one at a time); v${n} runs Kubernetes ${rangeText(range)}`, range.source)
}

/** The next Cilium hop, or what it waits for. */
function nextCilium(s: Versions, target: Versions): Candidate {
  const first = withinTarget('cilium', s, target)
  if (first !== 'minor') return first
  const minor = minorKeyOf(s.cilium)
  const patch = newestPatchHop('cilium', s, newestCiliumPatch(minor))
  if (patch) return patch
  const n = nextMinorOf(minor)
  const tested = testedKubernetesOfCilium(n)
  const to = n === minorKeyOf(target.cilium) ? target.cilium : newestCiliumPatch(n)
  if (!tested || !to) return {blockedBy: 'cilium', need: n, because: `ichor knows no Cilium ${n} chart`}
  if (minorRank(minorKeyOf(s.kubernetes)) < minorRank(tested.oldest))
    return {blockedBy: 'kubernetes', need: tested.oldest, because: `Cilium ${n} is tested on Kubernetes ${tested.oldest} to ${tested.newest}`}
  return hopOf(
    'cilium',
    s.cilium,
    to,
    `the next Cilium minor toward ${target.cilium} (one at a time); ${n} is tested on Kubernetes ${tested.oldest} to ${tested.newest}`,
    tested.source,
  )
}

/** The next Kubernetes hop, or what it waits for. */
function nextKubernetes(s: Versions, target: Versions): Candidate {
  const first = withinTarget('kubernetes', s, target)
  if (first !== 'minor') return first
  const n = nextMinorOf(minorKeyOf(s.kubernetes))
  const talosMinor = minorKeyOf(s.talos)
  const range = kubernetesRangeOfTalos(talosMinor)
  if (!range || minorRank(n) > minorRank(minorKeyOf(range.max)))
    return {blockedBy: 'talos', need: n, because: `Talos v${talosMinor} runs Kubernetes ${range ? rangeText(range) : 'versions ichor does not know'}`}
  const tested = testedKubernetesOfCilium(minorKeyOf(s.cilium))
  if (!tested || minorRank(n) > minorRank(tested.newest))
    return {
      blockedBy: 'cilium',
      need: n,
      because: tested
        ? `Cilium ${minorKeyOf(s.cilium)} is tested on Kubernetes ${tested.oldest} to ${tested.newest}`
        : `no tested range is known for Cilium ${minorKeyOf(s.cilium)}`,
    }
  const to = n === minorKeyOf(target.kubernetes) ? target.kubernetes : (newestKubernetesPatch(n) ?? `${n}.0`)
  return hopOf('kubernetes', s.kubernetes, to, `the next Kubernetes minor toward ${target.kubernetes} (one at a time)`, upgradePathRules().kubernetes.source)
}

const NAMES: Record<Component, string> = {talos: 'Talos', cilium: 'Cilium', kubernetes: 'Kubernetes'}
const versionText = (c: Component, v: string) => (c === 'talos' ? `v${minorKeyOf(v)}` : minorKeyOf(v))

/** The hops from `current` to `target` (each component kept where it is when it is already newer). */
export function planUpgrade(current: Versions, wanted: Versions): UpgradePlan {
  const target: Versions = {
    talos: newer(current.talos, wanted.talos) ? current.talos : wanted.talos,
    kubernetes: newer(current.kubernetes, wanted.kubernetes) ? current.kubernetes : wanted.kubernetes,
    cilium: newer(current.cilium, wanted.cilium) ? current.cilium : wanted.cilium,
  }
  const hops: Hop[] = []
  let s = {...current}
  // Each hop moves one component forward, so the loop ends; the bound is a guard against bad data.
  for (let i = 0; i < 64; i++) {
    const candidates: Record<Component, Candidate> = {talos: nextTalos(s, target), cilium: nextCilium(s, target), kubernetes: nextKubernetes(s, target)}
    const waiting = (Object.entries(candidates) as [Component, Candidate][]).filter(
      (e): e is [Component, {blockedBy: Component; need: string; because: string}] => Boolean(e[1] && 'blockedBy' in e[1]),
    )
    const order: Component[] = ['talos', 'cilium', 'kubernetes']
    const next = order.map((c) => candidates[c]).find((c): c is {hop: Hop} => Boolean(c && 'hop' in c))
    if (!next) {
      if (waiting.length === 0) return {current, target, hops}
      const reasons = waiting.map(([c, w]) => `${NAMES[c]} ${versionText(c, s[c])} cannot move on: ${w.because}`)
      return {current, target, hops, blocked: reasons.join('; ')}
    }
    const hop = {...next.hop}
    // Say which waiting component this hop unblocks ("Kubernetes 1.36 needs Cilium 1.20 first").
    const unblocks = waiting.filter(([, w]) => w.blockedBy === hop.component)
    if (unblocks.length > 0) {
      const minorMove = minorKeyOf(hop.to) !== minorKeyOf(hop.from)
      const before = unblocks.map(([c, w]) =>
        minorMove
          ? `${NAMES[c]} ${nextOf(c, s)} needs ${NAMES[hop.component]} ${versionText(hop.component, hop.to)} first: ${w.because}`
          : `${NAMES[c]} ${nextOf(c, s)} waits for ${NAMES[hop.component]}'s next minor: ${w.because}`,
      )
      hop.why = `${before.join('; ')}. ${capitalise(hop.why)}`
    }
    hops.push(hop)
    s = {...s, [hop.component]: hop.to}
  }
  return {current, target, hops, blocked: 'the plan did not end within 64 hops (the compatibility data contradicts itself)'}
}

/** The version a waiting component wants next, for the reason text. */
function nextOf(c: Component, s: Versions): string {
  const n = nextMinorOf(minorKeyOf(s[c]))
  return c === 'talos' ? `v${n}` : n
}

const capitalise = (text: string) => text.charAt(0).toUpperCase() + text.slice(1)

/**
 * The plan from what a cluster runs toward this ichor's default set (`cni status` and `ichor
 * status` name its first hops); a version that was not read is taken as the default's.
 */
export function planToDefault(running: {talos?: string; kubernetes?: string; cilium: string}): UpgradePlan {
  const target = defaultTarget()
  return planUpgrade({talos: running.talos ?? target.talos, kubernetes: running.kubernetes ?? target.kubernetes, cilium: running.cilium}, target)
}

/** The oldest of the versions given ("v1.13.9", "1.33.6"); what is not a string (an unread node's error) is left out. */
export function oldestOf(versions: Iterable<unknown>): string | undefined {
  return [...versions].filter((v): v is string => typeof v === 'string' && v !== '').sort(compareVersions)[0]
}

/** This ichor's default combination: what a fresh `ichor init` installs (the tested default set). */
export function defaultTarget(): Versions {
  return {talos: DEFAULT_TALOS_VERSION, kubernetes: defaultKubernetesVersion(), cilium: pinnedAssets().cilium.version}
}

/** The newest combination the compatibility data allows (--to-latest): its newest Talos and Cilium, and the newest Kubernetes both allow. */
export function latestTarget(): Versions {
  const supported = minorRank(minorKeyOf(SUPPORTED_TALOS.newestMinor))
  const talosMinors = Object.keys(compatibility().talos.minors).filter((m) => minorRank(m) <= supported)
  talosMinors.sort((a, b) => minorRank(b) - minorRank(a))
  const talos = newestTalosPatch(talosMinors[0]!)!
  const cilium = knownCiliumCharts()
    .map((c) => c.version)
    .sort((a, b) => compareVersions(b, a))[0]!
  return {talos, kubernetes: defaultKubernetesVersion(talos, cilium), cilium}
}
