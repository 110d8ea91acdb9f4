// `ichor cni status`: what the Cilium release runs against what the IchorInstallation asks
// for, the chart this CLI pins, the kube-proxy mode on each side, readiness, and the
// Talos hand-over. Every problem names the command that fixes it. Read-only.
import {credentialExpiryWarnings} from '../talos/credential-expiry.js'
import {readFileSync} from 'node:fs'
import {parseAllDocuments} from 'yaml'
import {pinnedAssets} from '../assets/lock.js'
import {compareVersions} from '../assets/resolve.js'
import {CILIUM_RELEASE} from '../constants.js'
import {readConfigMapKey, readWorkloadRollout, type WorkloadRollout} from '../kube/reads.js'
import {valuesHash} from '../helm/release-record.js'
import type {Kube} from '../kube/client.js'
import {inlineManifestForms, inlineManifestRemovalPatch} from '../talos/handover.js'
import {isCiliumInTalosInventory} from '../talos/inventory.js'
import {objectsManagedByTalos, releaseObjectRefs} from '../talos/field-manager.js'
import {describeObject} from '../kube/objects.js'
import {KUBE_PROXY, kubeProxyEnabledIn, kubeProxyNodes} from '../talos/kube-proxy.js'
import {readInstallation, type Installation} from '../state/installation.js'
import {nextMinorNeedsCilium} from './compatibility.js'
import {compareVersions as compareKubernetes, kubernetesVersionOfConfig, parseKubernetesVersion} from '../talos/versions.js'
import {effectiveFor, readCniContext} from './context.js'
import {TalosAccess} from '../talos/access.js'
import {getTalosVersions} from '../talos/talosctl.js'
import {talosVersionDisagreements} from '../talos/status.js'
import {oldestOf, planToDefault} from '../upgrade-path/planner.js'
import type {KubeProxyMode} from '../state/installation-types.js'
import {switchCommand} from './defaults.js'
import {describeFinding, readRemovedApis, type RemovedApiFinding, type RemovedApiReport} from './removed-apis.js'
import {minorKeyOf} from '../compatibility/queries.js'

export interface CniProblem {
  /** error: the cluster is degraded (exit 1); warning: worth fixing, not degrading. */
  severity: 'error' | 'warning'
  what: string
  /** The command that fixes it. */
  fix: string
}

export interface CniStatusReport {
  healthy: boolean
  release?: {revision: number; status: string; chartVersion: string}
  values: {releaseHash?: string; desiredHash: string; recordedHash?: string; inSync: boolean}
  chart: {
    pinned: string
    installed?: string
    upgrade: 'up-to-date' | 'available' | 'too-far' | 'installed-is-newer' | 'unknown'
    detail: string
    /**
     * The next Cilium hop of the upgrade planner (the one `ichor upgrade plan` prints) toward this
     * ichor's default set, with its command, why, and the other hops that come first.
     */
    next?: {version: string; command: string; why: string; after?: string[]}
  }
  /** The Cilium minor first installed, passed as upgradeCompatibility to every upgrade and values change. */
  upgradeCompatibility?: string
  /**
   * Live objects the Cilium minors on the way to this ichor's default set remove or reject
   * (`cni upgrade` refuses them) and deprecate, each with its minor; each is also a warning problem.
   */
  removedApis: RemovedApiReport
  kubeProxy: {
    desired: KubeProxyMode
    release?: boolean
    ciliumConfig?: string
    consistent: boolean
    /** The kube-proxy DaemonSet Talos creates while the proxy is enabled (absent: undefined). */
    daemonSet?: WorkloadRollout
    /** Per node carrying the setting: whether its machine config runs kube-proxy (with a talosconfig). */
    talosNodes?: {node: string; enabled: boolean}[]
  }
  readiness: {daemonSet?: WorkloadRollout; operator?: WorkloadRollout}
  /** The Kubernetes version next to Cilium's, and whether the next minor needs a Cilium upgrade first. */
  kubernetes?: {
    version: string
    /** Where the version was read: the control planes' machine configs, else the IchorInstallation. */
    source: 'machine configs' | 'recorded' | 'init'
    next: string
    needsCiliumUpgrade: boolean
    message?: string
  }
  talos: {
    checked: boolean
    talosconfig?: string
    inlineManifestOn?: string[]
    inInventory: boolean
    /** Objects of the release whose managedFields still list `talos`. */
    managedByTalos: string[]
    localConfigsWithInline: string[]
  }
  problems: CniProblem[]
}

export interface CniStatusOptions {
  talosconfig?: string
  stateDir?: string
}

const SET = 'ichor cni values set'

export async function readCniStatus(kube: Kube, opts: CniStatusOptions = {}): Promise<CniStatusReport> {
  const installation = readInstallation(kube)
  const context = readCniContext(kube, installation)
  context.catch(() => {}) // awaited below, unless the installation read fails first
  // The talosctl calls are the slowest reads: they start as soon as the CR names the nodes, while the release is read.
  const early = await installation
  const talos = new TalosAccess(async () => kube, {talosconfig: opts.talosconfig, stateDir: opts.stateDir, installationRead: installation})
  // This machine's talosconfig only: `cni status` never asks for the state passphrase.
  const talosconfig = early ? await talos.localTalosconfig() : undefined
  // Each node's config read once serves both Talos checks (a control plane is in both); all nodes in one talosctl call.
  const machineConfig = (node: string, file: string) => talos.reads.machineConfig(node, file)
  if (early && talosconfig)
    for (const node of [...early.spec.talos.controlPlanes, ...kubeProxyNodes(early.spec.talos).map((n) => n.node)])
      machineConfig(node, talosconfig).catch(() => {}) // awaited below
  const ctx = await context
  const access = await talos.localFiles()
  const ns = CILIUM_RELEASE.namespace
  const controlPlanes = ctx.installation.spec.talos.controlPlanes ?? []
  // Talos created the bootstrap objects as field manager `talos`: while it co-owns a field, a values change cannot remove it.
  // Read with the rest (one GET per object of the release), not after it.
  const talosManaged = ctx.release ? objectsManagedByTalos(kube, releaseObjectRefs(ctx.release.manifest, ctx.release.namespace)) : Promise.resolve([])
  // What each node runs, in one talosctl call beside the others: a node upgraded with talosctl alone is named.
  const allNodes = [...controlPlanes, ...(ctx.installation.spec.talos.workers ?? [])]
  const runningTalos = talosconfig ? getTalosVersions({nodes: allNodes, talosconfig}) : Promise.resolve(undefined)
  const [daemonSet, operator, kprConfig, inInventory, inlineOn, kubeProxyDs, talosNodes, managedRefs, talosVersions] = await Promise.all([
    readWorkloadRollout(kube, 'DaemonSet', ns, 'cilium'),
    readWorkloadRollout(kube, 'Deployment', ns, 'cilium-operator'),
    readConfigMapKey(kube, ns, 'cilium-config', 'kube-proxy-replacement'),
    isCiliumInTalosInventory(kube),
    talosconfig
      ? Promise.all(controlPlanes.map(async (node) => (inlineManifestForms(await machineConfig(node, talosconfig)).length > 0 ? [node] : []))).then((n) =>
          n.flat(),
        )
      : Promise.resolve(undefined),
    readWorkloadRollout(kube, 'DaemonSet', KUBE_PROXY.namespace, KUBE_PROXY.name),
    talosconfig
      ? Promise.all(
          kubeProxyNodes(ctx.installation.spec.talos).map(async ({node}) => ({node, enabled: kubeProxyEnabledIn(await machineConfig(node, talosconfig))})),
        )
      : Promise.resolve(undefined),
    talosManaged,
    runningTalos,
  ])
  const problems: CniProblem[] = []
  const release = ctx.release
  const desiredHash = valuesHash(effectiveFor(ctx, ctx.user))
  const releaseHash = release ? valuesHash(release.config) : undefined
  const recordedHash = ctx.installation.status?.cni?.appliedValuesHash

  if (!release) {
    problems.push({
      severity: 'error',
      what: `no Helm release ${ns}/${CILIUM_RELEASE.name}: Cilium was never adopted`,
      fix: 'ichor init (the same flags as the first run; it adopts the running Cilium)',
    })
  } else if (release.status !== 'deployed') {
    problems.push({
      severity: 'error',
      what: `release ${CILIUM_RELEASE.name} revision ${release.revision} is ${release.status}`,
      fix: `${SET}   (no arguments: recovers the release and applies the stored values)`,
    })
  }
  if (release && releaseHash !== desiredHash) {
    problems.push({
      severity: 'error',
      what: "the release's values differ from the IchorInstallation's (values hash mismatch)",
      fix: `${SET}   (no arguments: applies the stored user layer; \`ichor cni values diff\` shows the difference)`,
    })
  } else if (release && recordedHash !== releaseHash) {
    problems.push({
      severity: 'warning',
      what: 'the IchorInstallation status does not record the applied values hash',
      fix: `${SET}   (no arguments: records it)`,
    })
  }

  const desiredMode = ctx.modes.kubeProxy
  const wantReplaced = desiredMode === 'replaced'
  const releaseKpr = release ? release.config.kubeProxyReplacement : undefined
  const ciliumConsistent = (releaseKpr === undefined || releaseKpr === wantReplaced) && (kprConfig === undefined || kprConfig === String(wantReplaced))
  if (!ciliumConsistent) {
    problems.push({
      severity: 'error',
      what: `kube-proxy mode is half switched: the IchorInstallation says ${desiredMode}, the release has kubeProxyReplacement=${String(releaseKpr)}, cilium-config has kube-proxy-replacement=${kprConfig ?? '(absent)'}`,
      fix: switchCommand(desiredMode),
    })
  }
  // The Talos side of the switch: kube-proxy off everywhere and gone when replaced, on and ready otherwise.
  const talosWrong = (talosNodes ?? []).filter((n) => n.enabled === wantReplaced).map((n) => n.node)
  const kubeProxyWrong = wantReplaced ? kubeProxyDs !== undefined : !kubeProxyDs?.rolledOut
  if (talosWrong.length > 0 || kubeProxyWrong) {
    const parts = [
      talosWrong.length ? `kube-proxy is ${wantReplaced ? 'still enabled' : 'disabled'} in the Talos machine config of ${talosWrong.join(', ')}` : '',
      kubeProxyWrong
        ? wantReplaced
          ? `the ${KUBE_PROXY.namespace}/${KUBE_PROXY.name} DaemonSet still exists`
          : `the ${KUBE_PROXY.namespace}/${KUBE_PROXY.name} DaemonSet is ${kubeProxyDs ? `not ready (${kubeProxyDs.state})` : 'absent'}`
        : '',
    ].filter(Boolean)
    problems.push({severity: 'error', what: `kube-proxy switch to "${desiredMode}" is half done: ${parts.join('; ')}`, fix: switchCommand(desiredMode)})
  }
  const consistent = ciliumConsistent && talosWrong.length === 0 && !kubeProxyWrong

  for (const [label, w, kind, name] of [
    ['DaemonSet', daemonSet, 'ds', 'cilium'],
    ['operator Deployment', operator, 'deploy', 'cilium-operator'],
  ] as const) {
    if (!w) problems.push({severity: 'error', what: `the Cilium ${label} ${ns}/${name} does not exist`, fix: `${SET}   (no arguments: re-applies the release)`})
    else if (!w.rolledOut)
      problems.push({
        severity: 'error',
        what: `the Cilium ${label} is not ready: ${w.state} (${w.ready}/${w.desired} ready)`,
        fix: `kubectl -n ${ns} rollout status ${kind}/${name}; kubectl -n ${ns} describe ${kind}/${name}`,
      })
  }

  const initAgain = 'ichor init with the same flags as the first run (its step "Take Cilium out of Talos" finishes the hand-over)'
  if (inInventory)
    problems.push({severity: 'error', what: "Cilium is still in Talos's inventory: `talosctl upgrade-k8s` would prune or roll it back", fix: initAgain})
  if (!talosconfig) {
    problems.push({
      severity: 'warning',
      what: `the control planes' machine configs were not checked: no talosconfig (looked in ${access.stateDir})`,
      fix: 'ichor cni status --talosconfig FILE (or --state-dir DIR)',
    })
  } else if (inlineOn && inlineOn.length > 0) {
    problems.push({severity: 'error', what: `the bootstrap inline manifest is still on control plane(s) ${inlineOn.join(', ')}`, fix: initAgain})
  }
  const managedByTalos = managedRefs.map((r) => describeObject(r))
  if (managedByTalos.length > 0) {
    problems.push({
      severity: 'error',
      what: `${managedByTalos.length} Cilium object(s) still list Talos's field manager "talos" (e.g. ${managedByTalos[0]}): a values change cannot remove the fields Talos set`,
      fix: initAgain,
    })
  }
  if (talosVersions) problems.push(...talosVersionDisagreements(ctx.installation, talosVersions).map((p) => ({...p, severity: 'warning' as const})))
  // The credentials this command used: warned about before they end (the fix names what renews them).
  for (const w of credentialExpiryWarnings({kubeconfig: kube.kubeconfig, talosconfig})) problems.push({severity: 'warning', ...w})
  const localConfigsWithInline = access.localConfigs.filter((f) => inlineManifestForms(readFileSync(f, 'utf8')).length > 0)
  for (const file of localConfigsWithInline) {
    // One --patch per document, each as one line of JSON (valid YAML) so it pastes into a shell.
    const patches = parseAllDocuments(inlineManifestRemovalPatch(readFileSync(file, 'utf8'))!).map((d) => `--patch '${JSON.stringify(d.toJS())}'`)
    problems.push({
      severity: 'warning',
      what: `the local machine config ${file} still carries the bootstrap Cilium: a node added from it would bring it back`,
      fix: `talosctl machineconfig patch ${file} ${patches.join(' ')} -o ${file}`,
    })
  }

  const kubernetes = await kubernetesNextToCilium(
    ctx.installation,
    release?.chartVersion,
    talosconfig ? controlPlanes.map((n) => machineConfig(n, talosconfig)) : [],
  )

  const oldestTalos = oldestOf(talosVersions?.values() ?? []) ?? ctx.installation.spec.talos.talosVersion
  const around = {talos: oldestTalos, kubernetes: kubernetes?.version}
  const chart = chartUpgrade(release?.chartVersion, around)
  const removedApis = await removedOnTheWay(kube, release?.chartVersion, around)
  problems.push(...removedApis.problems)

  return {
    healthy: !problems.some((p) => p.severity === 'error'),
    release: release && {revision: release.revision, status: release.status, chartVersion: release.chartVersion},
    values: {releaseHash, desiredHash, recordedHash, inSync: releaseHash === desiredHash},
    chart,
    upgradeCompatibility: ctx.modes.upgradeCompatibility,
    removedApis: removedApis.report,
    kubeProxy: {
      desired: desiredMode,
      release: typeof releaseKpr === 'boolean' ? releaseKpr : undefined,
      ciliumConfig: kprConfig,
      consistent,
      daemonSet: kubeProxyDs,
      talosNodes,
    },
    readiness: {daemonSet, operator},
    ...(kubernetes ? {kubernetes} : {}),
    talos: {checked: talosconfig !== undefined, talosconfig, inlineManifestOn: inlineOn, inInventory, managedByTalos, localConfigsWithInline},
    problems,
  }
}

/**
 * The installed chart against the pin (Cilium upgrades one minor at a time and never down, its
 * upgrade guide), and the planner's next Cilium hop from what runs (`around`: the lowest Talos
 * and the Kubernetes version; the defaults when unknown) toward this ichor's default set.
 */
export function chartUpgrade(installed: string | undefined, around: Around = {}): CniStatusReport['chart'] {
  const pinned = pinnedAssets().cilium.version
  if (!installed) return {pinned, upgrade: 'unknown', detail: 'no release'}
  const plan = planToDefault({...around, cilium: installed})
  const at = plan.hops.findIndex((h) => h.component === 'cilium')
  const hop = plan.hops[at]
  const next = hop && {
    version: hop.to,
    command: hop.command,
    why: hop.why,
    ...(at > 0 ? {after: plan.hops.slice(0, at).map((h) => h.command)} : {}),
  }
  return {...chartAgainstPin(pinned, installed), ...(next ? {next} : {})}
}

type Around = {talos?: string; kubernetes?: string}

/**
 * What the Cilium minors the planner crosses on the way to the default set find among the live
 * objects (removed-apis.ts, the reading `cni upgrade` makes before a minor step), and a warning
 * problem for each: a refusal names the upgrade it will stop, a deprecation is only named.
 */
async function removedOnTheWay(kube: Kube, installed: string | undefined, around: Around): Promise<{report: RemovedApiReport; problems: CniProblem[]}> {
  const hops = installed ? planToDefault({...around, cilium: installed}).hops.filter((h) => h.component === 'cilium') : []
  if (!installed || !hops.length) return {report: {refusals: [], warnings: []}, problems: []}
  const report = await readRemovedApis(kube, installed, hops.at(-1)!.to)
  const into = (f: RemovedApiFinding) => hops.find((h) => minorKeyOf(h.to) === f.minor)?.command ?? `the upgrade to Cilium ${f.minor}`
  return {
    report,
    problems: [
      ...report.refusals.map((f) => ({
        severity: 'warning' as const,
        what: describeFinding(f),
        fix: `change or delete it before ${into(f)}, which refuses it (ichor upgrade plan shows the whole path)`,
      })),
      ...report.warnings.map((f) => ({
        severity: 'warning' as const,
        what: describeFinding(f),
        fix: `nothing blocks ${into(f)}; move off it before a later Cilium removes it`,
      })),
    ],
  }
}

function chartAgainstPin(pinned: string, installed: string): CniStatusReport['chart'] {
  const cmp = compareVersions(pinned, installed)
  if (cmp === 0) return {pinned, installed, upgrade: 'up-to-date', detail: `runs ${installed}, the version this ichor pins`}
  if (cmp < 0)
    return {pinned, installed, upgrade: 'installed-is-newer', detail: `runs ${installed}, newer than the ${pinned} this ichor pins: use a newer ichor`}
  const minor = (v: string) => v.replace(/^v/, '').split('.').slice(0, 2).map(Number)
  const [pm, pn] = minor(pinned)
  const [im, iN] = minor(installed)
  if (pm !== im || pn! - iN! > 1)
    return {pinned, installed, upgrade: 'too-far', detail: `${installed} to ${pinned} skips a minor version; Cilium upgrades one minor at a time`}
  return {pinned, installed, upgrade: 'available', detail: `ichor cni upgrade --to ${pinned}`}
}

/** The lowest version the control planes' configs name, else the recorded one, else init's. */
async function kubernetesNextToCilium(
  installation: Installation,
  ciliumVersion: string | undefined,
  configs: Promise<string>[],
): Promise<CniStatusReport['kubernetes']> {
  if (!ciliumVersion) return undefined
  const fromConfigs = (await Promise.all(configs.map((c) => c.then(kubernetesVersionOfConfig, () => undefined)))).filter((v): v is string => Boolean(v))
  fromConfigs.sort((a, b) => compareKubernetes(parseKubernetesVersion(a), parseKubernetesVersion(b)))
  const recorded = installation.status?.kubernetes?.version
  const [version, source] = fromConfigs[0]
    ? [fromConfigs[0], 'machine configs' as const]
    : recorded
      ? [recorded, 'recorded' as const]
      : [installation.spec.talos.kubernetesVersion, 'init' as const]
  return {version, source, ...nextMinorNeedsCilium(ciliumVersion, version)}
}
