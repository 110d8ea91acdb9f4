// A canonical dump of what `ichor init` leaves behind, minus what is random per cluster
// (generated passwords, uids, times), so two clusters' end states compare with toEqual.
import {readFileSync} from 'node:fs'
import {join} from 'node:path'
import {readReleaseRecord} from '../../src/lib/helm/release-record.js'
import type {Kube} from '../../src/lib/kube/client.js'
import {getObject, listObjects, type KubeObject} from '../../src/lib/kube/objects.js'
import {inlineManifestForms} from '../../src/lib/talos/handover.js'
import type {HarnessCluster} from './cluster.js'

type Obj = KubeObject & {spec?: unknown; status?: unknown; data?: Record<string, string>}

export function nodeConfig(h: HarnessCluster, ip: string): string {
  return (JSON.parse(readFileSync(join(h.nodes.stateDir, `node-${ip}.json`), 'utf8')) as {config?: string}).config ?? ''
}

/** Everything the end state is made of, minus what is random per cluster (generated passwords, uids, times). */
export async function canonicalDump(kube: Kube, h: HarnessCluster) {
  const secretNames = async (ns: string) =>
    (await listObjects<Obj>(kube, {apiVersion: 'v1', kind: 'Secret', namespace: ns}))
      .filter((s) => !s.metadata.name.startsWith('sh.helm.release'))
      .map(
        (s) =>
          `${ns}/${s.metadata.name}:${Object.keys(s.data ?? {})
            .sort()
            .join(',')}`,
      )
  const cr = await getObject<Obj>(kube, {apiVersion: 'ichor.maesh.dev/v1alpha1', kind: 'IchorInstallation', name: 'ichor'})
  const orders = await Promise.all(
    ['argocd', 'kokumi'].map((n) => getObject<Obj>(kube, {apiVersion: 'delivery.kokumi.dev/v1alpha1', kind: 'Order', name: n, namespace: n})),
  )
  const release = await readReleaseRecord(kube, 'cilium', 'kube-system')
  const policies = [
    ...(await listObjects<Obj>(kube, {apiVersion: 'cilium.io/v2', kind: 'CiliumNetworkPolicy', namespace: 'kokumi'})),
    ...(await listObjects<Obj>(kube, {apiVersion: 'cilium.io/v2', kind: 'CiliumNetworkPolicy', namespace: 'argocd'})),
  ]
  const inventory = await getObject<Obj & {data?: Record<string, string>}>(kube, {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    name: 'talos-bootstrap-manifests-inventory',
    namespace: 'kube-system',
  })
  return {
    cr: {spec: cr?.spec, status: cr?.status},
    orders: orders.map((o) => o?.spec),
    release: release && {revision: release.revision, status: release.status, chart: release.chartVersion, config: release.config},
    secrets: [...(await secretNames('ichor-system')), ...(await secretNames('kokumi')), ...(await secretNames('argocd'))].sort(),
    policies: policies.map((p) => `${p.metadata.namespace}/${p.metadata.name}`).sort(),
    inventoryKeys: Object.keys(inventory?.data ?? {}).filter((k) => /cilium/i.test(k)),
    // ichor's entry by its name: an operator's own inline manifest stays after the hand-over.
    controlPlaneHasCilium: h.controlPlanes.some((ip) => inlineManifestForms(nodeConfig(h, ip)).length > 0),
  }
}

/** Keys of a status that record when, not what: left out of a comparison. */
const TIME_KEY = /(time|timestamp|at)$/i
function withoutTimes(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutTimes)
  if (!value || typeof value !== 'object') return value
  return Object.fromEntries(
    Object.entries(value)
      .filter(([k]) => !TIME_KEY.test(k))
      .map(([k, v]) => [k, withoutTimes(v)]),
  )
}

/**
 * The Cilium side of the end state, for the day-2 kill tests: the release's newest record
 * (chart, user-supplied values, status), the status of every revision from `base` on, the
 * IchorInstallation's spec.cni and status.cni (minus timestamps) and cilium-config's data.
 * Revision numbers are counted from `base`, the revision before the command ran, so a
 * killed-and-rerun command compares with an uninterrupted one that started elsewhere.
 */
export async function cniDump(kube: Kube, base: number) {
  const ns = 'kube-system'
  const [records, release, cr, cm] = await Promise.all([
    listObjects<Obj>(kube, {apiVersion: 'v1', kind: 'Secret', namespace: ns}, {labelSelector: 'owner=helm,name=cilium'}),
    readReleaseRecord(kube, 'cilium', ns),
    getObject<Obj & {spec?: {cni?: unknown}; status?: {cni?: {releaseRevision?: number}}}>(kube, {
      apiVersion: 'ichor.maesh.dev/v1alpha1',
      kind: 'IchorInstallation',
      name: 'ichor',
    }),
    getObject<Obj>(kube, {apiVersion: 'v1', kind: 'ConfigMap', name: 'cilium-config', namespace: ns}),
  ])
  const history = records
    .map((s) => ({revision: Number(s.metadata.labels?.version), status: s.metadata.labels?.status}))
    .filter((r) => r.revision >= base)
    .sort((a, b) => a.revision - b.revision)
    .map((r) => `+${r.revision - base} ${r.status}`)
  const cniStatus = cr?.status?.cni
  return {
    release: release && {revision: `+${release.revision - base}`, status: release.status, chart: release.chartVersion, config: release.config},
    history,
    cr: {
      spec: cr?.spec?.cni,
      status:
        cniStatus &&
        withoutTimes({...cniStatus, releaseRevision: cniStatus.releaseRevision === undefined ? undefined : `+${cniStatus.releaseRevision - base}`}),
    },
    ciliumConfig: cm?.data,
  }
}
