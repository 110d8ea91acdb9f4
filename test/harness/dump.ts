// A canonical dump of what `ichor init` leaves behind, minus what is random per cluster
// (generated passwords, uids, times), so two clusters' end states compare with toEqual.
import {readFileSync} from 'node:fs'
import {join} from 'node:path'
import {readReleaseRecord} from '../../src/lib/helm/release.js'
import type {Kube} from '../../src/lib/kube/client.js'
import {getObject, listObjects, type KubeObject} from '../../src/lib/kube/objects.js'
import type {HarnessCluster} from './cluster.js'

type Obj = KubeObject & {spec?: unknown; status?: unknown; data?: Record<string, string>}

export function nodeConfig(h: HarnessCluster, ip: string): string {
  return (JSON.parse(readFileSync(join(h.nodes.stateDir, `node-${ip}.json`), 'utf8')) as {config?: string}).config ?? ''
}

/** Everything the end state is made of, minus what is random per cluster (generated passwords, uids, times). */
export async function canonicalDump(kube: Kube, h: HarnessCluster) {
  const secretNames = async (ns: string) => (await listObjects<Obj>(kube, {apiVersion: 'v1', kind: 'Secret', namespace: ns})).filter((s) => !s.metadata.name.startsWith('sh.helm.release')).map((s) => `${ns}/${s.metadata.name}:${Object.keys(s.data ?? {}).sort().join(',')}`)
  const cr = await getObject<Obj>(kube, {apiVersion: 'ichor.maesh.dev/v1alpha1', kind: 'IchorInstallation', name: 'ichor'})
  const orders = await Promise.all(['argocd', 'kokumi'].map((n) => getObject<Obj>(kube, {apiVersion: 'delivery.kokumi.dev/v1alpha1', kind: 'Order', name: n, namespace: n})))
  const release = await readReleaseRecord(kube, 'cilium', 'kube-system')
  const policies = [
    ...(await listObjects<Obj>(kube, {apiVersion: 'cilium.io/v2', kind: 'CiliumNetworkPolicy', namespace: 'kokumi'})),
    ...(await listObjects<Obj>(kube, {apiVersion: 'cilium.io/v2', kind: 'CiliumNetworkPolicy', namespace: 'argocd'})),
  ]
  const inventory = await getObject<Obj & {data?: Record<string, string>}>(kube, {apiVersion: 'v1', kind: 'ConfigMap', name: 'talos-bootstrap-manifests-inventory', namespace: 'kube-system'})
  return {
    cr: {spec: cr?.spec, status: cr?.status},
    orders: orders.map((o) => o?.spec),
    release: release && {revision: release.revision, status: release.status, chart: release.chartVersion, config: release.config},
    secrets: [...(await secretNames('ichor-system')), ...(await secretNames('kokumi')), ...(await secretNames('argocd'))].sort(),
    policies: policies.map((p) => `${p.metadata.namespace}/${p.metadata.name}`).sort(),
    inventoryKeys: Object.keys(inventory?.data ?? {}).filter((k) => /cilium/i.test(k)),
    controlPlaneHasCilium: h.controlPlanes.some((ip) => /KubeInlineManifestConfig|inlineManifests/.test(nodeConfig(h, ip))),
  }
}

