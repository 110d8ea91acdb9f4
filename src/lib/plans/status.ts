// `ichor status`: a read plan (no Lease, nothing changes, no passphrase asked): the cluster at a glance.
import {readClusterStatus, type ClusterStatus} from '../overview/read.js'
import type {ReadAccessOptions} from './options.js'
import {runReadPlan, type ReadPlan} from './run.js'

export function statusPlan(o: ReadAccessOptions): ReadPlan<ClusterStatus> {
  return {
    command: 'status',
    session: {kubeconfig: o.kubeconfig, context: o.context},
    // This machine's talosconfig only: a glance never asks for the state passphrase.
    talos: {talosconfig: o.talosconfig, stateDir: o.stateDir},
    read: async ({session, talos}) => readClusterStatus({kube: await session.kube(), talos}),
  }
}

export function runStatus(o: ReadAccessOptions): Promise<ClusterStatus> {
  return runReadPlan(statusPlan(o), o)
}
