// `ichor talos upgrade`'s rules, checked before anything runs (pure functions):
//   - never down: a node newer than the target is refused (`talosctl rollback` returns a node to
//     the slot it booted before);
//   - one minor at a time, and a minor is left from its newest patch: Talos's upgrade notes
//     (docs "Upgrading Talos Linux": upgrade to the latest patch of the current minor, then to
//     the next minor); "newest" is the newest patch ichor knows (compatibility.json);
//   - the target's Talos runs the cluster's Kubernetes (compatibility.json's Talos rows), else
//     the `ichor kubernetes upgrade` that comes first is named.
// And the installer image a node is upgraded with: the one its machine config installed it
// with, at the target's tag, so an Image Factory schematic keeps its extensions.
import {kubernetesRangeOfTalos, newestTalosPatch} from '../compatibility/queries.js'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import {compareVersions, parseKubernetesVersion, parseTalosVersion, requireSupportedTalosVersion, type TalosVersion} from '../talos/versions.js'

export interface TalosUpgradeInput {
  /** --to */
  to: string
  /** What each node (in upgrade order) says it runs. */
  nodes: {node: string; version: string}[]
  /** The lowest Kubernetes version the control planes run. */
  kubernetesVersion: string
}

export interface TalosUpgradeVerdict {
  to: string
  /** The nodes still to upgrade, in order. */
  behind: string[]
  /** Nodes already at the target (upgraded earlier, by this command or by hand). */
  atTarget: string[]
}

const minorKey = (v: Pick<TalosVersion, 'major' | 'minor'>) => `${v.major}.${v.minor}`

function usage(message: string, hint?: string): IchorError {
  return new IchorError(message, {exitCode: EXIT.usage, hint})
}

/** The verdict, or an IchorError (exit 2) naming --to, the node and what to do instead. */
export function checkTalosUpgrade(i: TalosUpgradeInput): TalosUpgradeVerdict {
  let to: TalosVersion
  try {
    to = requireSupportedTalosVersion(parseTalosVersion(i.to))
  } catch (e) {
    if (e instanceof IchorError) throw usage(e.message.replace(/^--talos-version:/, '--to:'))
    throw e
  }
  const behind: string[] = []
  const atTarget: string[] = []
  for (const n of i.nodes) {
    const from = parseTalosVersion(n.version)
    const order = compareVersions(to, from)
    if (order === 0) {
      atTarget.push(n.node)
      continue
    }
    if (order < 0)
      throw usage(
        `--to: ${to.tag} is older than the ${from.tag} node ${n.node} runs: ichor never downgrades Talos`,
        `talosctl rollback -n ${n.node} boots the node's previous slot; leave --to at ${from.tag} or newer`,
      )
    const minors = (to.major - from.major) * 1000 + (to.minor - from.minor)
    if (minors > 1) {
      const next = newestTalosPatch(minorKey(from)) ?? `v${from.major}.${from.minor}.x`
      throw usage(
        `--to: node ${n.node} runs ${from.tag}; ${to.tag} skips a minor: Talos upgrades one minor at a time`,
        `ichor talos upgrade --to ${nextMinorTarget(from, next)} first`,
      )
    }
    if (minors === 1) {
      const newest = newestTalosPatch(minorKey(from))
      if (newest && compareVersions(from, parseTalosVersion(newest)) < 0)
        throw usage(
          `--to: node ${n.node} runs ${from.tag}; a minor is left from its newest patch (${newest}), as Talos's upgrade notes say`,
          `ichor talos upgrade --to ${newest} first, then --to ${to.tag}`,
        )
    }
    behind.push(n.node)
  }
  if (behind.length > 0) requireKubernetesRuns(to, i.kubernetesVersion)
  return {to: to.tag, behind, atTarget}
}

/** Where a node two minors behind goes first: the newest patch of its own minor, unless it runs it already. */
function nextMinorTarget(from: TalosVersion, newestOfMinor: string): string {
  if (!/x$/.test(newestOfMinor) && compareVersions(from, parseTalosVersion(newestOfMinor)) < 0) return newestOfMinor
  return newestTalosPatch(`${from.major}.${from.minor + 1}`) ?? `v${from.major}.${from.minor + 1}.x`
}

function requireKubernetesRuns(to: TalosVersion, kubernetes: string): void {
  const range = kubernetesRangeOfTalos(minorKey(to))
  if (!range) throw usage(`--to: no Kubernetes range is known for Talos ${to.tag}`)
  const k = parseKubernetesVersion(kubernetes)
  if (compareVersions(k, parseKubernetesVersion(range.min)) < 0) {
    const min = parseKubernetesVersion(range.min)
    throw usage(
      `--to: Talos ${to.tag} runs Kubernetes ${range.min} to ${range.max.replace(/\.99$/, '.x')}; the cluster runs ${k.version}`,
      `upgrade Kubernetes first: ichor kubernetes upgrade --to ${k.major}.${k.minor + 1}.N (one minor at a time, up to ${min.major}.${min.minor})`,
    )
  }
  if (compareVersions(k, parseKubernetesVersion(range.max)) > 0)
    throw usage(`--to: Talos ${to.tag} runs Kubernetes ${range.min} to ${range.max.replace(/\.99$/, '.x')}; the cluster runs ${k.version}`)
}

/** The same image at another tag (a digest pins the old release, so it goes). */
export function retagImage(image: string, tag: string): string {
  const withoutDigest = image.replace(/@[^@]*$/, '')
  const slash = withoutDigest.lastIndexOf('/')
  const colon = withoutDigest.lastIndexOf(':')
  const repository = colon > slash ? withoutDigest.slice(0, colon) : withoutDigest
  return `${repository}:${tag}`
}
