// What every Cilium day-2 command starts from: the IchorInstallation (desired state), the
// chart this CLI uses, the release record, and where the Talos side can be reached.
import {existsSync} from 'node:fs'
import {resolveAsset, type ResolvedAsset} from '../assets/resolve.js'
import {IchorError} from '../errors/errors.js'
import {readCiliumRelease} from '../health/reads.js'
import type {ReleaseRecord} from '../helm/release.js'
import type {Kube} from '../kube/client.js'
import {readInstallation, type Installation} from '../state/installation.js'
import {localState} from '../state/local.js'
import type {Values} from '../values/path.js'
import type {CiliumModes} from './defaults.js'
import {ciliumEffectiveValues} from './validate.js'

export interface CniContext {
  installation: Installation
  modes: CiliumModes
  /** The user layer stored in the CR. */
  user: Values
  release?: ReleaseRecord
}

export async function readCniContext(kube: Kube): Promise<CniContext> {
  const [installation, release] = await Promise.all([readInstallation(kube), readCiliumRelease(kube)])
  if (!installation) {
    throw new IchorError('this cluster has no IchorInstallation "ichor": it was not set up by ichor init', {hint: 'run `ichor init` first, or point --kubeconfig/--context at the cluster ichor set up'})
  }
  const cni = installation.spec.cni
  return {installation, modes: {kubeProxy: cni.kubeProxy, tunnel: cni.tunnel}, user: cni.cilium?.values ?? {}, release}
}

/** The effective values of a user layer under the CR's modes (no checks). */
export function effectiveFor(ctx: Pick<CniContext, 'modes'>, user: Values): Values {
  return ciliumEffectiveValues({chartPath: '', user, facts: {...ctx.modes}})
}

export interface ChartSources {
  /** --cilium-chart */
  chart?: string
  mirror?: string
}

export function resolveCiliumChart(sources: ChartSources): ResolvedAsset {
  return resolveAsset('cilium', {override: sources.chart, mirror: sources.mirror})
}

export interface TalosAccess {
  /** An existing talosconfig, when one was named or the state directory holds one. */
  talosconfig?: string
  /** Local machine configs of the control planes init rendered (they carry the bootstrap Cilium). */
  localConfigs: string[]
  /** Where they were looked for, for messages. */
  stateDir: string
}

/** --talosconfig, else the state directory (--state-dir, else init's default for the CR's cluster name). */
export function talosAccess(installation: Installation, flags: {talosconfig?: string; stateDir?: string}): TalosAccess {
  const state = localState(installation.spec.talos.clusterName, flags.stateDir)
  if (flags.talosconfig && !existsSync(flags.talosconfig)) throw new IchorError(`--talosconfig: no such file ${flags.talosconfig}`, {exitCode: 2})
  const talosconfig = flags.talosconfig ?? (existsSync(state.talosconfig) ? state.talosconfig : undefined)
  return {talosconfig, localConfigs: [state.controlPlaneConfig].filter((f) => existsSync(f)), stateDir: state.dir}
}
