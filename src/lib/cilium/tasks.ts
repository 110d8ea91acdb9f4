// Steps on the Cilium release: wait for the bootstrapped DaemonSet, adopt it into Helm.
import {CILIUM_RELEASE} from '../constants.js'
import {daemonSetReady, readCiliumRelease, readDaemonSetReadiness} from '../health/reads.js'
import {ReleasePendingError, waitForSettledRelease} from '../helm/pending.js'
import {helmInstall, valuesHash, type ReleaseRecord} from '../helm/release.js'
import type {Kube} from '../kube/client.js'
import {deleteObject, listObjects} from '../kube/objects.js'
import {waitForDaemonSetReady} from '../kube/wait.js'
import type {Session} from '../session/session.js'
import {holds, missing} from '../tasks/probe.js'
import type {Later, Task} from '../tasks/types.js'
import type {Values} from '../values/path.js'

/** The release record, read once per run (it carries the whole chart) until a step changes the release. */
export interface CiliumReleaseView {
  get(): Promise<ReleaseRecord | undefined>
  forget(): void
}

export function ciliumReleaseView(session: Session): CiliumReleaseView {
  let record: Promise<ReleaseRecord | undefined> | undefined
  return {
    get() {
      record ??= session.kube().then(readCiliumRelease)
      record.catch(() => (record = undefined))
      return record
    },
    forget() {
      record = undefined
    },
  }
}

export function waitCiliumTask(p: {session: Session; timeoutMs: number}): Task {
  return {
    id: 'wait-cilium',
    title: 'Wait for the Cilium DaemonSet',
    mutating: false,
    async probe() {
      const r = await readDaemonSetReadiness(await p.session.kube(), CILIUM_RELEASE.namespace, 'cilium')
      return daemonSetReady(r) ? holds(`${r.ready}/${r.desired} ready`) : missing('the cilium DaemonSet is not ready')
    },
    async run(progress) {
      await waitForDaemonSetReady(await p.session.kube(), CILIUM_RELEASE.namespace, 'cilium', {timeoutMs: p.timeoutMs, onProgress: progress})
    },
  }
}

export interface AdoptionInput {
  session: Session
  release: CiliumReleaseView
  chartPath: Later<string>
  values: Later<Values>
  timeoutMs: number
}

/** helm install --take-ownership over the objects Talos bootstrapped: same chart, same values, no object changed. */
export function adoptCiliumTask(p: AdoptionInput): Task {
  return {
    id: 'adopt-cilium',
    title: `Adopt Cilium into Helm release ${CILIUM_RELEASE.namespace}/${CILIUM_RELEASE.name} (--take-ownership)`,
    hint: 'the bootstrapped Cilium keeps running; rerun the same command to retry the adoption',
    async probe() {
      const record = await p.release.get()
      if (!record) return missing(`no Helm release ${CILIUM_RELEASE.name} yet`)
      if (record.status !== 'deployed') return missing(`release ${CILIUM_RELEASE.name} is ${record.status} (revision ${record.revision})`)
      const same = valuesHash(record.config) === valuesHash(await p.values())
      return holds(`release ${CILIUM_RELEASE.name} revision ${record.revision} (chart ${record.chartVersion})${same ? '' : '; its values differ from these: use `ichor cni values set` to change them'}`)
    },
    async run(progress) {
      const kube = await p.session.kube()
      p.release.forget()
      if (await clearInterruptedAdoption(kube, p.timeoutMs, progress)) return
      // No rollback on an adoption: rolling back an install would uninstall a running CNI.
      await helmInstall({
        ...(await p.session.helmTarget()), release: CILIUM_RELEASE.name, namespace: CILIUM_RELEASE.namespace, chartPath: await p.chartPath(),
        values: await p.values(), takeOwnership: true, wait: true, timeoutSeconds: Math.ceil(p.timeoutMs / 1000),
      })
    },
  }
}

/**
 * A run killed during `helm install` leaves a record in pending-install (its helm process
 * may still be finishing: give it the time to). A record still pending after that, or a
 * failed one, describes an adoption that never completed; the objects it was adopting
 * are the bootstrap's and keep running, so the record alone is removed and the
 * adoption done again. True when the release turned out deployed.
 */
async function clearInterruptedAdoption(kube: Kube, timeoutMs: number, progress: (m: string) => void): Promise<boolean> {
  let record: ReleaseRecord | undefined
  try {
    record = await waitForSettledRelease(kube, CILIUM_RELEASE.name, CILIUM_RELEASE.namespace, {timeoutMs: Math.min(timeoutMs, 60_000), onProgress: progress})
  } catch (error) {
    if (!(error instanceof ReleasePendingError)) throw error
    record = error.record
  }
  if (!record) return false
  if (record.status === 'deployed') return true
  const secrets = await listObjects(kube, {apiVersion: 'v1', kind: 'Secret', namespace: CILIUM_RELEASE.namespace}, {labelSelector: `owner=helm,name=${CILIUM_RELEASE.name}`})
  for (const s of secrets) {
    if (s.metadata.labels?.status !== 'deployed') await deleteObject(kube, {apiVersion: 'v1', kind: 'Secret', namespace: CILIUM_RELEASE.namespace, name: s.metadata.name})
  }
  progress(`removed the record of an adoption that did not finish (${record.status})`)
  return false
}
