// The operator's part of the Talos machine configs: install disk, installer image and config
// patches for every node, per role and per node, as `talosctl gen config` takes them
// (--install-disk, --install-image, --config-patch, --config-patch-control-plane,
// --config-patch-worker; `@FILE` or inline YAML). Patches are kept as text so a rerun, another
// machine and a node added later render the same configs without the operator's files.
// A patch may not set what ichor owns: refused with the path and the reason, before any node.
import {existsSync} from 'node:fs'
import {LineCounter, parseAllDocuments, type Document} from 'yaml'
import {IchorError, type Issue} from '../errors/errors.js'
import type {ConfigPatch, MachineConfigInputs} from '../state/installation-types.js'
import {aliasBomb, checkUniqueKeys, MAX_ALIAS_COUNT, MAX_VALUES_FILE_BYTES, readCappedFileText, tooLarge, type FileCap} from '../values/input.js'
import {DELETE_SELECTOR_PROBLEM, INDEX_PROBLEM, inlineManifestEntryProblems, WHOLE_LIST_PROBLEM} from './inline-manifests.js'
import {nodeProblem} from './node-address.js'
import type {TalosPatches} from './patches.js'
import {unattendedDiskMatch} from './disk-selector.js'
import {hasUnattendedInstallConfig, type KubernetesVersion, type TalosVersion} from './versions.js'

/** What the Talos steps need of the cluster: the narrow part of init's inputs they read. */
export interface TalosClusterSpec {
  clusterName: string
  endpoint: string
  controlPlanes: string[]
  workers: string[]
  talosVersion: TalosVersion
  kubernetesVersion: KubernetesVersion
  machineConfig: MachineConfigInputs
}

/** What the Talos steps need of a render: the patches each role's config carries. */
export interface TalosRender {
  talos: TalosPatches
}

export const NO_MACHINE_CONFIG_INPUTS: MachineConfigInputs = {patches: [], controlPlanePatches: [], workerPatches: [], nodePatches: []}

export interface MachineConfigFlags {
  installDisk?: string
  installImage?: string
  configPatch?: string[]
  configPatchControlPlane?: string[]
  configPatchWorker?: string[]
  /** `ADDRESS=@FILE` or `ADDRESS=YAML`. */
  nodePatch?: string[]
}

const DISK = /^\/dev\/[A-Za-z0-9/_.:-]+$/

/**
 * The flags read into inputs: files read, YAML parsed, owned fields refused. Every problem is
 * an issue naming the flag and the file; nothing is read from the cluster here.
 */
export function readMachineConfigFlags(f: MachineConfigFlags, nodes: {controlPlanes: string[]; workers: string[]}, issues: Issue[]): MachineConfigInputs {
  const issue = (path: string, message: string) => issues.push({path, message})
  if (f.installDisk !== undefined && !DISK.test(f.installDisk)) issue('--install-disk', `"${f.installDisk}" is not a device path (e.g. /dev/sda, /dev/nvme0n1)`)
  if (f.installImage !== undefined && !/^[a-z0-9][\w./:@-]*$/i.test(f.installImage))
    issue('--install-image', `"${f.installImage}" is not an image reference (e.g. factory.talos.dev/metal-installer/<schematic>:v1.14.1)`)
  const read = (flag: string, args: string[] | undefined) =>
    (args ?? []).map((a) => readPatchArg(a, flag, issues)).filter((p): p is ConfigPatch => p !== undefined)
  const inputs: MachineConfigInputs = {
    installDisk: f.installDisk,
    installImage: f.installImage,
    patches: read('--config-patch', f.configPatch),
    controlPlanePatches: read('--config-patch-control-plane', f.configPatchControlPlane),
    workerPatches: read('--config-patch-worker', f.configPatchWorker),
    nodePatches: [],
  }
  const known = new Set([...nodes.controlPlanes, ...nodes.workers])
  for (const arg of f.nodePatch ?? []) {
    const eq = arg.indexOf('=')
    const node = eq > 0 ? arg.slice(0, eq) : ''
    if (!node || nodeProblem(node)) {
      issue('--node-patch', `"${arg.slice(0, 60)}" is not ADDRESS=@FILE or ADDRESS=YAML (ADDRESS: a node given with --control-plane or --worker)`)
      continue
    }
    if (known.size > 0 && !known.has(node)) issue('--node-patch', `${node} is not a node of this cluster (given: ${[...known].join(', ')})`)
    const patch = readPatchArg(arg.slice(eq + 1), `--node-patch ${node}`, issues)
    if (patch) inputs.nodePatches.push({node, ...patch})
  }
  for (const [flag, list] of [
    ['--config-patch', inputs.patches],
    ['--config-patch-control-plane', inputs.controlPlanePatches],
    ['--config-patch-worker', inputs.workerPatches],
  ] as const) {
    for (const p of list) issues.push(...ownedFieldIssues(p, flag, {noWorker: nodes.workers.length === 0}))
  }
  for (const p of inputs.nodePatches) issues.push(...ownedFieldIssues(p, `--node-patch ${p.node}`, {noWorker: nodes.workers.length === 0}))
  return inputs
}

/**
 * A patch is read as a values file is (issue 38 point 10): a regular file, at most the same cap,
 * read before a byte is parsed; a 20 MB patch once held the process for minutes. Inline text
 * gets the same cap.
 */
export const MAX_PATCH_FILE_BYTES = MAX_VALUES_FILE_BYTES
const PATCH_FILE: FileCap = {what: 'patch', maxBytes: MAX_PATCH_FILE_BYTES}

/**
 * A patch's documents, parsed in linear time: yaml's own duplicate-key check compares every key
 * of a map with every other (37 s for a 1 MiB map of 66 000 keys); readPatchArg checks them once.
 */
function patchDocuments(yaml: string, lineCounter?: LineCounter): ReturnType<typeof parseAllDocuments> {
  return parseAllDocuments(yaml, {uniqueKeys: false, lineCounter})
}

// Each patch's documents as plain values, parsed once per run: a run asks for them several times
// (owned fields, install disk, hostname, twice for init), and forty 250 KiB patches took 19 s of
// parsing instead of 7. Nothing mutates the values.
const PARSED_PATCHES = new Map<string, readonly unknown[]>()

/** A patch's documents as plain values (read-only), parsed once per text. */
export function patchValues(yaml: string): readonly unknown[] {
  let values = PARSED_PATCHES.get(yaml)
  if (!values) {
    values = (patchDocuments(yaml) as unknown as {toJS(o: object): unknown}[]).map((d) => d.toJS({maxAliasCount: MAX_ALIAS_COUNT}))
    PARSED_PATCHES.set(yaml, values)
  }
  return values
}

/** `@FILE` read from disk, anything else taken as inline YAML (talosctl's two forms). */
function readPatchArg(arg: string, flag: string, issues: Issue[]): ConfigPatch | undefined {
  const source = arg.startsWith('@') ? arg.slice(1) : 'inline'
  try {
    const yaml = source === 'inline' ? arg : readCappedFileText(source, source, PATCH_FILE)
    const size = Buffer.byteLength(yaml)
    if (size > PATCH_FILE.maxBytes) throw tooLarge(source, size, PATCH_FILE)
    const lines = new LineCounter()
    const docs = [...patchDocuments(yaml, lines)] as Document.Parsed[]
    const bad = docs.flatMap((d) => d.errors)
    if (bad.length > 0) throw new IchorError(`${source}: not YAML (${bad[0]!.message.split('\n')[0]})`)
    if (yaml.trim() === '') throw new IchorError(`${source}: the patch is empty`)
    const values: unknown[] = []
    for (const doc of docs) {
      checkUniqueKeys(doc, source, lines)
      try {
        values.push(doc.toJS({maxAliasCount: MAX_ALIAS_COUNT}))
      } catch (error) {
        if (/alias count/i.test((error as Error).message)) throw aliasBomb(source, 'the patch')
        throw new IchorError(`${source}: not YAML (${(error as Error).message.split('\n')[0]})`)
      }
    }
    checkPatchShape(values, source, source === 'inline' ? {arg, flag} : undefined)
    const text = yaml.endsWith('\n') ? yaml : `${yaml}\n`
    PARSED_PATCHES.set(text, values)
    return {source, yaml: text}
  } catch (error) {
    if (!(error instanceof IchorError)) throw error
    issues.push({path: flag, message: error.message})
    return undefined
  }
}

const JSON_PATCH_OPS = ['add', 'remove', 'replace', 'move', 'copy', 'test']

/**
 * What talosctl takes as a patch (configpatcher.LoadPatch, v1.14.1): documents that are mappings
 * (strategic merge), or one list of JSON 6902 operations. Checked here so a machine without
 * talosctl refuses what talosctl would. Inline text that is one plain string is a file path
 * whose `@` was forgotten: talosctl reads a file only with `@FILE`.
 */
function checkPatchShape(values: unknown[], source: string, inline: {arg: string; flag: string} | undefined): void {
  const docs = values.filter((v) => v !== null && v !== undefined)
  if (inline && docs.length === 1 && typeof docs[0] === 'string' && !docs[0].includes('\n')) {
    const text = docs[0].trim()
    const fileLike = existsSync(text) || /[/\\]|\.(ya?ml|json)$/i.test(text)
    if (fileLike) {
      const fix = inline.flag.startsWith('--node-patch ') ? `${inline.flag}=@${text}` : `${inline.flag} @${text}`
      throw new IchorError(
        `"${text}" was given as an inline patch but ${existsSync(text) ? 'names a file that exists' : 'looks like a file path'}: talosctl's convention reads a file only with @ (${fix})`,
      )
    }
  }
  const what = 'a patch is YAML mappings (strategic merge) or one list of JSON 6902 operations (op, path)'
  if (docs.some(Array.isArray)) {
    if (docs.length > 1) throw new IchorError(`${source}: a JSON 6902 patch is one list of operations, not one document among others (${what})`)
    for (const [i, op] of (docs[0] as unknown[]).entries()) {
      const o = op as {op?: unknown; path?: unknown} | null
      if (!o || typeof o !== 'object' || Array.isArray(o) || typeof o.path !== 'string' || !JSON_PATCH_OPS.includes(String(o.op)))
        throw new IchorError(`${source}: operation ${i + 1} is not a JSON 6902 operation (op: ${JSON_PATCH_OPS.join('|')}, path: /a/b)`)
    }
    return
  }
  const bad = docs.findIndex((d) => typeof d !== 'object')
  if (bad >= 0) {
    const shown = JSON.stringify(docs[bad]).slice(0, 60)
    throw new IchorError(`${source}: ${docs.length > 1 ? `document ${bad + 1} ` : ''}is ${shown}, not a patch (${what})`)
  }
}

// What ichor renders or derives itself (src/lib/talos/patches.ts, the secrets bundle, --endpoint,
// --cluster-name): a user patch over these would break Cilium's bootstrap, its hand-over to Helm,
// or the cluster's identity. Paths are the v1alpha1 document's; kinds the multi-document ones
// (Talos pkg/machinery/config/types/v1alpha1 and k8s, v1.14.1).
const SECRETS = "the cluster secrets come from ichor's Talos secrets bundle (never regenerated)"
const INLINE = 'cluster.inlineManifests'
const OWNED_PATHS: [string, string][] = [
  ['cluster.network.cni', 'ichor sets the CNI to none: Cilium is installed by ichor'],
  ['cluster.proxy', "kube-proxy is ichor's: --kube-proxy at init, `ichor cni kube-proxy replace|restore` later"],
  ['cluster.externalCloudProvider.manifests', "manifests outside ichor's stack are not handed over"],
  ['machine.features.kubePrism', 'KubePrism on 7445 is where Cilium reaches the API server'],
  ['cluster.controlPlane.endpoint', 'the endpoint is --endpoint'],
  ['cluster.clusterName', 'the cluster name is --cluster-name'],
  ['machine.type', 'the role is --control-plane or --worker'],
  ['machine.token', SECRETS],
  ['machine.ca', SECRETS],
  ['cluster.id', SECRETS],
  ['cluster.secret', SECRETS],
  ['cluster.token', SECRETS],
  ['cluster.ca', SECRETS],
  ['cluster.aggregatorCA', SECRETS],
  ['cluster.serviceAccount', SECRETS],
  ['cluster.etcd.ca', SECRETS],
  ['cluster.secretboxEncryptionSecret', SECRETS],
  ['cluster.aescbcEncryptionSecret', SECRETS],
  ['cluster.acceptedCAs', SECRETS],
]
const OWNED_KINDS: Record<string, string> = {
  KubeFlannelCNIConfig: 'ichor removes flannel: Cilium is installed by ichor',
  KubeProxyConfig: "kube-proxy is ichor's: --kube-proxy at init, `ichor cni kube-proxy replace|restore` later",
  KubePrismConfig: 'KubePrism on 7445 is where Cilium reaches the API server',
  KubeClusterConfig: 'the cluster name and endpoint are --cluster-name and --endpoint',
  DiscoveryIdentityConfig: SECRETS,
  KubeAPIServerCAConfig: SECRETS,
  KubeAggregatorCAConfig: SECRETS,
  KubeServiceAccountConfig: SECRETS,
  EtcdCAConfig: SECRETS,
  // The v1.14 form of cluster.secretboxEncryptionSecret / aescbcEncryptionSecret: gen config
  // writes it from the secrets bundle, and Talos refuses it beside either legacy field
  // (pkg/machinery/config/types/k8s/etcd_encryption.go, generate/kubernetes.go, v1.14.0-rc.1).
  KubeEtcdEncryptionConfig: SECRETS,
  // Not here: KubeInlineManifestConfig and cluster.inlineManifests, judged entry by entry
  // (inline-manifests.ts): only the entry named cilium is ichor's.
  // Not here: KubeExternalManifestConfig (k8s/external_manifest.go, a named document with a URL
  // and headers), the v1.14 form of cluster.extraManifests. Both are the operator's own
  // manifests, which Talos fetches and applies; ichor neither writes nor hands them over.
}

/** The owned fields a patch sets (strategic merge or JSON 6902), each an issue with path and reason. */
export function ownedFieldIssues(patch: ConfigPatch, flag: string, opts: {noWorker: boolean}): Issue[] {
  const issues: Issue[] = []
  const refuse = (path: string, why: string) => issues.push({path: flag, message: `${patch.source}: ${path} is set by ichor (${why})`})
  const owned = [
    ...OWNED_PATHS,
    ...(opts.noWorker
      ? [['cluster.allowSchedulingOnControlPlanes', 'ichor lets a cluster without workers schedule on its control planes'] as [string, string]]
      : []),
  ]
  const check = (path: string) => {
    if (path === INLINE || path.startsWith(`${INLINE}.`)) return void issues.push({path: flag, message: `${patch.source}: ${path} ${INDEX_PROBLEM}`})
    const hit = owned.find(([p]) => path === p || path.startsWith(`${p}.`) || p.startsWith(`${path}.`))
    if (hit) refuse(hit[0] === path || path.startsWith(`${hit[0]}.`) ? path : hit[0], hit[1])
  }
  for (const js of patchValues(patch.yaml)) {
    if (Array.isArray(js)) {
      // JSON 6902: a list of operations, each with a JSON pointer; a move also takes its `from` away.
      const dotted = (pointer: string) =>
        pointer
          .replace(/^\//, '')
          .split('/')
          .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
          .join('.')
      for (const op of js as {op?: unknown; path?: unknown; from?: unknown}[]) {
        if (typeof op?.path === 'string') check(dotted(op.path))
        if (op?.op === 'move' && typeof op.from === 'string') check(dotted(op.from))
      }
      continue
    }
    if (!js || typeof js !== 'object') continue
    const obj = js as Record<string, unknown>
    const entry = (label: string, name: unknown, manifest: unknown) => {
      for (const problem of inlineManifestEntryProblems(name, manifest))
        issues.push({path: flag, message: `${patch.source}: ${label}${typeof name === 'string' && name ? ` ${name}:` : ''} ${problem}`})
    }
    if (typeof obj.kind === 'string') {
      if (obj.kind === 'KubeInlineManifestConfig') entry('KubeInlineManifestConfig', obj.name, obj.manifest)
      else if (OWNED_KINDS[obj.kind]) refuse(`kind ${obj.kind}`, OWNED_KINDS[obj.kind]!)
      else if (obj.kind === 'KubeNodeConfig' && opts.noWorker && obj.taints !== undefined)
        refuse('KubeNodeConfig taints', 'ichor lets a cluster without workers schedule on its control planes')
      continue
    }
    const cluster = obj.cluster as Record<string, unknown> | undefined
    if (cluster && typeof cluster === 'object' && !Array.isArray(cluster) && 'inlineManifests' in cluster) {
      // Talos appends the list's entries to the config's (merge.go: no replace tag on the field)
      // and `$patch: delete` picks one by its first key: each entry is judged by its name.
      const {inlineManifests: list, ...rest} = cluster
      if (Array.isArray(list))
        for (const [i, m] of list.entries()) {
          const e = (m ?? {}) as {name?: unknown; contents?: unknown}
          const selector = Object.keys(e).filter((k) => k !== '$patch')[0]
          if (typeof e.name === 'string' && e.name && '$patch' in e && selector !== 'name') {
            issues.push({path: flag, message: `${patch.source}: cluster.inlineManifests entry ${i + 1} ${DELETE_SELECTOR_PROBLEM(selector ?? '')}`})
            continue
          }
          entry(typeof e.name === 'string' && e.name ? 'cluster.inlineManifests' : `cluster.inlineManifests entry ${i + 1}`, e.name, e.contents)
        }
      else if (list !== null && list !== undefined) issues.push({path: flag, message: `${patch.source}: ${INLINE} ${WHOLE_LIST_PROBLEM}`})
      for (const path of leafPaths({...obj, cluster: rest})) check(path)
      continue
    }
    for (const path of leafPaths(obj)) check(path)
  }
  return dedupe(issues)
}

function leafPaths(value: unknown, prefix = ''): string[] {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return prefix ? [prefix] : []
  // `$patch: delete` removes the map it sits in, with everything under it.
  return Object.entries(value as Record<string, unknown>).flatMap(([k, v]) => (k === '$patch' ? [prefix] : leafPaths(v, prefix ? `${prefix}.${k}` : k)))
}

function dedupe(issues: Issue[]): Issue[] {
  const seen = new Set<string>()
  return issues.filter((i) => !seen.has(i.message) && seen.add(i.message))
}

/** A node's own patches, applied after the generated config of its role. */
export function patchesForNode(inputs: MachineConfigInputs, node: string): ConfigPatch[] {
  return inputs.nodePatches.filter((p) => p.node === node)
}

/** What the IchorInstallation stores: only what was set (undefined when nothing), so a cluster without any keeps its spec. */
export function storedMachineConfig(inputs: MachineConfigInputs): Partial<MachineConfigInputs> | undefined {
  const out: Partial<MachineConfigInputs> = {}
  if (inputs.installDisk !== undefined) out.installDisk = inputs.installDisk
  if (inputs.installImage !== undefined) out.installImage = inputs.installImage
  for (const k of ['patches', 'controlPlanePatches', 'workerPatches'] as const)
    if (inputs[k].length > 0) out[k] = inputs[k].map(({source, yaml}) => ({source, yaml}))
  if (inputs.nodePatches.length > 0) out.nodePatches = inputs.nodePatches.map(({node, source, yaml}) => ({node, source, yaml}))
  return Object.keys(out).length > 0 ? out : undefined
}

/** Every patch with the flag that gave it, for messages that name the file. */
export function allPatches(inputs: MachineConfigInputs): {flag: string; patch: ConfigPatch}[] {
  return [
    ...inputs.patches.map((patch) => ({flag: '--config-patch', patch})),
    ...inputs.controlPlanePatches.map((patch) => ({flag: '--config-patch-control-plane', patch})),
    ...inputs.workerPatches.map((patch) => ({flag: '--config-patch-worker', patch})),
    ...inputs.nodePatches.map((patch) => ({flag: `--node-patch ${patch.node}`, patch})),
  ]
}

/** Talos's install disk when none is given (`talosctl gen config --install-disk` default, v1.14.1). */
const TALOS_DEFAULT_INSTALL_DISK = '/dev/sda'

/** Where a node's final config installs Talos, and which input decides it. */
export interface InstallDisk {
  /** The device path the config names (machine.install.disk, or `disk.dev_path == "X"`); undefined when it selects. */
  disk?: string
  /** The selector Talos matches on the node's disks: UnattendedInstallConfig's CEL, or v1alpha1's machine.install.diskSelector. */
  selector?: {cel: string} | {legacy: Record<string, unknown>}
  /** The input that decides it: `--install-disk`, Talos's default, or the flag and file of a patch. */
  from: string
  /** Why Talos refuses the config or installs nowhere: refused before any node is touched. */
  problem?: string
}

/** The flag an install disk's `from` names (`--node-patch NODE`, `--config-patch`…); Talos's default is --install-disk's. */
export function installDiskFlag(from: string): string {
  if (!from.startsWith('--')) return '--install-disk'
  return from
    .split(' ')
    .slice(0, from.startsWith('--node-patch') ? 2 : 1)
    .join(' ')
}

/**
 * The install disk of a node's FINAL config, as Talos reads it: gen config's part (v1.14+: an
 * UnattendedInstallConfig selecting --install-disk; below: machine.install.disk), then every patch
 * in the order talosctl applies them (every node's, the role's, the node's own). When an
 * UnattendedInstallConfig is present Talos installs by it alone (v1alpha1_sequencer.go Install)
 * and refuses a config that also has machine.install (UnattendedInstallConfig's
 * V1Alpha1ConflictValidate, config/types/runtime/unattended_install.go, v1.14.1); without one,
 * machine.install.diskSelector wins over machine.install.disk (v1alpha1_sequencer_tasks.go Install).
 */
export function installDiskFor(inputs: MachineConfigInputs, node: string, role: 'controlplane' | 'worker', talosVersion: TalosVersion | string): InstallDisk {
  const given = inputs.installDisk ?? TALOS_DEFAULT_INSTALL_DISK
  const givenFrom = inputs.installDisk ? '--install-disk' : "Talos's default (--install-disk)"
  let unattended: {match: string; from: string} | undefined = hasUnattendedInstallConfig(talosVersion)
    ? {match: unattendedDiskMatch(given), from: givenFrom}
    : undefined
  let legacyDisk: {disk: string; from: string} | undefined = unattended ? undefined : {disk: given, from: givenFrom}
  let legacySelector: {selector: Record<string, unknown>; from: string} | undefined
  let legacyFromPatch: string | undefined
  const rolePatches = role === 'worker' ? inputs.workerPatches : inputs.controlPlanePatches
  const applied = [
    ...inputs.patches.map((p) => ({flag: '--config-patch', p})),
    ...rolePatches.map((p) => ({flag: role === 'worker' ? '--config-patch-worker' : '--config-patch-control-plane', p})),
    ...patchesForNode(inputs, node).map((p) => ({flag: `--node-patch ${node}`, p})),
  ]
  for (const {flag, p} of applied) {
    const from = `${flag} ${p.source}`
    for (const value of patchValues(p.yaml)) {
      const js = value as Record<string, any> | null // eslint-disable-line @typescript-eslint/no-explicit-any
      if (!js || typeof js !== 'object' || Array.isArray(js)) continue
      if (js.kind === 'UnattendedInstallConfig') {
        if (js.$patch === 'delete') unattended = undefined
        else {
          const match = js.provisioning?.diskSelector?.match
          if (typeof match === 'string') unattended = {match, from}
          else unattended ??= {match: '', from}
        }
        continue
      }
      if (js.kind !== undefined) continue
      const install = js.machine?.install
      if (!install || typeof install !== 'object') continue
      legacyFromPatch = from
      if (typeof install.disk === 'string') legacyDisk = {disk: install.disk, from}
      if (install.diskSelector && typeof install.diskSelector === 'object') legacySelector = {selector: install.diskSelector, from}
    }
  }
  if (unattended && legacyFromPatch)
    return {
      from: legacyFromPatch,
      problem: `${legacyFromPatch}: machine.install is not used with the UnattendedInstallConfig ${unattended.from.startsWith('--') && unattended.from !== '--install-disk' ? `of ${unattended.from}` : 'that talosctl gen config writes for Talos v1.14+'}, and Talos refuses a config with both ("UnattendedInstallConfig config is incompatible with v1alpha1 config (.machine.install)"); choose the disk with --install-disk, or patch the UnattendedInstallConfig's provisioning.diskSelector.match (CEL, e.g. disk.dev_path == "/dev/nvme0n1")`,
    }
  if (unattended) {
    if (!unattended.match) return {from: unattended.from, problem: `${unattended.from}: the UnattendedInstallConfig has no provisioning.diskSelector.match`}
    const disk = /^disk\.dev_path == "([^"\\]+)"$/.exec(unattended.match.trim())?.[1] ?? /^"([^"\\]+)" in disk\.symlinks$/.exec(unattended.match.trim())?.[1]
    return {disk, selector: {cel: unattended.match}, from: unattended.from}
  }
  if (legacySelector) return {selector: {legacy: legacySelector.selector}, from: legacySelector.from}
  if (legacyDisk) return {disk: legacyDisk.disk, from: legacyDisk.from}
  const last = [...applied].reverse().find(({p}) => patchValues(p.yaml).some((v) => (v as {kind?: unknown} | null)?.kind === 'UnattendedInstallConfig'))
  const by = last ? `${last.flag} ${last.p.source}` : 'the patches'
  return {
    from: by,
    problem: `${by}: the config installs Talos nowhere (the UnattendedInstallConfig is deleted and machine.install names no disk nor diskSelector)`,
  }
}

/**
 * The installer image a node was installed with, from its machine config: Talos v1.14's
 * UnattendedInstallConfig document (`installer.image`, as talosctl v1.14.1 gen config writes
 * it) or v1alpha1's `machine.install.image`. Undefined when the config names none.
 */
export function installImageOfConfig(configYaml: string): string | undefined {
  type Doc = {kind?: unknown; installer?: {image?: unknown}; machine?: {install?: {image?: unknown}}}
  const docs = parseAllDocuments(configYaml).map((d) => d.toJS() as Doc | null)
  const image = docs.find((d) => d?.kind === 'UnattendedInstallConfig')?.installer?.image ?? docs.find((d) => d && !d.kind)?.machine?.install?.image
  return typeof image === 'string' && image ? image : undefined
}
