// What every Cilium day-2 command starts from: the IchorInstallation (desired state), the
// chart this CLI uses and the release record.
import {resolveAsset, type ResolvedAsset} from '../assets/resolve.js'
import {readCiliumRelease} from './reads.js'
import {decodeReleaseSecret, type ReleaseRecord, type ReleaseSecret} from '../helm/release-record.js'
import {CILIUM_RELEASE} from '../constants.js'
import type {Kube} from '../kube/client.js'
import {requireInstallation, type Installation} from '../state/installation.js'
import type {Values} from '../values/path.js'
import {nodeCountOf, ownedCapabilitiesOf, type CiliumModes} from './defaults.js'
import {minorOf} from './versions.js'
import {ciliumEffectiveValues} from './effective.js'

export interface CniContext {
  installation: Installation
  modes: CiliumModes
  /** The user layer stored in the CR. */
  user: Values
  release?: ReleaseRecord
}

/** `installation`: the IchorInstallation read when the caller already started it (to act on it sooner). */
export async function readCniContext(kube: Kube, installationRead?: Promise<Installation | undefined>): Promise<CniContext> {
  const [installation, release] = await Promise.all([requireInstallation(kube, {read: installationRead}), readCiliumRelease(kube)])
  const cni = installation.spec.cni
  const modes: CiliumModes = {
    kubeProxy: cni.kubeProxy,
    tunnel: cni.tunnel,
    upgradeCompatibility: await upgradeCompatibilityOf(kube, installation, release),
    // The capability sets of the chart the release runs (a values change keeps the chart).
    capabilities: release?.chartValues ? ownedCapabilitiesOf(release.chartValues) : undefined,
    nodeCount: nodeCountOf(installation.spec.talos),
  }
  return {installation, modes, user: cni.cilium?.values ?? {}, release}
}

/**
 * The minor first installed: as recorded in the CR status (init records it), else as the
 * release carries it, else (a cluster initialised before ichor recorded it) the chart of
 * the oldest revision helm still keeps.
 */
async function upgradeCompatibilityOf(kube: Kube, installation: Installation, release: ReleaseRecord | undefined): Promise<string | undefined> {
  const recorded = installation.status?.cni?.upgradeCompatibility
  if (recorded) return recorded
  const carried = release?.config.upgradeCompatibility
  if (typeof carried === 'string' && carried) return carried
  if (!release) return undefined
  const oldest = await readOldestReleaseRecord(kube)
  return oldest ? minorOf(oldest.chartVersion) : undefined
}

async function readOldestReleaseRecord(kube: Kube): Promise<ReleaseRecord | undefined> {
  const {name, namespace} = CILIUM_RELEASE
  const {items} = await kube.request<{items: ReleaseSecret[]}>('GET', `/api/v1/namespaces/${namespace}/secrets`, {
    query: {labelSelector: `owner=helm,name=${name}`},
  })
  const revisionOf = (s: ReleaseSecret) => Number(s.metadata?.labels?.version ?? s.metadata?.name?.split('.v').pop())
  const oldest = items.filter((s) => s.type === 'helm.sh/release.v1' && Number.isInteger(revisionOf(s))).sort((a, b) => revisionOf(a) - revisionOf(b))[0]
  return oldest ? decodeReleaseSecret(oldest) : undefined
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
