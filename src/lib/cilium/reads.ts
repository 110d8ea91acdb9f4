// Read-only reads of the Cilium release ichor owns, shared by the cni steps and their probes.
import {CILIUM_RELEASE} from '../constants.js'
import {readReleaseRecord, type ReleaseRecord} from '../helm/release-record.js'
import type {Kube} from '../kube/client.js'
import {getObject, type KubeObject} from '../kube/objects.js'

export function readCiliumRelease(kube: Kube): Promise<ReleaseRecord | undefined> {
  return readReleaseRecord(kube, CILIUM_RELEASE.name, CILIUM_RELEASE.namespace)
}

export interface DaemonSetReadiness {
  desired: number
  ready: number
}

/** Undefined when the DaemonSet does not exist. */
export async function readDaemonSetReadiness(kube: Kube, namespace: string, name: string): Promise<DaemonSetReadiness | undefined> {
  const ds = await getObject<KubeObject & {status?: {numberReady?: number; desiredNumberScheduled?: number}}>(kube, {
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    name,
    namespace,
  })
  return ds && {desired: ds.status?.desiredNumberScheduled ?? 0, ready: ds.status?.numberReady ?? 0}
}

export function daemonSetReady(r: DaemonSetReadiness | undefined): r is DaemonSetReadiness {
  return r !== undefined && r.desired > 0 && r.ready === r.desired
}
