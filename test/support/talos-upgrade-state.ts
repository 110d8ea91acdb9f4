// What a Talos upgrade test compares: what each node says it runs (`talosctl version`), each
// Node's readiness and cordon, and what the IchorInstallation records.
import {join} from 'node:path'
import type {Kube} from '../../src/lib/kube/client.js'
import {listObjects, type KubeObject} from '../../src/lib/kube/objects.js'
import {readInstallation} from '../../src/lib/state/installation.js'
import type {HarnessCluster} from '../harness/cluster.js'

type NodeObject = KubeObject & {spec?: {unschedulable?: boolean}; status?: {conditions?: {type: string; status: string}[]}}

export async function talosUpgradeState(h: HarnessCluster, kube: Kube) {
  const all = [...h.controlPlanes, ...h.workers]
  const version = await h.nodes.run(['version', '--nodes', all.join(','), '--talosconfig', join(h.stateDir, 'talosconfig')])
  const tags = [...version.stdout.matchAll(/NODE:\s+(\S+)\n\s+Tag:\s+(\S+)/g)].map((m) => `${m[1]}=${m[2]}`).sort()
  const nodes = (await listObjects<NodeObject>(kube, {apiVersion: 'v1', kind: 'Node'}))
    .map((n) => `${n.metadata.name}:${n.status?.conditions?.find((c) => c.type === 'Ready')?.status}${n.spec?.unschedulable ? ':cordoned' : ''}`)
    .sort()
  const cr = await readInstallation(kube)
  return {tags, nodes, spec: cr?.spec.talos.talosVersion, status: cr?.status?.talos}
}
