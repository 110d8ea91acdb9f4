// `ichor kubernetes upgrade`'s rules, checked before anything runs (pure functions):
//   - the target runs on the installed Talos minor (compatibility.json's Talos rows);
//   - one minor at a time, never down: Kubernetes' version skew policy, and what talosctl
//     accepts (go-kubernetes v0.2.41 kubernetes/upgrade/path.go `IsSupported`: only
//     "1.N->1.N" and "1.N->1.N+1");
//   - inside the installed Cilium minor's tested range (cilium/compatibility.ts), else refused
//     naming the `ichor cni upgrade` steps that make it compatible, or --allow-untested.
// And the reading of `talosctl upgrade-k8s --dry-run`, which the prune guard relies on.
import {ciliumUntested} from '../cilium/compatibility.js'
import {minorOf} from '../cilium/versions.js'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import {kubernetesRangeOfTalos} from '../compatibility/queries.js'
import {compareVersions, parseKubernetesVersion, parseTalosVersion, type KubernetesVersion} from '../talos/versions.js'

const ALLOW_UNTESTED_FLAG = '--allow-untested'

export interface KubernetesUpgradeInput {
  /** The lowest Kubernetes version the control planes run. */
  from: string
  /** --to */
  to: string
  talosVersion: string
  /** The Cilium chart version the release runs. */
  ciliumVersion: string
  allowUntested: boolean
}

export type KubernetesUpgradeVerdict = {kind: 'same' | 'patch' | 'minor'; from: string; to: string; warnings: string[]}

const asMinor = (v: Pick<KubernetesVersion, 'major' | 'minor'>) => v.major * 1000 + v.minor

function usage(message: string, hint?: string): IchorError {
  return new IchorError(message, {exitCode: EXIT.usage, hint})
}

/** The verdict, or an IchorError (exit 2) naming the flag, the range and what to do instead. */
export function checkKubernetesUpgrade(i: KubernetesUpgradeInput): KubernetesUpgradeVerdict {
  const to = withFlag('--to', () => parseKubernetesVersion(i.to))
  const from = parseKubernetesVersion(i.from)
  const talos = parseTalosVersion(i.talosVersion)
  const range = kubernetesRangeOfTalos(`${talos.major}.${talos.minor}`)
  if (!range) throw usage(`--to: no Kubernetes range is known for Talos ${talos.tag}`)
  const min = parseKubernetesVersion(range.min)
  const max = parseKubernetesVersion(range.max)
  if (compareVersions(to, min) < 0 || compareVersions(to, max) > 0) {
    throw usage(
      `--to: Kubernetes ${to.version} does not run on Talos ${talos.tag} (accepted: ${range.min} to ${range.max.replace(/\.99$/, '.x')})`,
      'upgrade Talos first (talosctl upgrade, node by node), then Cilium, then Kubernetes',
    )
  }
  if (compareVersions(to, from) < 0) throw usage(`--to: ${to.version} is older than the running ${from.version}: Kubernetes is never downgraded`)
  if (asMinor(to) - asMinor(from) > 1) {
    const skipped = []
    for (let m = from.minor + 1; m < to.minor; m++) skipped.push(`${to.major}.${m}`)
    throw usage(
      `--to: ${from.version} to ${to.version} skips Kubernetes ${skipped.join(', ')}: Kubernetes upgrades one minor at a time`,
      `upgrade to the newest ${skipped[0]} patch first (ichor kubernetes upgrade --to ${skipped[0]}.N)`,
    )
  }
  const kind = compareVersions(to, from) === 0 ? 'same' : to.minor === from.minor ? 'patch' : 'minor'
  const warnings: string[] = []
  const untested = ciliumUntested(i.ciliumVersion, to)
  if (untested && kind !== 'same') {
    if (!i.allowUntested) throw usage(`--to: ${untested.message}`, `${untested.fix}; or pass ${ALLOW_UNTESTED_FLAG} to go on untested`)
    warnings.push(`${ALLOW_UNTESTED_FLAG}: nobody tested Cilium ${minorOf(i.ciliumVersion)} on Kubernetes ${to.major}.${to.minor}: ${untested.message}`)
  }
  return {kind, from: from.version, to: to.version, warnings}
}

function withFlag<T>(flag: string, f: () => T): T {
  try {
    return f()
  } catch (e) {
    if (e instanceof IchorError) throw usage(e.message.replace(/^--[a-z-]+:/, `${flag}:`))
    throw e
  }
}

// ---------- talosctl upgrade-k8s --dry-run ----------

export interface DryRunChange {
  /**
   * go-kubernetes ssa DiffAction: "Pruned", or fluxcd ssa's "created" / "configured" / "unchanged";
   * from the legacy sync, "replaced" (created, or replaced whole) or "unchanged".
   */
  action: string
  kind: string
  /** '' for a cluster-scoped object. */
  namespace: string
  name: string
}

// The line talosctl prints before the manifest sync: which sync runs is told by it.
const SSA_SYNC = 'updating manifests (dry run)'
const LEGACY_SYNC = 'updating manifests'

/**
 * The objects of talosctl's dry run, or a refusal (exit 1) when the output cannot be read: an
 * unread line must never pass as "no changes". talosctl v1.14.1 pkg/cluster/kubernetes/talos_managed.go
 * picks the sync by the lowest Talos version of the nodes (compatibility `SupportsSSAManifestSync`):
 * - Talos 1.13 and later, `syncManifestsSSA`: " < <Action> <Subject>" per go-kubernetes v0.2.41
 *   ssa `DiffResult`, Subject as ssa/util.go `formatPath`: "<Kind>/<namespace>/<name>" or "<Kind>/<name>",
 *   each followed by its diff.
 * - any node below 1.13, `syncManifests`: go-kubernetes v0.2.41 manifests.SyncWithLog, per object
 *   " > processing manifest <path>", then " < no changes", or its diff and " < dry run, change
 *   skipped". The real run then Updates (a PUT: the whole object) or Creates it; the dry run does
 *   not say which, so every change reads "replaced". It never prunes.
 */
export function parseUpgradeK8sDryRun(output: string): DryRunChange[] {
  const lines = output.split('\n').map((l) => l.replace(/\r$/, ''))
  const at = lines.findIndex((l) => l.trimEnd() === SSA_SYNC || l.trimEnd() === LEGACY_SYNC)
  if (at < 0) throw unreadableDryRun(`it printed no manifest sync (no "${LEGACY_SYNC}" line)`)
  const rest = lines.slice(at + 1)
  return lines[at]!.trimEnd() === SSA_SYNC ? readSsaSync(rest) : readLegacySync(rest)
}

function readSsaSync(lines: string[]): DryRunChange[] {
  const out: DryRunChange[] = []
  for (const line of lines) {
    // The diff lines in between start with "---", "+++", "@@", "+", "-" or a space and content.
    if (!line.startsWith(' < ')) continue
    const m = /^ < (Pruned|created|configured|unchanged) ([^/\s]+)\/(?:([^/\s]+)\/)?([^/\s]+)\s*$/.exec(line)
    if (!m) throw unreadableDryRun(`"${line.trim()}" is no result line of the server-side apply sync`)
    out.push({action: m[1]!, kind: m[2]!, namespace: m[3] ?? '', name: m[4]!})
  }
  return out
}

/** manifests.go `formatManifestPath`: "<group>/<version>.<Kind>/<namespace>/<name>", group and namespace optional. */
const LEGACY_PATH = /^(?:[^/\s]+\/)?v\d+[a-z0-9]*\.([A-Za-z][A-Za-z0-9]*)\/(?:([^/\s]+)\/)?([^/\s]+)$/

function readLegacySync(lines: string[]): DryRunChange[] {
  const out: DryRunChange[] = []
  let open: {path: string; kind: string; namespace: string; name: string} | undefined
  for (const line of lines) {
    const text = line.trimEnd()
    const processing = /^ > processing manifest (.*)$/.exec(text)
    if (processing) {
      if (open) throw unreadableDryRun(`manifest ${open.path} has no result line`)
      const path = processing[1]!.trim()
      const m = LEGACY_PATH.exec(path)
      if (!m) throw unreadableDryRun(`"${path}" names no object (expected <group>/<version>.<Kind>/<namespace>/<name>)`)
      open = {path, kind: m[1]!, namespace: m[2] ?? '', name: m[3]!}
    } else if (text.startsWith(' < ')) {
      const verdict = text === ' < no changes' ? 'unchanged' : text === ' < dry run, change skipped' ? 'replaced' : undefined
      if (!verdict) throw unreadableDryRun(`"${text.trim()}" is no result line of the legacy sync`)
      if (!open) throw unreadableDryRun(`"${text.trim()}" follows no "processing manifest" line`)
      out.push({action: verdict, kind: open.kind, namespace: open.namespace, name: open.name})
      open = undefined
    } else if (!open && text !== '') {
      // Only an object's diff may stand between its lines; anything else is not understood.
      throw unreadableDryRun(`"${text.trim()}" stands outside any manifest of the legacy sync`)
    }
  }
  if (open) throw unreadableDryRun(`manifest ${open.path} has no result line`)
  return out
}

function unreadableDryRun(why: string): IchorError {
  return new IchorError(
    `cannot read talosctl upgrade-k8s --dry-run: ${why}; without it nothing proves Talos leaves Cilium, the stack and ichor alone, so the upgrade stops here`,
    {
      hint: 'run talosctl upgrade-k8s --dry-run --to <version> yourself to see what Talos would change; if a node runs Talos below 1.13, upgrade Talos first (ichor talos upgrade)',
    },
  )
}

export interface ProtectedObject {
  kind: string
  namespace: string
  name: string
  /** Whose object it is, for the refusal ("the Cilium release kube-system/cilium"). */
  owner: string
}

export interface ProtectedChange {
  action: string
  subject: string
  owner: string
}

/** The protected objects the dry run would prune or change (anything but "unchanged"). */
export function protectedChanges(changes: DryRunChange[], objects: ProtectedObject[]): ProtectedChange[] {
  const key = (o: {kind: string; namespace: string; name: string}) => `${o.kind}/${o.namespace}/${o.name}`
  const owners = new Map(objects.map((o) => [key(o), o.owner]))
  return changes
    .filter((c) => c.action !== 'unchanged' && owners.has(key(c)))
    .map((c) => ({action: c.action, subject: c.namespace ? `${c.kind}/${c.namespace}/${c.name}` : `${c.kind}/${c.name}`, owner: owners.get(key(c))!}))
}
