// Which Cilium versions a release may move to, as Cilium's upgrade guide
// (Documentation/operations/upgrade.rst) puts it: never down, one minor at a time, and
// first to the newest patch of the minor it runs. Pure functions over version strings.
import {compareVersions} from '../assets/resolve.js'
import {knownCiliumCharts} from '../compatibility/queries.js'

const knownCiliumVersions = (): string[] => knownCiliumCharts().map((c) => c.version)

interface Semver {
  major: number
  minor: number
  patch: number
}

export function parseCiliumVersion(v: string): Semver | undefined {
  const m = /^v?(\d+)\.(\d+)\.(\d+)(?:[-+].*)?$/.exec(v.trim())
  return m ? {major: Number(m[1]), minor: Number(m[2]), patch: Number(m[3])} : undefined
}

/** "1.18" of "1.18.0": what Cilium's upgradeCompatibility value takes. */
export function minorOf(v: string): string {
  const s = parseCiliumVersion(v)
  return s ? `${s.major}.${s.minor}` : v
}

export type UpgradeVerdict =
  /** Same version: nothing to upgrade (a rerun finishing an interrupted upgrade). */
  {kind: 'same'} | {kind: 'patch' | 'minor'; warnings: string[]} | {kind: 'refused'; reason: string}

export interface JudgeOptions {
  /** The versions ichor knows, for the minors in between and the newest patch of a minor. */
  known?: readonly string[]
  /** --skip-patch-check: a minor step from an older patch goes on with a warning instead of a refusal. */
  skipPatchCheck?: boolean
}

/** The flag that lets a minor step start from an older patch of the current minor. */
const SKIP_PATCH_CHECK_FLAG = '--skip-patch-check'

/**
 * The upgrade guide's rules on the move from `installed` to `target`. Cilium's guide
 * (cilium/cilium Documentation/operations/upgrade-warning.rst, included by upgrade.rst,
 * v1.20.2: "Always update to the latest patch release of your current version before
 * attempting an upgrade") makes the newest known patch of the current minor the only start
 * of a minor step.
 */
export function judgeCiliumUpgrade(installed: string, target: string, opts: JudgeOptions = {}): UpgradeVerdict {
  const known = opts.known ?? knownCiliumVersions()
  const from = parseCiliumVersion(installed)
  const to = parseCiliumVersion(target)
  if (!from) return {kind: 'refused', reason: `the release runs Cilium "${installed}", which is not a version ichor can compare`}
  if (!to) return {kind: 'refused', reason: `"${target}" is not a Cilium version (expected MAJOR.MINOR.PATCH, e.g. 1.19.6)`}
  const cmp = compareVersions(target, installed)
  if (cmp === 0) return {kind: 'same'}
  if (cmp < 0) {
    return {
      kind: 'refused',
      reason: `${target} is older than the installed ${installed}: Cilium is never downgraded (its upgrade guide); to go back, use helm rollback to a revision that ran it`,
    }
  }
  if (to.major !== from.major || to.minor - from.minor > 1) {
    const between = minorsBetween(from, to, known)
    return {
      kind: 'refused',
      reason: `${installed} to ${target} skips ${between.skipped.join(', ')}: Cilium upgrades one minor at a time; upgrade to ${between.steps.join(', then ')} first`,
    }
  }
  const warnings: string[] = []
  const newestPatch = newestPatchOf(installed, known)
  if (to.minor !== from.minor && newestPatch && compareVersions(newestPatch, installed) > 0) {
    const why = `the installed ${installed} is not the newest ${minorOf(installed)} patch ichor knows (${newestPatch}); Cilium's upgrade guide moves to the latest patch of the current minor before a minor upgrade`
    if (!opts.skipPatchCheck)
      return {
        kind: 'refused',
        reason: `${why}: upgrade to ${newestPatch} first (ichor cni upgrade --to ${newestPatch}), or pass ${SKIP_PATCH_CHECK_FLAG} to go on from ${installed}`,
      }
    warnings.push(`${why}; going on from ${installed} (${SKIP_PATCH_CHECK_FLAG})`)
  }
  return {kind: to.minor === from.minor ? 'patch' : 'minor', warnings}
}

/** The newest known patch of `version`'s minor (the version itself when it is newer than all known). */
function newestPatchOf(version: string, known: readonly string[] = knownCiliumVersions()): string | undefined {
  const minor = minorOf(version)
  const same = known.filter((k) => minorOf(k) === minor && !k.includes('-'))
  same.sort((a, b) => compareVersions(b, a))
  return same[0]
}

/** Where an installed version can go next: the newest known patch of its minor, else of the next minor. */
export function nextCiliumUpgrade(installed: string, known: readonly string[] = knownCiliumVersions()): string | undefined {
  const patch = newestPatchOf(installed, known)
  if (patch && compareVersions(patch, installed) > 0) return patch
  const s = parseCiliumVersion(installed)
  if (!s) return undefined
  return newestPatchOf(`${s.major}.${s.minor + 1}.0`, known)
}

function minorsBetween(from: Semver, to: Semver, known: readonly string[]): {skipped: string[]; steps: string[]} {
  const skipped: string[] = []
  const steps: string[] = []
  if (to.major === from.major) {
    for (let m = from.minor + 1; m < to.minor; m++) {
      skipped.push(`${from.major}.${m}`)
      steps.push(newestPatchOf(`${from.major}.${m}.0`, known) ?? `the newest ${from.major}.${m} patch`)
    }
  } else {
    skipped.push(`the minors between ${from.major}.${from.minor} and ${to.major}.${to.minor}`)
    const next = newestPatchOf(`${from.major}.${from.minor + 1}.0`, known)
    steps.push(next ?? `the newest ${from.major}.${from.minor + 1} patch`)
  }
  return {skipped, steps}
}

/**
 * helm's wait budget for an upgrade: the operator's timeout plus one batch time per group
 * of agents the DaemonSet replaces at once (maxUnavailable, the chart's default 2), so a
 * rollback never starts in the middle of a healthy but slow rollout on many nodes.
 */
export function upgradeWaitSeconds(p: {baseSeconds: number; nodes: number; maxUnavailable?: number; perBatchSeconds?: number}): number {
  const batches = Math.ceil(Math.max(p.nodes, 1) / Math.max(p.maxUnavailable ?? 2, 1))
  return p.baseSeconds + batches * (p.perBatchSeconds ?? 120)
}
