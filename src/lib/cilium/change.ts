// How a `cni values set|edit|diff` turns its input and the live cluster into a validated
// change: the new user layer (merged onto the stored one, or replacing it), the facts the
// guards need read from the cluster and a control plane, and the values engine's verdict.
import {isDeepStrictEqual} from 'node:util'
import {ValidationError, IchorError} from '../errors/errors.js'
import {readServedApiGroups} from '../health/reads.js'
import {valuesHash} from '../helm/release.js'
import type {Kube} from '../kube/client.js'
import {readClusterTalosFacts, type TalosFacts} from '../talos/facts.js'
import type {Values} from '../values/path.js'
import {newUserLayer, type ValuesInput} from '../values/layer.js'
import {readCniContext, resolveCiliumChart, talosAccess, type ChartSources, type CniContext} from './context.js'
import type {CiliumFacts} from './guards.js'
import {switchCommand} from './defaults.js'
import type {CiliumValuesChange} from './tasks.js'
import {validateCiliumValues} from './validate.js'

export {newUserLayer, type ValuesInput} from '../values/layer.js'

export interface ChangeSources extends ChartSources {
  talosconfig?: string
  stateDir?: string
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
export async function readLiveFacts(kube: Kube, ctx: CniContext, sources: ChangeSources): Promise<LiveFacts> {
  const access = talosAccess(ctx.installation, sources)
  // The agents on every node, workers included, reach the API server through KubePrism.
  const nodes = [...(ctx.installation.spec.talos.controlPlanes ?? []), ...(ctx.installation.spec.talos.workers ?? [])]
  const read = access.talosconfig && nodes.length > 0 ? readClusterTalosFacts({nodes, talosconfig: access.talosconfig}) : undefined
  read?.catch(() => {}) // awaited by the validation
  const groups = await readServedApiGroups(kube)
  return {
    notes: read ? [] : [`Talos facts not read (no talosconfig in ${access.stateDir}; pass --talosconfig)`],
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
  if (ctx.release && typeof ctx.release.config.kubeProxyReplacement === 'boolean' && ctx.release.config.kubeProxyReplacement !== (ctx.modes.kubeProxy === 'replaced')) {
    throw new IchorError(`a kube-proxy switch to "${ctx.modes.kubeProxy}" is half done (the release still has kubeProxyReplacement=${String(ctx.release.config.kubeProxyReplacement)}); nothing was changed`, {
      exitCode: 2,
      hint: `finish it first: ${switchCommand(ctx.modes.kubeProxy)}`,
    })
  }
}

/** Reads the cluster, builds the new user layer and validates it; invalid values are a ValidationError (exit 2). */
export async function prepareValuesChange(kube: Kube, input: ValuesInput, sources: ChangeSources): Promise<CiliumValuesChange & {context: CniContext; rendered?: string}> {
  const ctx = await readCniContext(kube)
  const chart = resolveCiliumChart(sources)
  if (ctx.release && ctx.release.chartVersion !== chart.version) {
    throw new IchorError(`the release runs Cilium chart ${ctx.release.chartVersion}, and the chart at hand is ${chart.version} (${chart.path})`, {
      exitCode: 2,
      hint: `pass --cilium-chart with the ${ctx.release.chartVersion} chart to change values, or change the version with \`ichor cni upgrade\``,
    })
  }
  refuseHalfDoneSwitch(ctx)
  if (input.kind === 'layer' && input.base !== undefined && !isDeepStrictEqual(input.base, ctx.user)) {
    throw new IchorError('the stored Cilium values changed while the editor was open; nothing was changed', {hint: 'run `ichor cni values edit` again to edit the current values'})
  }
  const user = newUserLayer(ctx.user, input)
  const {facts, talos, notes} = await readLiveFacts(kube, ctx, sources)
  const report = await validateCiliumValues({chartPath: chart.path, user, facts: {...facts, tunnel: ctx.modes.tunnel, upgradeCompatibility: ctx.modes.upgradeCompatibility}, laterFacts: talos})
  if (!report.valid) throw new ValidationError('the Cilium values are invalid, nothing was changed', report.issues)
  return {
    context: ctx, user, effective: report.effective, hash: valuesHash(report.effective), chartPath: chart.path, chartVersion: chart.version,
    previousUser: ctx.user, notes: [...notes, ...report.notes], rendered: report.rendered,
  }
}
