// Steps on the Cilium release: wait for the bootstrapped DaemonSet, adopt it into Helm;
// day-2, change its values (validate, upgrade with rollback, wait, record).
import {isDeepStrictEqual} from 'node:util'
import {CILIUM_RELEASE} from '../constants.js'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import type {CniContext} from './context.js'
import {daemonSetReady, readCiliumRelease, readDaemonSetReadiness} from './reads.js'
import {readWorkloadRollout} from '../kube/reads.js'
import {
  isInterruptedInstall,
  isPending,
  pendingDeadline,
  releaseHistory,
  ReleasePendingError,
  settlePendingRelease,
  waitForSettledRelease,
} from '../helm/pending.js'
import {helmInstall, helmUpgrade, HelmReleaseError} from '../helm/release.js'
import {valuesHash, type ReleaseRecord} from '../helm/release-record.js'
import type {Kube} from '../kube/client.js'
import {deleteObject} from '../kube/objects.js'
import {waitForDaemonSetReady, waitForDeploymentRollout} from '../kube/wait.js'
import type {Session} from '../session/session.js'
import {installationChanged, readInstallation, writeInstallationSpec, writeInstallationStatus, type CniStatus} from '../state/installation.js'
import {holds, missing} from '../tasks/probe.js'
import type {Later, Task} from '../tasks/types.js'
import type {Values} from '../values/path.js'
import {once} from '../tasks/memo.js'

/** The release record, read once per run (it carries the whole chart) until a step changes the release. */
export interface CiliumReleaseView {
  get(): Promise<ReleaseRecord | undefined>
  forget(): void
}

export function ciliumReleaseView(session: Session): CiliumReleaseView {
  const record = once(() => session.kube().then(readCiliumRelease))
  return {
    get: record,
    forget() {
      record.forget()
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
      if (record.status !== 'deployed') {
        // A release with history was adopted; its newest revision is a day-2 change that failed.
        if (isPending(record.status) || isInterruptedInstall(await releaseHistory(await p.session.kube(), CILIUM_RELEASE.name, CILIUM_RELEASE.namespace))) {
          return missing(`release ${CILIUM_RELEASE.name} is ${record.status} (revision ${record.revision})`)
        }
        return holds(adoptedButFailed(record))
      }
      const same = valuesHash(record.config) === valuesHash(await p.values())
      return holds(
        `release ${CILIUM_RELEASE.name} revision ${record.revision} (chart ${record.chartVersion})${same ? '' : `; ${DRIFT_MESSAGE}: ${RESTORE_CILIUM_VALUES}`}`,
      )
    },
    async run(progress) {
      const kube = await p.session.kube()
      p.release.forget()
      if (await clearInterruptedAdoption(kube, progress)) return
      // No rollback on an adoption: rolling back an install would uninstall a running CNI.
      await helmInstall({
        ...(await p.session.helmTarget()),
        release: CILIUM_RELEASE.name,
        namespace: CILIUM_RELEASE.namespace,
        chartPath: await p.chartPath(),
        values: await p.values(),
        takeOwnership: true,
        wait: true,
        timeoutSeconds: Math.ceil(p.timeoutMs / 1000),
      })
    },
  }
}

const DRIFT_MESSAGE = `the values of release ${CILIUM_RELEASE.namespace}/${CILIUM_RELEASE.name} differ from the IchorInstallation's (changed outside ichor)`
/** With no arguments, `cni values set` applies the stored user layer again (see its --help). */
const RESTORE_CILIUM_VALUES = 'ichor cni values set'

/**
 * Drift between the deployed Cilium release and the values the IchorInstallation holds
 * (an out-of-band `helm upgrade`): read on every run, never recorded away.
 */
export async function ciliumReleaseDrift(kube: Kube, effective: Values): Promise<{subject: string; message: string; restore: string}[]> {
  const record = await readCiliumRelease(kube)
  if (!record || record.status !== 'deployed' || valuesHash(record.config) === valuesHash(effective)) return []
  return [
    {subject: `${CILIUM_RELEASE.namespace}/${CILIUM_RELEASE.name}`, message: `${DRIFT_MESSAGE} at revision ${record.revision}`, restore: RESTORE_CILIUM_VALUES},
  ]
}

/**
 * A run killed during `helm install` leaves a record in pending-install (its helm process
 * may still be finishing: give it the time to). A record still pending after that, or a
 * failed one, describes an adoption that never completed; the objects it was adopting
 * are the bootstrap's and keep running, so the record alone is removed and the
 * adoption done again. True when the release turned out deployed.
 */
async function clearInterruptedAdoption(kube: Kube, progress: (m: string) => void): Promise<boolean> {
  let record: ReleaseRecord | undefined
  let stillPending: ReleasePendingError | undefined
  try {
    // Until the helm that wrote a pending record can no longer be running (its --timeout is on the record).
    record = await waitForSettledRelease(kube, CILIUM_RELEASE.name, CILIUM_RELEASE.namespace, {onProgress: progress})
  } catch (error) {
    if (!(error instanceof ReleasePendingError)) throw error
    record = error.record
    stillPending = error
  }
  if (!record) return false
  if (record.status === 'deployed') return true
  // A pending record is removed only once the helm ichor started to write it is provably
  // gone; one that may only be paused would overwrite the new adoption's record (pending.ts).
  if (stillPending && !stillPending.writerGone) throw stillPending
  const history = await releaseHistory(kube, CILIUM_RELEASE.name, CILIUM_RELEASE.namespace)
  // Only a lone first revision is an adoption that did not finish. Anything longer is a
  // release that deployed once: its superseded and failed revisions are the rollback
  // history Cilium's upgrade guide relies on, and helm install would refuse the name anyway.
  if (!isInterruptedInstall(history)) {
    // A day-2 operation still pending is not the adoption's to clear.
    if (stillPending) throw stillPending
    progress(adoptedButFailed(record))
    return true
  }
  await deleteObject(kube, {apiVersion: 'v1', kind: 'Secret', namespace: CILIUM_RELEASE.namespace, name: history[0]!.secretName})
  progress(`removed the record of an adoption that did not finish (${record.status})`)
  return false
}

function adoptedButFailed(record: ReleaseRecord): string {
  return `release ${CILIUM_RELEASE.name} was adopted; its newest revision ${record.revision} is ${record.status} (a change after the adoption failed): \`${RESTORE_CILIUM_VALUES}\` applies the stored values again`
}

// ---------------------------------------------------------------------------------------
// Day-2: a change of Cilium's values (`ichor cni values set|edit`)

/** A validated change, resolved by the validation step under the Lease. */
export interface CiliumValuesChange {
  /** The user layer to store. */
  user: Values
  /** Defaults ⟶ user ⟶ owned. */
  effective: Values
  hash: string
  chartPath: string
  chartVersion: string
  /** The user layer the CR held before. */
  previousUser: Values
  notes: string[]
  /** The IchorInstallation and the release as the plan read them (under the Lease). */
  context: CniContext
}

/** Before anything changes: the values engine with the live cluster's facts; bad values are exit 2. */
export function validateCiliumValuesTask(p: {change: Later<CiliumValuesChange>}): Task {
  return {
    id: 'validate-values',
    title: "Validate the Cilium values against the chart and the live cluster's facts",
    mutating: false,
    check: true,
    async probe() {
      const c = await p.change()
      return holds(`valid for cilium ${c.chartVersion}${c.notes.length ? `; ${c.notes.join('; ')}` : ''}`)
    },
    async run() {},
  }
}

/** helm upgrade with the full effective values and rollback on failure; skipped when the release already runs them. */
export function upgradeCiliumValuesTask(p: {
  session: Session
  change: Later<CiliumValuesChange>
  timeoutMs: number
  /** helm's wait budget when it is not timeoutMs (`cni upgrade`: scaled with the node count). */
  helmTimeoutMs?: Later<number>
  title?: string
}): Task {
  const ns = CILIUM_RELEASE.namespace
  return {
    id: 'helm-upgrade',
    title: p.title ?? `Upgrade Helm release ${ns}/${CILIUM_RELEASE.name} with the new values (rollback on failure)`,
    async probe() {
      const [record, c] = await Promise.all([readCiliumRelease(await p.session.kube()), p.change()])
      if (!record) return missing(`no Helm release ${CILIUM_RELEASE.name}`)
      if (record.status !== 'deployed') return missing(`release ${CILIUM_RELEASE.name} revision ${record.revision} is ${record.status}`)
      if (record.chartVersion !== c.chartVersion) return missing(`revision ${record.revision} runs chart ${record.chartVersion}, not ${c.chartVersion}`)
      if (valuesHash(record.config) !== c.hash) return missing(`revision ${record.revision} runs other values`)
      return holds(`revision ${record.revision} runs these values (chart ${record.chartVersion})`)
    },
    async run(progress) {
      const kube = await p.session.kube()
      const c = await p.change()
      const timeoutSeconds = Math.ceil((p.helmTimeoutMs ? await p.helmTimeoutMs() : p.timeoutMs) / 1000)
      // Twice at most: a helm from an interrupted run may start its rollback (a new pending
      // record) just after the wait saw its failed upgrade; helm then refuses this one.
      for (let attempt = 1; ; attempt++) {
        const record = await settlePendingRelease(kube, CILIUM_RELEASE.name, ns, {progress})
        if (record?.status === 'deployed' && record.chartVersion === c.chartVersion && valuesHash(record.config) === c.hash) return
        if (!record)
          throw new IchorError(`no Helm release ${ns}/${CILIUM_RELEASE.name}: Cilium was never adopted`, {
            hint: 'run `ichor init` (same flags as the first run) to adopt it',
          })
        // What the plan read is what it may change: settled here when it read an operation in
        // progress, or when helm refused for one (the helm an interrupted run left, which holds no Lease).
        const read = c.context.release
        await releaseStillAsRead(p.session, attempt === 1 && read && !isPending(read.status) ? read.revision : record.revision)
        try {
          await helmUpgrade({
            ...(await p.session.helmTarget()),
            release: CILIUM_RELEASE.name,
            namespace: ns,
            chartPath: c.chartPath,
            values: c.effective,
            wait: true,
            rollbackOnFailure: true,
            timeoutSeconds,
          })
          return
        } catch (error) {
          if (!(error instanceof HelmReleaseError)) throw error
          if (isOperationInProgress(error) && attempt === 1) {
            progress(`helm refused: a helm from an interrupted run is still working on release ${ns}/${CILIUM_RELEASE.name}; waiting for it, then trying again`)
            continue
          }
          if (isOperationInProgress(error)) throw await operationInProgressError(error, kube)
          await throwUpgradeFailure(error, kube)
        }
      }
    },
  }
}

/**
 * Immediately before helm starts: the Lease is still this command's, and the release's newest
 * revision is the one the plan read. A command paused past its Lease (another operator broke
 * it and upgraded meanwhile) would otherwise overwrite that operator's values with a new revision.
 */
async function releaseStillAsRead(session: Session, revision: number): Promise<void> {
  await session.guard()
  const now = await readCiliumRelease(await session.kube())
  if (now?.revision !== revision) {
    throw new IchorError(
      `Helm release ${CILIUM_RELEASE.namespace}/${CILIUM_RELEASE.name} moved from revision ${revision} to ${now ? `${now.revision} (${now.status})` : 'none'} since this command read it; nothing was changed`,
      {
        exitCode: EXIT.lease,
        hint: 'another helm or ichor command changed the release meanwhile: check it (ichor cni status), then run this command again',
      },
    )
  }
}

async function throwUpgradeFailure(error: HelmReleaseError, kube: Kube): Promise<never> {
  const ns = CILIUM_RELEASE.namespace
  // Which workloads held the rollout, as they are now (after the rollback).
  const [daemonSet, operator] = await Promise.all([
    readWorkloadRollout(kube, 'DaemonSet', ns, 'cilium'),
    readWorkloadRollout(kube, 'Deployment', ns, 'cilium-operator'),
  ])
  throw ciliumUpgradeFailure(error, {after: await readCiliumRelease(kube), daemonSet, operator})
}

/** Helm's refusal while another operation's record is pending (helm v3.18.0, v3.18.6, v4.1.4 and v4.3.2 pkg/action/action.go errPending). */
function isOperationInProgress(error: HelmReleaseError): boolean {
  return /another operation \(install\/upgrade\/rollback\) is in progress/.test(error.helmMessage)
}

async function operationInProgressError(error: HelmReleaseError, kube: Kube): Promise<IchorError> {
  const record = await readCiliumRelease(kube)
  const {deadline, timeoutSeconds} = record
    ? pendingDeadline(record, await releaseHistory(kube, CILIUM_RELEASE.name, CILIUM_RELEASE.namespace))
    : {deadline: Date.now(), timeoutSeconds: undefined}
  const left = Math.max(0, Math.round((deadline - Date.now()) / 1000))
  return new IchorError(
    `${error.message}\na helm from an interrupted run is still working on release ${CILIUM_RELEASE.namespace}/${CILIUM_RELEASE.name}${record ? ` (revision ${record.revision} ${record.status})` : ''}: ichor waits for it up to ${left}s more${timeoutSeconds ? ` (the --timeout ${timeoutSeconds}s it was given)` : ''}`,
    {hint: 'the IchorInstallation was not changed; run the same command again: it waits for that helm to finish first', cause: error},
  )
}

interface WorkloadState {
  desired: number
  ready: number
  rolledOut: boolean
  state: string
}

/**
 * A failed `helm upgrade` of Cilium as the operator reads it: helm's own error first, then
 * the release as it is now (rolled back only when helm says so), then the workloads. Pods
 * are blamed only when some are not ready: helm also fails for reasons of its own.
 */
export function ciliumUpgradeFailure(
  error: HelmReleaseError,
  now: {after?: Pick<ReleaseRecord, 'revision' | 'status'>; daemonSet?: WorkloadState; operator?: WorkloadState},
): IchorError {
  const ns = CILIUM_RELEASE.namespace
  const {after, daemonSet: ds, operator: op} = now
  const release = after
    ? error.rolledBack && after.status === 'deployed'
      ? `release rolled back to revision ${after.revision} (deployed) with the previous values`
      : `release revision ${after.revision} is ${after.status}${error.rolledBack ? '' : ' (helm did not roll it back)'}`
    : 'no release record'
  const pods = [ds && `cilium DaemonSet ${ds.ready}/${ds.desired} ready (${ds.state})`, op && `cilium-operator ${op.ready}/${op.desired} ready (${op.state})`]
    .filter(Boolean)
    .join('; ')
  // Helm's wait says so in its error (Helm 3: "timed out waiting for the condition", Helm 4's
  // watcher: "resource not ready" / "context deadline exceeded"); after a rollback the pods
  // that were not ready may be gone, so helm's words count as much as the pods now.
  const unready = [ds, op].some((w) => w && !w.rolledOut) || /not ready|timed out waiting|context deadline exceeded/i.test(error.helmMessage)
  const next = unready
    ? `see why the pods are not ready (kubectl -n ${ns} get pods -l k8s-app=cilium), fix the values and run the command again`
    : `helm's error above says what failed (the pods are ready); see helm history ${CILIUM_RELEASE.name} -n ${ns}, then run the command again`
  return new IchorError(`${error.message}\n${release}; workloads: ${pods || 'not found'}`, {
    hint: `the IchorInstallation was not changed; ${next}`,
    cause: error,
  })
}

/** Cilium's operator first, then the agents (its upgrade guide's order). */
export function waitCiliumRolloutTask(p: {session: Session; kind: 'Deployment' | 'DaemonSet'; timeoutMs: number}): Task {
  const ns = CILIUM_RELEASE.namespace
  const name = p.kind === 'Deployment' ? 'cilium-operator' : 'cilium'
  return {
    id: p.kind === 'Deployment' ? 'wait-operator' : 'wait-agents',
    title: p.kind === 'Deployment' ? 'Wait for the Cilium operator to roll out' : 'Wait for the Cilium DaemonSet to roll out',
    mutating: false,
    async probe() {
      const w = await readWorkloadRollout(await p.session.kube(), p.kind, ns, name)
      return w?.rolledOut ? holds(`${w.ready}/${w.desired} ready`) : missing(w ? w.state : `${p.kind} ${ns}/${name} does not exist`)
    },
    async run(progress) {
      const kube = await p.session.kube()
      const wait = p.kind === 'Deployment' ? waitForDeploymentRollout : waitForDaemonSetReady
      await wait(kube, ns, name, {timeoutMs: p.timeoutMs, onProgress: progress})
    },
  }
}

/** The user layer into the spec, then what the release runs into the status. */
export function recordCiliumValuesTask(p: {session: Session; change: Later<CiliumValuesChange>}): Task {
  return {
    id: 'record-values',
    title: 'Record the user layer and the applied values hash in the IchorInstallation',
    async probe() {
      const kube = await p.session.kube()
      const [cr, record, c] = await Promise.all([readInstallation(kube), readCiliumRelease(kube), p.change()])
      if (!cr) return missing('no IchorInstallation')
      if (!isDeepStrictEqual(cr.spec.cni.cilium?.values ?? {}, c.user)) return missing('the stored user layer differs')
      if (!isDeepStrictEqual(cr.status?.cni, cniStatusOf(record))) return missing('the status does not record the applied values')
      return holds(`hash ${c.hash.slice(0, 12)} recorded`)
    },
    async run() {
      const kube = await p.session.kube()
      const [cr, record, c] = await Promise.all([readInstallation(kube), readCiliumRelease(kube), p.change()])
      if (!cr) throw new IchorError('the IchorInstallation is gone')
      // The new layer was made from the one the plan read: if another command stored another one
      // since, writing ours would drop its keys. (This plan's own earlier writes, e.g. the
      // kube-proxy mode, move the resourceVersion but not the layer.)
      if (!isDeepStrictEqual(cr.spec.cni.cilium?.values ?? {}, c.previousUser)) throw await installationChanged(kube, c.context.installation)
      // Each write over the version just read: a change landing in between is a conflict (exit 3).
      const written = await writeInstallationSpec(kube, {...cr.spec, cni: {...cr.spec.cni, cilium: {...cr.spec.cni.cilium, values: c.user}}}, {readAt: cr})
      await writeInstallationStatus(kube, {stack: {}, ...cr.status, cni: cniStatusOf(record)}, {readAt: written})
    },
  }
}

/** What the release runs, as the CR status records it; upgradeCompatibility is the owned value the release carries. */
export function cniStatusOf(record: ReleaseRecord | undefined): CniStatus {
  if (!record) return {}
  const status: CniStatus = {chartVersion: record.chartVersion, appliedValuesHash: valuesHash(record.config), releaseRevision: record.revision}
  const compat = record.config.upgradeCompatibility
  if (typeof compat === 'string' && compat) status.upgradeCompatibility = compat
  return status
}
