// Helm release operations on the real `helm` binary (Helm 3.18+ or Helm 4), one function
// per verb like Helm's own pkg/action: install (adoption with --take-ownership), upgrade
// with rollback on failure, uninstall, status. Reading the release record Helm stores in a
// Secret, without a helm process, is release-record.ts.
//
// Flags differ by major version and we never pass one the detected helm lacks:
//   rollback on failure   Helm 3: --atomic            Helm 4: --rollback-on-failure
//   wait for readiness    Helm 3: --wait (bool)       Helm 4: --wait=watcher (kstatus)
//   SSA conflicts         Helm 3: n/a (client-side)   Helm 4: --force-conflicts (adoption and upgrade;
//                                                     upgrade with --server-side=true, see upgradeArgs)
// Helm 4 reports a field the previous owner ("talos") also set as a conflict whenever the
// values differ, and fields holding a zero value compare as different after the API server
// drops them; so the adoption forces (see installArgs). Until the hand-over gives Talos's
// fields to helm (talos/field-manager.ts) Talos co-owns every field, so each upgrade forces
// too (observed on the harness with helm 4.1.4: without it the first changed value is a
// conflict with "talos"), as does one after another manager (kubectl) wrote. Forcing means
// helm never refuses a differing field: that the adoption changes no object is checked by
// the e2e tests, which compare every adopted object before and after.
// Values always go in as JSON on stdin (`--values -`), never re-serialised as YAML.
import {mkdtempSync, rmSync, symlinkSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {basename, join, resolve} from 'node:path'
import {IchorError} from '../errors/errors.js'
import {runProcess, startError} from '../exec/run.js'
import {findHelm, type HelmBinary} from './binary.js'
import {helmEnv} from './env.js'
import {cleanHelmError} from './template.js'
import {HELM_MACHINE_LABEL, HELM_RUN_LABEL, machineMark, newRunToken} from './local-helms.js'
import {readReleaseRecord, type HelmReleaseJson} from './release-record.js'
import {HELM_GUARD_MARGIN_MS, HELM_GUARD_POLL_MS, helmGuardDeadline} from './guard.js'
import {connectKube, type Kube} from '../kube/client.js'
import {readServerClock} from '../kube/lease.js'

export interface HelmTarget {
  /** Kubeconfig file helm talks to the cluster with. */
  kubeconfig: string
  kubeContext?: string
}

export interface ReleaseRef extends HelmTarget {
  release: string
  namespace: string
}

export interface InstallOptions extends ReleaseRef {
  /** Chart archive (.tgz) or directory. */
  chartPath: string
  /** The user-supplied values (what Helm records as the release's config). */
  values: unknown
  /** Adopt existing objects whatever their ownership metadata says. */
  takeOwnership?: boolean
  /** Wait until the release's workloads are ready. Default true. */
  wait?: boolean
  /** Helm's --timeout, per Kubernetes operation. Default 300. */
  timeoutSeconds?: number
  createNamespace?: boolean
  /** The margin over helm's entitlement before ichor calls it hung (guard.ts). Default 120 s. */
  guardMarginMs?: number
}

export interface UpgradeOptions extends InstallOptions {
  /** Roll back to the previous revision when the upgrade fails. Default true. */
  rollbackOnFailure?: boolean
  /**
   * Helm 4 applies server side: take fields another manager (Talos, kubectl) also owns.
   * Ignored on Helm 3, whose client-side patch has no conflicts. Default true, because
   * the release is what ichor owns once Cilium has been adopted.
   */
  forceConflicts?: boolean
}

export interface ReleaseStatus {
  release: string
  namespace: string
  /** Helm's status: deployed, failed, pending-install, pending-upgrade, superseded, ... */
  status: string
  revision: number
  chartName: string
  chartVersion: string
}

/** helm refused or failed; `helmMessage` is helm's own words without the "Error:" prefix. */
export class HelmReleaseError extends IchorError {
  constructor(
    readonly verb: 'install' | 'upgrade' | 'status' | 'uninstall',
    readonly release: string,
    readonly helmMessage: string,
    options: {hint?: string; rolledBack?: boolean} = {},
  ) {
    super(`helm ${verb} of release "${release}" failed: ${helmMessage}`, {hint: options.hint})
    this.name = 'HelmReleaseError'
    this.rolledBack = options.rolledBack ?? false
  }

  /** helm said it rolled the failed upgrade back (only then is the previous revision deployed again). */
  readonly rolledBack: boolean
}

const linked = new Map<string, string>()

/**
 * The path to run helm by. Helm's kube client names its field manager after the invoked
 * binary (filepath.Base(os.Args[0])) unless the program sets kube.ManagedFieldsManager.
 * The official CLI sets it to "helm" (seen with 4.1.4: a renamed binary still applies as
 * "helm"), but a repackaged build may not, and then `/opt/helm-4.1.4` would own Cilium's
 * fields as "helm-4.1.4" and conflict with every other run. So a binary with another
 * basename is called through a symlink named `helm` (made once per process).
 */
export function helmInvocationPath(path: string): string {
  if (basename(path) === 'helm') return path
  let link = linked.get(path)
  if (!link) {
    const dir = mkdtempSync(join(tmpdir(), 'ichor-helm-'))
    link = join(dir, 'helm')
    symlinkSync(resolve(path), link)
    linked.set(path, link)
    process.once('exit', () => rmSync(dir, {recursive: true, force: true}))
  }
  return link
}

/**
 * The --timeout ichor gave the helm that wrote a revision, as a label of its release Secret
 * (helm's --labels, Helm 3.13+ and 4): a rerun, from any laptop, reads from a pending record
 * how long the helm that wrote it may still be working (see src/lib/helm/pending.ts).
 */
export const HELM_TIMEOUT_LABEL = 'ichor.maesh.dev/helm-timeout-seconds'

/** --timeout, and the labels that let a later run tell whether this helm can still be working (pending.ts). */
function timeoutArgs(seconds: number): string[] {
  const machine = machineMark()
  const labels = [`${HELM_TIMEOUT_LABEL}=${seconds}`, `${HELM_RUN_LABEL}=${newRunToken()}`]
  if (machine) labels.push(`${HELM_MACHINE_LABEL}=${machine}`)
  return ['--timeout', `${seconds}s`, '--labels', labels.join(',')]
}

function targetArgs(t: HelmTarget): string[] {
  const args = ['--kubeconfig', t.kubeconfig]
  if (t.kubeContext) args.push('--kube-context', t.kubeContext)
  return args
}

/** `helm install` arguments for the detected helm (exported so each version's flags are testable). */
export function installArgs(helm: Pick<HelmBinary, 'major'>, opts: InstallOptions): string[] {
  const args = ['install', opts.release, opts.chartPath, '--namespace', opts.namespace, '--values', '-', '--output', 'json']
  args.push(...timeoutArgs(opts.timeoutSeconds ?? 300))
  // No rollback on install: rolling back a failed adoption would uninstall the running
  // objects it adopted (the CNI itself). A failed install is left for a rerun to fix.
  if (opts.wait ?? true) args.push(helm.major >= 4 ? '--wait=watcher' : '--wait')
  if (opts.takeOwnership) {
    args.push('--take-ownership')
    // Helm 4 applies server side. The objects it adopts were applied by their previous
    // owner (Talos applies inline manifests with field manager "talos") with the same
    // values, yet fields holding a zero value (readOnly: false, initialDelaySeconds: 0,
    // {}) are dropped from the stored object and then compare as changed: without force
    // the adoption fails on conflicts with "talos". Taking them over is the adoption.
    if (helm.major >= 4) args.push('--force-conflicts')
  }
  if (opts.createNamespace) args.push('--create-namespace')
  return [...args, ...targetArgs(opts)]
}

/** `helm upgrade` arguments for the detected helm. */
export function upgradeArgs(helm: Pick<HelmBinary, 'major'>, opts: UpgradeOptions): string[] {
  // --reset-values: the chart's defaults plus exactly these values, never the last
  // release's values merged in, so the record says what the cluster runs.
  const args = ['upgrade', opts.release, opts.chartPath, '--namespace', opts.namespace, '--values', '-', '--reset-values', '--output', 'json']
  args.push(...timeoutArgs(opts.timeoutSeconds ?? 300))
  const rollback = opts.rollbackOnFailure ?? true
  if (helm.major >= 4) {
    if (rollback) args.push('--rollback-on-failure')
    if (opts.wait ?? true) args.push('--wait=watcher')
    // --force-conflicts needs server-side apply, and Helm 4's default --server-side=auto
    // follows the previous revision's apply method: client-side for every revision Helm 3
    // wrote, and Helm 4 then refuses the pair ("forceConflicts enabled when serverSideApply
    // disabled"), in the upgrade and in its rollback (helm v4.3.2 pkg/action/upgrade.go
    // getUpgradeServerSideValue, pkg/action/rollback.go prepareRollback, pkg/kube/client.go
    // ClientUpdateOptionServerSideApply). So ask for server side explicitly: the upgrade
    // then moves a client-side release to server-side apply (it upgrades the client-side
    // field managers first), and the rollback inherits the same flags.
    if (opts.forceConflicts ?? true) args.push('--server-side=true', '--force-conflicts')
  } else {
    // Helm 3's --atomic implies --wait.
    if (rollback) args.push('--atomic')
    else if (opts.wait ?? true) args.push('--wait')
  }
  if (opts.takeOwnership) args.push('--take-ownership')
  return [...args, ...targetArgs(opts)]
}

/** Helm's error without its "Error:" prefix, and without Helm 4's structured log lines when words remain. */
function helmError(result: {stderr: string; stdout: string}): string {
  const message = cleanHelmError(result.stderr || result.stdout)
  const words = message
    .split('\n')
    .filter((line) => !/^level=\w+ /.test(line))
    .join('\n')
    .trim()
  return words || message
}

/** How ichor guards one helm run against a hung process (guard.ts). */
interface GuardOptions {
  timeoutSeconds: number
  /** The release helm works on, read before signalling it and when it fails. */
  ref?: ReleaseRef
  /** An upgrade that rolls back on failure. */
  rollbackOnFailure?: boolean
  /** The margin over helm's entitlement. Default HELM_GUARD_MARGIN_MS. */
  marginMs?: number
}

/** What the release record says now, for an error: "revision 3 is failed". */
async function recordSays(kube: Kube | undefined, ref: ReleaseRef | undefined): Promise<string | undefined> {
  if (!kube || !ref) return undefined
  try {
    const r = await readReleaseRecord(kube, ref.release, ref.namespace)
    return r ? `the release record says revision ${r.revision} is ${r.status}` : 'the release has no record'
  } catch {
    return undefined
  }
}

async function runHelm(verb: HelmReleaseError['verb'], release: string, args: string[], values: unknown, guard: GuardOptions) {
  const helm = await findHelm()
  const path = helmInvocationPath(helm.path)
  const labels = args[args.indexOf('--labels') + 1] ?? ''
  const token = args.includes('--labels')
    ? labels
        .split(',')
        .find((l) => l.startsWith(`${HELM_RUN_LABEL}=`))
        ?.slice(HELM_RUN_LABEL.length + 1)
    : undefined
  const kube = guard.ref
    ? await connectKube({kubeconfig: guard.ref.kubeconfig, context: guard.ref.kubeContext, probe: false}).catch(() => undefined)
    : undefined
  const stop = new AbortController()
  const startedAt = Date.now()
  const running = runProcess(path, args, {
    input: values === undefined ? undefined : JSON.stringify(values ?? {}),
    env: helmEnv(),
    maxBuffer: 256 * 1024 * 1024,
    signal: stop.signal,
  }).catch((error: unknown) => {
    throw startError('helm', path, error)
  })
  let exited = false
  void running.then(
    () => (exited = true),
    () => (exited = true),
  )
  // helm enforces --timeout per operation; this guards only against a hung process, and never
  // signals it while the release record says it is rolling back.
  const input = {
    startedAt,
    timeoutSeconds: guard.timeoutSeconds,
    rollbackOnFailure: guard.rollbackOnFailure ?? false,
    token,
    marginMs: guard.marginMs ?? HELM_GUARD_MARGIN_MS,
  }
  let stoppedAfter: number | undefined
  void (async () => {
    let deadline = helmGuardDeadline(input)
    let offset: number | undefined
    while (!exited) {
      const wait = Math.min(Math.max(0, deadline - Date.now()), HELM_GUARD_POLL_MS)
      await Promise.race([running.catch(() => undefined), new Promise((r) => setTimeout(r, wait).unref())])
      // Due, or helm is rolling back (read the record again each poll).
      if (exited || (Date.now() < deadline && deadline !== Number.POSITIVE_INFINITY)) continue
      if (kube && guard.ref) {
        try {
          if (offset === undefined) {
            const clock = await readServerClock(kube)
            offset = clock.now() - Date.now()
          }
          const newest = await readReleaseRecord(kube, guard.ref.release, guard.ref.namespace)
          deadline = helmGuardDeadline({...input, newest, serverOffsetMs: offset})
        } catch {
          // The record cannot be read: helm's entitlement from its start stands.
        }
        if (exited || Date.now() < deadline) continue
      }
      stoppedAfter = Date.now() - startedAt
      stop.abort()
      return
    }
  })()
  const result = await running
  if (result.canceled && stoppedAfter !== undefined) {
    const says = await recordSays(kube, guard.ref)
    throw new HelmReleaseError(
      verb,
      release,
      `helm did not finish within ${Math.round(stoppedAfter / 1000)}s, more than its --timeout ${guard.timeoutSeconds}s entitles it to${says ? `; ${says}` : ''}`,
    )
  }
  if (result.overflowed) throw new HelmReleaseError(verb, release, 'helm printed more than 256 MiB')
  return {...result, recordSays: () => recordSays(kube, guard.ref)}
}

export async function helmInstall(opts: InstallOptions): Promise<ReleaseStatus> {
  const helm = await findHelm()
  const result = await runHelm('install', opts.release, installArgs(helm, opts), opts.values, {
    timeoutSeconds: opts.timeoutSeconds ?? 300,
    ref: opts,
    marginMs: opts.guardMarginMs,
  })
  if (result.exitCode !== 0) {
    const says = await result.recordSays()
    throw new HelmReleaseError('install', opts.release, `${helmError(result)}${says ? ` (${says})` : ''}`, {
      hint: `inspect it with: helm status ${opts.release} -n ${opts.namespace}; then run the same command again`,
    })
  }
  return statusFromJson(result.stdout, opts)
}

export async function helmUpgrade(opts: UpgradeOptions): Promise<ReleaseStatus> {
  const helm = await findHelm()
  const result = await runHelm('upgrade', opts.release, upgradeArgs(helm, opts), opts.values, {
    timeoutSeconds: opts.timeoutSeconds ?? 300,
    ref: opts,
    rollbackOnFailure: opts.rollbackOnFailure ?? true,
    marginMs: opts.guardMarginMs,
  })
  if (result.exitCode !== 0) {
    const says = await result.recordSays()
    const message = `${helmError(result)}${says ? ` (${says})` : ''}`
    // Only helm knows whether its rollback worked: it says "has been rolled back" then, and
    // "an error occurred while rolling back" when not (helm v3.18.0 to v4.3.2
    // pkg/action/upgrade.go failRelease).
    const rolledBack = (opts.rollbackOnFailure ?? true) && /has been rolled back/.test(message)
    throw new HelmReleaseError('upgrade', opts.release, message, {
      rolledBack,
      hint: rolledBack
        ? `helm rolled the release back to its previous revision; fix the values and run the command again (helm history ${opts.release} -n ${opts.namespace})`
        : `the release was not rolled back; inspect it with: helm history ${opts.release} -n ${opts.namespace}`,
    })
  }
  return statusFromJson(result.stdout, opts)
}

/** `helm uninstall` arguments: waits for the objects to be gone; a release already gone is not an error. */
function uninstallArgs(helm: Pick<HelmBinary, 'major'>, opts: ReleaseRef & {timeoutSeconds?: number}): string[] {
  const args = ['uninstall', opts.release, '--namespace', opts.namespace, '--wait', '--ignore-not-found', '--timeout', `${opts.timeoutSeconds ?? 300}s`]
  return [...args, ...targetArgs(opts)]
}

export async function helmUninstall(opts: ReleaseRef & {timeoutSeconds?: number}): Promise<void> {
  const helm = await findHelm()
  const result = await runHelm('uninstall', opts.release, uninstallArgs(helm, opts), undefined, {timeoutSeconds: opts.timeoutSeconds ?? 300})
  if (result.exitCode !== 0) {
    throw new HelmReleaseError('uninstall', opts.release, helmError(result), {
      hint: `inspect it with: helm status ${opts.release} -n ${opts.namespace}; then run the same command again`,
    })
  }
}

/**
 * The release's current status, or undefined when helm knows no such release. Uses
 * `helm get metadata` (Helm 3.13+): Helm 4's `status -o json` leaves the chart out.
 */
export async function helmStatus(opts: ReleaseRef): Promise<ReleaseStatus | undefined> {
  const args = ['get', 'metadata', opts.release, '--namespace', opts.namespace, '--output', 'json', ...targetArgs(opts)]
  const result = await runHelm('status', opts.release, args, undefined, {timeoutSeconds: 60})
  if (result.exitCode !== 0) {
    const message = helmError(result)
    if (/release: not found/.test(message)) return undefined
    throw new HelmReleaseError('status', opts.release, message)
  }
  let meta: {name?: string; namespace?: string; chart?: string; version?: string; revision?: number; status?: string}
  try {
    meta = JSON.parse(result.stdout) as typeof meta
  } catch {
    throw new IchorError(`helm printed no release metadata for "${opts.release}": ${result.stdout.slice(0, 200)}`)
  }
  return {
    release: meta.name ?? opts.release,
    namespace: meta.namespace ?? opts.namespace,
    status: meta.status ?? 'unknown',
    revision: meta.revision ?? 0,
    chartName: meta.chart ?? '',
    chartVersion: meta.version ?? '',
  }
}

function statusFromJson(stdout: string, ref: ReleaseRef): ReleaseStatus {
  let rel: HelmReleaseJson
  try {
    rel = JSON.parse(stdout) as HelmReleaseJson
  } catch {
    throw new IchorError(`helm printed no release JSON for "${ref.release}": ${stdout.slice(0, 200)}`)
  }
  return {
    release: rel.name ?? ref.release,
    namespace: rel.namespace ?? ref.namespace,
    status: rel.info?.status ?? 'unknown',
    revision: rel.version ?? 0,
    chartName: rel.chart?.metadata?.name ?? '',
    chartVersion: rel.chart?.metadata?.version ?? '',
  }
}
