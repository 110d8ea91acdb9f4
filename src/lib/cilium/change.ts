// How a `cni values set|edit|diff` turns its input and the live cluster into a validated
// change: the new user layer (merged onto the stored one, or replacing it), the facts the
// guards need read from the cluster and a control plane, and the values engine's verdict.
import {isDeepStrictEqual} from 'node:util'
import {ValidationError, IchorError} from '../errors/errors.js'
import {readServedApiGroups} from '../kube/reads.js'
import {chartFromReleaseRecord} from '../helm/record-chart.js'
import {valuesHash} from '../helm/release-record.js'
import type {Kube} from '../kube/client.js'
import {readClusterTalosFacts, type TalosFacts} from '../talos/facts.js'
import {newUserLayer, type ValuesInput} from '../values/layer.js'
import {readCniContext, resolveCiliumChart, type ChartSources, type CniContext} from './context.js'
import {TalosAccess} from '../talos/access.js'
import type {CiliumFacts} from './guards.js'
import {switchCommand} from './defaults.js'
import type {CiliumValuesChange} from './tasks.js'
import {ciliumEffectiveValues} from './effective.js'
import {validateCiliumValues, type CiliumValuesReport} from './validate.js'
import type {Values} from '../values/path.js'
import {EXIT} from '../errors/exit-codes.js'

export interface ChangeSources extends ChartSources {
  talosconfig?: string
  stateDir?: string
  /** The run's access to the nodes (a plan's ctx.talos): the guards' read then serves the steps that read the same configs. */
  talos?: TalosAccess
}

export interface LiveFacts {
  /** The API groups served and the CR's kube-proxy mode; Talos's side is in `talos`. */
  facts: CiliumFacts
  /** KubePrism and forwardKubeDNSToHost from every node ichor knows (talosctl calls, started at once). */
  talos: Promise<Partial<CiliumFacts>>
  notes: string[]
}

/**
 * The guards' facts: API groups served, the CR's modes, and Talos's side when a talosconfig is
 * at hand. The talosctl calls start first and is not awaited here: pass `talos` as the
 * validation's laterFacts, so the chart's checks run while the node answers.
 */
export async function readLiveFacts(kube: Kube, ctx: CniContext, sources: ChangeSources, opts: {talos?: boolean} = {}): Promise<LiveFacts> {
  const access =
    sources.talos ??
    new TalosAccess(async () => kube, {talosconfig: sources.talosconfig, stateDir: sources.stateDir, installationRead: Promise.resolve(ctx.installation)})
  // This machine's talosconfig only: the guards never ask for the state passphrase.
  const talosconfig = await access.localTalosconfig()
  // The agents on every node, workers included, reach the API server through KubePrism.
  const nodes = [...(ctx.installation.spec.talos.controlPlanes ?? []), ...(ctx.installation.spec.talos.workers ?? [])]
  const wanted = opts.talos !== false
  const read =
    wanted && talosconfig && nodes.length > 0
      ? readClusterTalosFacts({nodes, machineConfig: (node) => access.reads.machineConfig(node, talosconfig)})
      : undefined
  read?.catch(() => {}) // awaited by the validation
  const groups = await readServedApiGroups(kube)
  return {
    notes: read || !wanted ? [] : [`Talos facts not read (no talosconfig in ${await access.stateDir()}; pass --talosconfig)`],
    facts: {
      kubeProxy: ctx.modes.kubeProxy,
      nodeCount: ctx.modes.nodeCount,
      gatewayApiCrds: groups.has('gateway.networking.k8s.io') ? 'present' : 'absent',
      monitoringCrds: groups.has('monitoring.coreos.com') ? 'present' : 'absent',
    },
    talos: read ? read.then((t: TalosFacts) => ({kubePrism: t.kubePrism, forwardKubeDNSToHost: t.forwardKubeDNSToHost})) : Promise.resolve({}),
  }
}

/**
 * A half-done kube-proxy switch (the CR records the new mode, the release still runs the old
 * one): a values change or an upgrade would apply the new mode without the switch's order, e.g.
 * turn the replacement off before any kube-proxy runs. Refused, naming the command that finishes it.
 */
export function refuseHalfDoneSwitch(ctx: CniContext): void {
  if (
    ctx.release &&
    typeof ctx.release.config.kubeProxyReplacement === 'boolean' &&
    ctx.release.config.kubeProxyReplacement !== (ctx.modes.kubeProxy === 'replaced')
  ) {
    throw new IchorError(
      `a kube-proxy switch to "${ctx.modes.kubeProxy}" is half done (the release still has kubeProxyReplacement=${String(ctx.release.config.kubeProxyReplacement)}); nothing was changed`,
      {
        exitCode: EXIT.usage,
        hint: `finish it first: ${switchCommand(ctx.modes.kubeProxy)}`,
      },
    )
  }
}

/**
 * The chart a change that keeps the release's version renders: the chart at hand when it is
 * that version; else, unless --cilium-chart named another file, the chart in the release's own
 * Helm record (a laptop that never fetched it, or whose ichor pins a newer one), said in a note.
 */
export async function chartOfRelease(kube: Kube, ctx: CniContext, sources: ChartSources): Promise<{path: string; version: string; note?: string}> {
  let atHand: {path: string; version: string} | undefined
  let missing: unknown
  try {
    atHand = resolveCiliumChart(sources)
  } catch (error) {
    if (sources.chart) throw error
    missing = error
  }
  const release = ctx.release
  if (!release || atHand?.version === release.chartVersion) {
    if (atHand) return atHand
    throw missing
  }
  if (sources.chart) {
    throw new IchorError(`the release runs Cilium chart ${release.chartVersion}, and --cilium-chart ${atHand!.path} is ${atHand!.version}`, {
      exitCode: EXIT.usage,
      hint: `pass the ${release.chartVersion} chart, or leave --cilium-chart out to use the one in the release's Helm record; change the version with \`ichor cni upgrade\``,
    })
  }
  const fromRecord = await chartFromReleaseRecord(kube, release.namespace, release.secretName)
  return {
    path: fromRecord.path,
    version: fromRecord.version,
    note: `the release runs Cilium chart ${release.chartVersion}${atHand ? ` and the chart at hand is ${atHand.version}` : ', which this machine does not have'}: using the chart from its Helm record (${release.secretName})`,
  }
}

const TALOS_NOT_NEEDED = 'the release already runs these values, so the Talos side was not read (nothing is applied)'

/** Whether the deployed release runs this chart version with exactly these values (helm-upgrade's probe would hold). */
function releaseRuns(release: CniContext['release'], chartVersion: string, effective: Values): boolean {
  return release?.status === 'deployed' && release.chartVersion === chartVersion && valuesHash(release.config) === valuesHash(effective)
}

/** Reads the cluster, builds the new user layer and validates it; invalid values are a ValidationError (exit 2). */
export async function prepareValuesChange(
  kube: Kube,
  input: ValuesInput,
  sources: ChangeSources,
): Promise<CiliumValuesChange & {context: CniContext; rendered?: string}> {
  const ctx = await readCniContext(kube)
  refuseHalfDoneSwitch(ctx)
  const chart = await chartOfRelease(kube, ctx, sources)
  if (input.kind === 'layer' && input.base !== undefined && !isDeepStrictEqual(input.base, ctx.user)) {
    throw new IchorError('the stored Cilium values changed while the editor was open; nothing was changed', {
      hint: 'run `ichor cni values edit` again to edit the current values',
    })
  }
  const user = newUserLayer(ctx.user, input)
  // The Talos side (one talosctl call per node) guards a change before helm applies it. When the
  // release already runs these exact values there is nothing to apply, so the nodes are not
  // asked (issue 25). The effective values do not depend on the Talos facts (effective.ts).
  const modes = {kubeProxy: ctx.modes.kubeProxy, nodeCount: ctx.modes.nodeCount, tunnel: ctx.modes.tunnel, upgradeCompatibility: ctx.modes.upgradeCompatibility}
  const applies = !releaseRuns(ctx.release, chart.version, ciliumEffectiveValues({chartPath: chart.path, user, facts: modes}))
  const {facts, talos, notes} = await readLiveFacts(kube, ctx, sources, {talos: applies})
  const report = await validateCiliumValues({
    chartPath: chart.path,
    user,
    facts: {...facts, tunnel: ctx.modes.tunnel, upgradeCompatibility: ctx.modes.upgradeCompatibility, talosUnread: applies ? undefined : TALOS_NOT_NEEDED},
    laterFacts: talos,
  })
  if (!report.valid) throw new ValidationError('the Cilium values are invalid, nothing was changed', report.issues)
  // Stored without the owned keys the user set to ichor's own values (accepted with a note).
  return {...validatedChange(ctx, report.user, chart, notes, report), rendered: report.rendered}
}

/** A change whose values validated: what the steps apply and record. */
export function validatedChange(
  ctx: CniContext,
  user: Values,
  chart: {path: string; version: string; note?: string},
  notes: string[],
  report: CiliumValuesReport,
): CiliumValuesChange & {context: CniContext} {
  return {
    context: ctx,
    user,
    effective: report.effective,
    hash: valuesHash(report.effective),
    chartPath: chart.path,
    chartVersion: chart.version,
    previousUser: ctx.user,
    notes: [...(chart.note ? [chart.note] : []), ...notes, ...report.notes],
  }
}
