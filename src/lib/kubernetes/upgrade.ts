// What `ichor kubernetes upgrade` reads: the Kubernetes version the control planes run (from
// their machine configs, as talosctl's own detection does), the objects Talos must never prune
// or change (the Cilium release's, the stack's, ichor's own), and the steps of its plan.
import {CILIUM_RELEASE, ICHOR_SYSTEM, INSTALLATION} from '../constants.js'
import {IchorError} from '../errors/errors.js'
import {readReleaseRecord} from '../helm/release-record.js'
import type {Kube} from '../kube/client.js'
import {describeObject, getObject, KindNotServedError, resolvePath, type KubeObject} from '../kube/objects.js'
import type {Session} from '../session/session.js'
import {installationCrd, readInstallation, writeInstallationSpec, writeInstallationStatus} from '../state/installation.js'
import {serverSideApply} from '../kube/apply.js'
import {COMPONENT_NAMESPACE} from '../stack/orders.js'
import {releaseObjectRefs} from '../talos/field-manager.js'
import {findReleaseInTalosInventory} from '../talos/inventory.js'
import {HELM_MANAGED_BY_LABEL, HELM_RELEASE_NAME_ANNOTATION, HELM_RELEASE_NAMESPACE_ANNOTATION} from '../talos/ownership.js'
import {upgradeK8s} from '../talos/talosctl.js'
import type {TalosAccess} from '../talos/access.js'
import {compareVersions, kubernetesVersionOfConfig, parseKubernetesVersion} from '../talos/versions.js'
import {holds, missing} from '../tasks/probe.js'
import type {Task} from '../tasks/types.js'
import {checkKubernetesUpgrade, parseUpgradeK8sDryRun, protectedChanges, type KubernetesUpgradeVerdict, type ProtectedObject} from './policy.js'
import {EXIT} from '../errors/exit-codes.js'

export interface RunningKubernetes {
  /** The lowest version among the control planes (what talosctl upgrades from). */
  lowest: string
  perNode: {node: string; version: string}[]
}

/**
 * Per control plane, the version its machine config runs; the spec's version where the config
 * names none. Through the run's shared reads: one talosctl call for all control planes, once
 * per run until talosctl upgrade-k8s writes to them.
 */
export async function readRunningKubernetes(talos: TalosAccess): Promise<RunningKubernetes> {
  const cr = await talos.installation()
  const perNode = await Promise.all(
    cr.spec.talos.controlPlanes.map(async (node) => ({
      node,
      version: kubernetesVersionOfConfig(await talos.machineConfig(node)) ?? cr.spec.talos.kubernetesVersion,
    })),
  )
  const lowest =
    [...perNode].sort((a, b) => compareVersions(parseKubernetesVersion(a.version), parseKubernetesVersion(b.version)))[0]?.version ??
    cr.spec.talos.kubernetesVersion
  return {lowest, perNode}
}

const CILIUM_OWNER = `the Cilium release ${CILIUM_RELEASE.namespace}/${CILIUM_RELEASE.name}`

/**
 * What Talos's manifest sync must leave alone: every object of the Cilium release (from its
 * Helm record), and whatever lives in the stack's namespaces and ichor-system, and ichor's CRD.
 * Scope comes from discovery, so a cluster-scoped object matches talosctl's "<Kind>/<name>".
 */
async function protectedObjects(kube: Kube): Promise<{objects: ProtectedObject[]; namespaces: Record<string, string>}> {
  const record = await readReleaseRecord(kube, CILIUM_RELEASE.name, CILIUM_RELEASE.namespace)
  const objects: ProtectedObject[] = []
  for (const ref of record ? releaseObjectRefs(record.manifest, record.namespace) : []) {
    let namespace = ''
    try {
      namespace = (await resolvePath(kube, ref)).namespace ?? ''
    } catch (error) {
      if (!(error instanceof KindNotServedError)) throw error
    }
    objects.push({kind: ref.kind, namespace, name: ref.name, owner: CILIUM_OWNER})
  }
  objects.push({kind: 'CustomResourceDefinition', namespace: '', name: `${INSTALLATION.plural}.${INSTALLATION.group}`, owner: 'ichor'})
  const namespaces: Record<string, string> = {[ICHOR_SYSTEM]: 'ichor'}
  for (const [component, ns] of Object.entries(COMPONENT_NAMESPACE)) namespaces[ns] = `the stack (${component})`
  for (const [ns, owner] of Object.entries(namespaces)) objects.push({kind: 'Namespace', namespace: '', name: ns, owner})
  return {objects, namespaces}
}

/** The protected objects talosctl's dry run says it would prune or change, as "<action> <subject> (<owner>)". */
function guardedChanges(dryRunOutput: string, p: {objects: ProtectedObject[]; namespaces: Record<string, string>}): string[] {
  const changes = parseUpgradeK8sDryRun(dryRunOutput)
  // Anything in a protected namespace is protected, whatever its kind.
  const inNamespaces = changes
    .filter((c) => c.namespace in p.namespaces)
    .map((c) => ({kind: c.kind, namespace: c.namespace, name: c.name, owner: p.namespaces[c.namespace]!}))
  return protectedChanges(changes, [...p.objects, ...inNamespaces]).map((c) => `${c.action} ${c.subject} (${c.owner})`)
}

// ---------- the plan's steps ----------

export interface KubernetesUpgradeInput {
  session: Session
  to: string
  allowUntested: boolean
  timeoutMs: number
  /** The run's access to the nodes (ctx.talos): the IchorInstallation, the talosconfig, the configs read once. */
  talos: TalosAccess
}

/** The lowest version the control planes run, and the verdict of the rules for the target. */
export async function judgeUpgrade(
  p: Pick<KubernetesUpgradeInput, 'session' | 'to' | 'allowUntested' | 'talos'>,
): Promise<KubernetesUpgradeVerdict & {running: RunningKubernetes}> {
  const kube = await p.session.kube()
  const cr = await p.talos.installation()
  const record = await readReleaseRecord(kube, CILIUM_RELEASE.name, CILIUM_RELEASE.namespace)
  if (!record)
    throw new IchorError(`no Helm release ${CILIUM_RELEASE.namespace}/${CILIUM_RELEASE.name}: Cilium was never adopted`, {
      exitCode: EXIT.usage,
      hint: 'run ichor init (the same flags as the first run) first',
    })
  const running = await readRunningKubernetes(p.talos)
  const verdict = checkKubernetesUpgrade({
    from: running.lowest,
    to: p.to,
    talosVersion: cr.spec.talos.talosVersion,
    ciliumVersion: record.chartVersion,
    allowUntested: p.allowUntested,
  })
  return {...verdict, running}
}

/** Done: every control plane runs the target and the IchorInstallation records it (written last). */
async function upgradeDone(p: KubernetesUpgradeInput): Promise<{done: boolean; why: string}> {
  const target = parseKubernetesVersion(p.to).version
  const cr = await readInstallation(await p.session.kube())
  const running = await readRunningKubernetes(p.talos)
  const behind = running.perNode.filter((n) => n.version !== target)
  if (behind.length > 0) return {done: false, why: `${behind.map((n) => `${n.node} runs ${n.version}`).join(', ')}`}
  // A run killed inside talosctl can leave every image patched and its manifest sync not run.
  const k = cr?.status?.kubernetes
  if (k?.version !== target && k?.upgradedTo !== target)
    return {
      done: false,
      why: `the control planes run ${target}; talosctl upgrade-k8s has not been confirmed to finish (the IchorInstallation records ${k?.version ?? 'no version'})`,
    }
  return {done: true, why: `every control plane runs ${target}, recorded`}
}

export function checkVersionsTask(p: KubernetesUpgradeInput): Task {
  return {
    id: 'check-versions',
    title: `Check Kubernetes ${p.to} against Talos's range, one minor at a time, and Cilium's tested range`,
    mutating: false,
    check: true,
    async probe() {
      const v = await judgeUpgrade(p)
      return holds(v.kind === 'same' ? `the control planes run ${v.to}` : `${v.from} to ${v.to}${v.warnings.length ? ' (untested, --allow-untested)' : ''}`)
    },
    async run() {},
  }
}

/** talosctl's own dry run, read for what it would prune or change; refused when that touches a protected object. */
export function pruneGuardTask(p: KubernetesUpgradeInput): Task {
  // Checked once per run, right before talosctl runs: a rerun checks again.
  let checked = false
  return {
    id: 'talos-dry-run',
    title: 'Run talosctl upgrade-k8s --dry-run: Talos must not prune or change any object of Cilium, the stack or ichor',
    mutating: false,
    async probe() {
      if (checked) return holds('nothing protected would be pruned or changed')
      const done = await upgradeDone(p)
      return done.done ? holds(done.why) : missing(`Talos's plan is checked before every run (${done.why})`)
    },
    async run(progress) {
      const cr = await p.talos.installation()
      const kube = await p.session.kube()
      const out = await upgradeK8s({
        node: cr.spec.talos.controlPlanes[0]!,
        talosconfig: await p.talos.talosconfig(),
        to: parseKubernetesVersion(p.to).version,
        dryRun: true,
        timeoutMs: p.timeoutMs,
      })
      // Output it cannot read refuses here (exit 1): never taken for "no changes".
      const guarded = guardedChanges(out, await protectedObjects(kube))
      if (guarded.length > 0) {
        throw new IchorError(`talosctl upgrade-k8s would prune or change ${guarded.length} object(s) Talos must leave alone: ${guarded.join('; ')}`, {
          hint: guarded.some((g) => g.startsWith('replaced '))
            ? // The legacy sync (a node below Talos 1.13) replaces whatever Talos's manifests hold, inventory or not.
              "a node runs Talos below 1.13, whose sync replaces every object of Talos's manifests whole: upgrade Talos first (ichor talos upgrade), or take the named objects out of the control planes' inline manifests (for Cilium's, rerun ichor init with the same flags as the first run: its step \"Take Cilium out of Talos\")"
            : 'take the named objects out of Talos\'s inventory (kube-system/talos-bootstrap-manifests-inventory) first: for Cilium\'s, rerun ichor init with the same flags as the first run (its step "Take Cilium out of Talos")',
        })
      }
      const changes = parseUpgradeK8sDryRun(out).filter((c) => c.action !== 'unchanged')
      checked = true
      progress(
        changes.length
          ? `Talos would change ${changes.map((c) => `${c.kind}/${c.name} (${c.action.toLowerCase()})`).join(', ')}; none of them protected`
          : "Talos's manifests would not change",
      )
    },
  }
}

export function upgradeKubernetesTask(p: KubernetesUpgradeInput): Task {
  return {
    id: 'talos-upgrade-k8s',
    title: `Run talosctl upgrade-k8s --to ${p.to}`,
    hint: 'rerun the same command: talosctl upgrade-k8s continues from the lowest version the control planes run',
    async probe() {
      const done = await upgradeDone(p)
      return done.done ? holds(done.why) : missing(done.why)
    },
    async run(progress) {
      const cr = await p.talos.installation()
      const kube = await p.session.kube()
      // The CRD of this ichor knows status.kubernetes: an older one would prune it from every write.
      await serverSideApply(kube, [installationCrd()], {crdWait: {timeoutMs: p.timeoutMs}})
      const to = parseKubernetesVersion(p.to).version
      const talosconfig = await p.talos.talosconfig()
      // talosctl changes every control plane's config: nothing read from them before is served after.
      await p.talos.writeAll(cr.spec.talos.controlPlanes, () =>
        upgradeK8s({
          node: cr.spec.talos.controlPlanes[0]!,
          talosconfig,
          to,
          dryRun: false,
          timeoutMs: p.timeoutMs,
          onLine: (line) => line.trim() && progress(line.trim()),
        }),
      )
      // talosctl finished: what the verification then confirms (a kill before this reruns talosctl).
      const now = await readInstallation(kube)
      if (!now) throw new IchorError('the IchorInstallation is gone')
      await writeInstallationStatus(kube, {cni: {}, stack: {}, ...now.status, kubernetes: {...now.status?.kubernetes, upgradedTo: to}})
    },
  }
}

/** Every object of the Cilium release is live and still Helm's (its ownership metadata). */
export function verifyCiliumObjectsTask(p: {session: Session}): Task {
  const lost = async () => {
    const kube = await p.session.kube()
    const record = await readReleaseRecord(kube, CILIUM_RELEASE.name, CILIUM_RELEASE.namespace)
    if (!record) return ['the release record itself']
    const out: string[] = []
    for (const ref of releaseObjectRefs(record.manifest, record.namespace)) {
      const live = await getObject<KubeObject>(kube, ref, {metadataOnly: true})
      const a = live?.metadata.annotations ?? {}
      if (!live) out.push(`${describeObject(ref)} is gone`)
      else if (
        a[HELM_RELEASE_NAME_ANNOTATION] !== CILIUM_RELEASE.name ||
        a[HELM_RELEASE_NAMESPACE_ANNOTATION] !== CILIUM_RELEASE.namespace ||
        live.metadata.labels?.[HELM_MANAGED_BY_LABEL] !== 'Helm'
      ) {
        out.push(`${describeObject(ref)} is no longer Helm's`)
      }
    }
    return out
  }
  return {
    id: 'verify-cilium-objects',
    title: "Verify every object of the Cilium release is intact and still Helm's",
    mutating: false,
    check: true,
    hint: 'ichor cni values set (no arguments: re-applies the release), then rerun this command',
    async probe() {
      const l = await lost()
      return l.length === 0 ? holds("every object of the release is live and Helm's") : missing(`${l.length} object(s) of the Cilium release: ${l.join('; ')}`)
    },
    async run() {},
  }
}

export function verifyInventoryTask(p: {session: Session}): Task {
  return {
    id: 'verify-inventory',
    title: "Verify Talos's inventory holds no Cilium object",
    mutating: false,
    check: true,
    hint: 'ichor init with the same flags as the first run (its step "Take Cilium out of Talos")',
    async probe() {
      const {entries} = await findReleaseInTalosInventory(await p.session.kube())
      return entries.length === 0 ? holds('no Cilium key') : missing(`Talos's inventory lists Cilium object(s): ${entries.join(', ')}`)
    },
    async run() {},
  }
}

export function recordKubernetesVersionTask(p: KubernetesUpgradeInput): Task {
  const target = () => parseKubernetesVersion(p.to).version
  return {
    id: 'record-version',
    title: 'Record the Kubernetes version in the IchorInstallation',
    async probe() {
      const cr = await readInstallation(await p.session.kube())
      if (cr?.spec.talos.kubernetesVersion !== target())
        return missing(`the IchorInstallation's spec asks for Kubernetes ${cr?.spec.talos.kubernetesVersion ?? 'no version'}`)
      return cr?.status?.kubernetes?.version === target()
        ? holds(`${target()} recorded`)
        : missing(`the IchorInstallation records ${cr?.status?.kubernetes?.version ?? 'no version'}`)
    },
    async run() {
      const kube = await p.session.kube()
      const cr = await readInstallation(kube)
      if (!cr) throw new IchorError('the IchorInstallation is gone')
      // The spec too: an init rerun keeps the stored version and a node added later is
      // configured with it, which must be the one the cluster now runs, not init's.
      const written = await writeInstallationSpec(kube, {...cr.spec, talos: {...cr.spec.talos, kubernetesVersion: target()}}, {readAt: cr})
      await writeInstallationStatus(kube, {cni: {}, stack: {}, ...cr.status, kubernetes: {...cr.status?.kubernetes, version: target()}}, {readAt: written})
    },
  }
}
