// `ichor cni upgrade`: which chart the release moves to and whether Cilium's upgrade guide
// allows the move, then the stored user layer validated against the NEW chart with the
// live cluster's facts. Read-only: the plan's steps act on what this returns.
import {resolveAssetVersion, type ResolvedAsset} from '../assets/resolve.js'
import {IchorError, ValidationError} from '../errors/errors.js'
import {valuesHash} from '../helm/release-record.js'
import type {Kube} from '../kube/client.js'
import {getPath, setPath, type Values} from '../values/path.js'
import {readLiveFacts, refuseHalfDoneSwitch, type ChangeSources} from './change.js'
import {readCniContext, resolveCiliumChart, type CniContext} from './context.js'
import type {CiliumValuesChange} from './tasks.js'
import {validateCiliumValues} from './validate.js'
import {knownCiliumCharts} from '../compatibility/queries.js'
import {judgeCiliumUpgrade, minorOf, type UpgradeVerdict} from './versions.js'
import {describeFinding, readRemovedApis, type RemovedApiReport} from './removed-apis.js'
import {EXIT} from '../errors/exit-codes.js'

export interface UpgradeSources extends ChangeSources {
  /** --to VERSION */
  to?: string
  /** --skip-patch-check: a minor step from an older patch of the current minor is a warning, not a refusal. */
  skipPatchCheck?: boolean
  /** --skip-removed-api-check: live objects the target minor removes or rejects are warnings, not a refusal. */
  skipRemovedApiCheck?: boolean
}

export interface UpgradeTarget {
  chart: ResolvedAsset
  /** One line: which file, which version, whether it is the pin or a chart ichor knows. */
  describe: string
}

export interface CiliumUpgradePlan {
  installed: string
  target: UpgradeTarget
  verdict: Exclude<UpgradeVerdict, {kind: 'refused'}>
  warnings: string[]
  /** The live objects the target minor's upgrade notes remove, reject or deprecate (none for a patch step). */
  removedApis: RemovedApiReport
}

export interface CiliumUpgradeChange extends CiliumValuesChange {
  context: CniContext
  plan: CiliumUpgradePlan
  /** The pre-flight release's values: Cilium's upgrade guide, with the release's API server address. */
  preflightValues: Values
}

/** --cilium-chart FILE, else --to VERSION from the assets folder or the mirror, else the chart init would use (the pin). */
export function resolveUpgradeChart(sources: UpgradeSources): UpgradeTarget {
  let chart: ResolvedAsset
  if (sources.chart) {
    chart = resolveCiliumChart(sources)
    if (sources.to && chart.version !== sources.to.replace(/^v/, '')) {
      throw new IchorError(`--to ${sources.to} and --cilium-chart ${sources.chart} disagree: that file is Cilium ${chart.version}`, {
        exitCode: EXIT.usage,
        hint: 'pass one of them',
      })
    }
  } else if (sources.to) {
    const version = sources.to.replace(/^v/, '')
    const found = resolveAssetVersion('cilium', version, {mirror: sources.mirror})
    if (!found) {
      throw new IchorError(
        `--to ${sources.to}: no Cilium chart ${version} in the assets folder or the mirror${(sources.mirror ?? process.env.ICHOR_MIRROR) ? ` (${sources.mirror ?? process.env.ICHOR_MIRROR})` : ''}`,
        {
          exitCode: EXIT.usage,
          hint: `pass --cilium-chart cilium-${version}.tgz, or --mirror DIR holding cilium-${version}.tgz`,
        },
      )
    }
    chart = found
  } else {
    chart = resolveCiliumChart(sources)
  }
  return {chart, describe: describeUpgradeChart(chart)}
}

function describeUpgradeChart(chart: ResolvedAsset): string {
  const known = knownCiliumCharts().find((k) => k.version === chart.version)
  const verdict = chart.matchesPin
    ? `the pinned chart ${chart.pinned.version}`
    : known?.sha256 === chart.sha256
      ? `not the pin (${chart.pinned.version}); a chart ichor knows (sha256 as in Cilium's chart index)`
      : known
        ? `not the pin (${chart.pinned.version}); its sha256 differs from the ${chart.version} ichor knows (${known.sha256.slice(0, 12)})`
        : `not the pin (${chart.pinned.version}), and a version ichor does not know`
  return `Cilium chart ${chart.version}: ${chart.path} (from ${chart.origin}, sha256 ${chart.sha256.slice(0, 12)}), ${verdict}`
}

/** The version policy alone (cheap: no helm run): exit 2 naming the versions when the move is refused. */
export function judgeUpgrade(ctx: CniContext, target: UpgradeTarget, opts: {skipPatchCheck?: boolean} = {}): CiliumUpgradePlan {
  if (!ctx.release) {
    throw new IchorError('there is no Helm release kube-system/cilium to upgrade: Cilium was never adopted', {
      exitCode: EXIT.usage,
      hint: 'run `ichor init` (the same flags as the first run) to adopt it',
    })
  }
  const installed = ctx.release.chartVersion
  const verdict = judgeCiliumUpgrade(installed, target.chart.version, {skipPatchCheck: opts.skipPatchCheck})
  if (verdict.kind === 'refused') {
    throw new IchorError(`refusing to upgrade Cilium from ${installed} to ${target.chart.version}: ${verdict.reason}`, {
      exitCode: EXIT.usage,
      hint: 'nothing was changed',
    })
  }
  return {installed, target, verdict, warnings: verdict.kind === 'same' ? [] : verdict.warnings, removedApis: {refusals: [], warnings: []}}
}

/** The flag that lets a minor step go on over live objects the target minor removes or rejects. */
export const SKIP_REMOVED_API_CHECK_FLAG = '--skip-removed-api-check'

/**
 * The version policy, then, for a minor step, the live objects the target minor's upgrade notes
 * remove or reject (removed-apis.ts): exit 2 naming every one of them, unless
 * --skip-removed-api-check, which goes on with a warning naming each. Deprecations are warnings.
 */
export async function judgeUpgradeLive(kube: Kube, ctx: CniContext, target: UpgradeTarget, opts: UpgradeSources): Promise<CiliumUpgradePlan> {
  const plan = judgeUpgrade(ctx, target, opts)
  if (plan.verdict.kind !== 'minor') return plan
  const found = await readRemovedApis(kube, plan.installed, target.chart.version)
  if (found.refusals.length && !opts.skipRemovedApiCheck) {
    throw new ValidationError(
      `refusing to upgrade Cilium from ${plan.installed} to ${target.chart.version}: live objects use what Cilium ${minorOf(target.chart.version)} removes or rejects (its upgrade notes); nothing was changed`,
      found.refusals.map((f) => ({path: f.object, message: `${f.why} (${f.doc})`})),
      {hint: `change or delete them first, or pass ${SKIP_REMOVED_API_CHECK_FLAG} to go on knowingly`},
    )
  }
  const warnings = [
    ...plan.warnings,
    ...found.refusals.map((f) => `${describeFinding(f)}; going on (${SKIP_REMOVED_API_CHECK_FLAG})`),
    ...found.warnings.map(describeFinding),
  ]
  return {...plan, warnings, removedApis: found}
}

export async function readUpgradePlan(kube: Kube, sources: UpgradeSources): Promise<CiliumUpgradePlan> {
  const ctx = await readCniContext(kube)
  // First: a half-done switch is the cluster's state to repair, whatever the target.
  refuseHalfDoneSwitch(ctx)
  return judgeUpgradeLive(kube, ctx, resolveUpgradeChart(sources), sources)
}

/** Everything the upgrade's steps need, read and checked under the Lease; bad values are exit 2. */
export async function prepareCiliumUpgrade(kube: Kube, sources: UpgradeSources): Promise<CiliumUpgradeChange> {
  const ctx = await readCniContext(kube)
  // First: a half-done switch is the cluster's state to repair, whatever the target.
  refuseHalfDoneSwitch(ctx)
  const plan = await judgeUpgradeLive(kube, ctx, resolveUpgradeChart(sources), sources)
  const {facts, talos, notes} = await readLiveFacts(kube, ctx, sources)
  const chartPath = plan.target.chart.path
  const report = await validateCiliumValues({
    chartPath,
    user: ctx.user,
    kubeVersion: kube.serverVersion?.replace(/^v/, '').split('+')[0],
    facts: {...facts, tunnel: ctx.modes.tunnel, upgradeCompatibility: ctx.modes.upgradeCompatibility},
    laterFacts: talos,
  })
  if (!report.valid) {
    throw new ValidationError(
      `the stored Cilium values do not fit Cilium ${plan.target.chart.version}, nothing was changed (change them with \`ichor cni values set\` first)`,
      report.issues,
    )
  }
  return {
    context: ctx,
    plan,
    user: ctx.user,
    previousUser: ctx.user,
    effective: report.effective,
    hash: valuesHash(report.effective),
    chartPath,
    chartVersion: plan.target.chart.version,
    notes: [...notes, ...report.notes],
    preflightValues: preflightValues(report.effective),
  }
}

/**
 * `helm install cilium-preflight ... --set preflight.enabled=true --set agent=false --set operator.enabled=false`
 * plus the API server address (Cilium's upgrade guide), and what makes it pre-pull what the agents
 * will run where they run. The chart's pre-flight templates (templates/cilium-preflight/daemonset.yaml
 * and deployment.yaml, chart 1.19.6) read their own `preflight.image`, `preflight.envoy.image`,
 * `preflight.nodeSelector|tolerations|affinity`, and the top-level `imagePullSecrets`; the envoy
 * container follows `envoyDaemonSetEnabled` (l7Proxy, envoy.enabled, upgradeCompatibility).
 */
export function preflightValues(effective: Values): Values {
  const values: Values = {preflight: {enabled: true}, agent: false, operator: {enabled: false}}
  const copy = (from: string[], to: string[]) => {
    const v = getPath(effective, from)
    if (v !== undefined) setPath(values, to, v)
  }
  for (const key of ['k8sServiceHost', 'k8sServicePort', 'imagePullSecrets', 'l7Proxy', 'upgradeCompatibility']) copy([key], [key])
  copy(['envoy', 'enabled'], ['envoy', 'enabled'])
  // The keys set on the agents' images (a mirror's repository, an override, a digest); the rest
  // are the chart's defaults, the same for the pre-flight's images in one chart.
  for (const key of ['override', 'repository', 'tag', 'digest', 'useDigest', 'pullPolicy']) {
    copy(['image', key], ['preflight', 'image', key])
    copy(['envoy', 'image', key], ['preflight', 'envoy', 'image', key])
  }
  copy(['nodeSelector'], ['preflight', 'nodeSelector'])
  copy(['tolerations'], ['preflight', 'tolerations'])
  // Only the node part of the agents' affinity: their podAntiAffinity (one agent a node) would keep
  // the pre-flight away from every agent, and the chart's pre-flight podAffinity puts it beside one.
  copy(['affinity', 'nodeAffinity'], ['preflight', 'affinity', 'nodeAffinity'])
  return values
}
