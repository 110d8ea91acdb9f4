// A command's one way to the Talos nodes (issue 31). Where the talosconfig comes from:
// --talosconfig, else init's state directory on this machine, else the copy init stored in
// the cluster (ichor-system), so another machine with only the kubeconfig can reach the nodes.
// The cluster copy is written into a private folder the caller owns (0600 in 0700) and never
// outlives the command. The plan runner opens one TalosAccess per run (`ctx.talos`): the
// IchorInstallation that names the nodes, the talosconfig, and each node's machine config are
// read once per run, reads of several nodes go out as one talosctl call, and a write drops
// what was read from the nodes it touched.
import {existsSync} from 'node:fs'
import {join} from 'node:path'
import {IchorError} from '../errors/errors.js'
import {writePrivateFileAtomic} from '../fs/private-files.js'
import type {Kube} from '../kube/client.js'
import {readTalosBundle, requireInstallation, type Installation} from '../state/installation.js'
import {localState} from '../state/local.js'
import type {StateKey} from '../state/state-key.js'
import {EXIT} from '../errors/exit-codes.js'
import {once, type Once} from '../tasks/memo.js'
import {TalosNodeReads} from './node-reads.js'
import {getTalosVersions, type TalosctlError} from './talosctl.js'

export interface LocalTalosFiles {
  /** An existing talosconfig, when one was named or the state directory holds one. */
  talosconfig?: string
  /** Local machine configs of the control planes init rendered (they carry the bootstrap Cilium). */
  localConfigs: string[]
  /** Where they were looked for, for messages. */
  stateDir: string
}

/**
 * This machine's files: --talosconfig, else the state directory (--state-dir, else init's default
 * for the CR's cluster name). A command that needs a talosconfig takes it from talosconfigFor.
 */
export function localTalosFiles(installation: Installation, flags: {talosconfig?: string; stateDir?: string}): LocalTalosFiles {
  const state = localState(installation.spec.talos.clusterName, flags.stateDir)
  if (flags.talosconfig && !existsSync(flags.talosconfig)) throw new IchorError(`--talosconfig: no such file ${flags.talosconfig}`, {exitCode: EXIT.usage})
  const talosconfig = flags.talosconfig ?? (existsSync(state.talosconfig) ? state.talosconfig : undefined)
  return {talosconfig, localConfigs: [state.controlPlaneConfig].filter((f) => existsSync(f)), stateDir: state.dir}
}

/** The sealed copy in the cluster, for a caller that may open it (it asks for the state key then). */
export interface SealedTalosconfig {
  kube: Kube
  /** The private folder (0700) the opened copy is written into; the caller removes it. */
  privateDir: string
  /** The key of the sealed cluster copy, asked for only when that copy is needed. */
  key: () => Promise<StateKey>
  /** A short passphrase's warning when the sealed copy is opened (bundleOfSecret). */
  warn: (warning: string) => void
}

export interface TalosconfigLookup {
  /** --talosconfig */
  talosconfig?: string
  /** --state-dir */
  stateDir?: string
  /** Absent: this machine only, and no passphrase is ever asked (`cni status`, the values guards). */
  sealed?: SealedTalosconfig
  /** None found: undefined instead of the error, for a read that goes on without the nodes. */
  optional?: boolean
}

/**
 * The one rule for every command that needs a talosconfig: --talosconfig, else init's state
 * folder on this machine, else, when the caller can open it, the sealed copy in the cluster.
 * None of them: the one error (or undefined when `optional`).
 */
export function talosconfigFor(installation: Installation, lookup: TalosconfigLookup & {optional: true}): Promise<string | undefined>
export function talosconfigFor(installation: Installation, lookup: TalosconfigLookup & {optional?: false}): Promise<string>
export async function talosconfigFor(installation: Installation, lookup: TalosconfigLookup): Promise<string | undefined> {
  const access = localTalosFiles(installation, lookup)
  if (access.talosconfig) return access.talosconfig
  const opened = lookup.sealed && (await openSealedTalosconfig(lookup.sealed))
  if (opened) return opened
  if (lookup.optional) return undefined
  throw new IchorError(`no talosconfig: none in ${access.stateDir}${lookup.sealed ? ', and the cluster holds no copy' : ''}`, {
    exitCode: EXIT.usage,
    hint: 'pass --talosconfig FILE (or --state-dir DIR of the machine that ran ichor init)',
  })
}

/** The cluster's copy written into the caller's private folder; undefined when the cluster holds none. */
async function openSealedTalosconfig(sealed: SealedTalosconfig): Promise<string | undefined> {
  const bundle = (await readTalosBundle(sealed.kube, sealed.key, sealed.warn))?.bundle
  if (!bundle) return undefined
  const file = join(sealed.privateDir, 'talosconfig')
  writePrivateFileAtomic(file, bundle.talosconfig)
  return file
}

export interface TalosAccessOptions {
  /** --talosconfig */
  talosconfig?: string
  /** --state-dir */
  stateDir?: string
  /**
   * The key of the sealed copy in the cluster, asked for only when this machine has no
   * talosconfig. Absent: this machine only, and no passphrase is ever asked (`cni status`, the
   * values guards).
   */
  sealedKey?: () => Promise<StateKey>
  /** The private (0700) folder an opened sealed copy is written into; required with sealedKey. */
  privateDir?: string
  /** The exit code of the "not set up by ichor init" refusal (default 1). */
  missingInstallationExit?: number
  /** An IchorInstallation read already started (the caller's own read, shared). */
  installationRead?: Promise<Installation | undefined>
}

export class TalosAccess {
  /** Accepted but unwise: a passphrase under 12 characters opened the sealed bundle. */
  readonly warnings: string[] = []
  private readonly cr: Once<Installation>
  private readonly file: Once<string>
  private readonly localFile: Once<string | undefined>

  constructor(
    private readonly kube: () => Promise<Kube>,
    private readonly o: TalosAccessOptions = {},
    /** The run's node reads (init's steps take them as ctx.talos.reads). */
    readonly reads: TalosNodeReads = new TalosNodeReads(),
  ) {
    // A read the caller started serves it; the cluster is contacted only to read it, or to name it in the refusal.
    this.cr = once(async () => (await o.installationRead) ?? requireInstallation(await kube(), {exitCode: o.missingInstallationExit, read: o.installationRead}))
    this.localFile = once(async () => talosconfigFor(await this.cr(), {talosconfig: o.talosconfig, stateDir: o.stateDir, optional: true}))
    this.file = once(async () => {
      const sealed = o.sealedKey && {kube: await kube(), privateDir: this.privateDir(), key: o.sealedKey, warn: (w: string) => void this.warnings.push(w)}
      return talosconfigFor(await this.cr(), {talosconfig: o.talosconfig, stateDir: o.stateDir, sealed})
    })
  }

  private privateDir(): string {
    if (!this.o.privateDir) throw new Error('TalosAccess: a sealed key without a private folder to open the copy into')
    return this.o.privateDir
  }

  /** The IchorInstallation that names the nodes, read once; the one refusal when the cluster has none. */
  installation(): Promise<Installation> {
    return this.cr()
  }

  /** The talosconfig by the one rule (this machine, else the sealed copy when the command may open it), found once. */
  talosconfig(): Promise<string> {
    return this.file()
  }

  /**
   * The Talos secrets bundle a joining node's config is generated from (talosctl gen config
   * --with-secrets): init's state folder on this machine, else the sealed copy in the cluster
   * (which asks for its key), written into the private folder.
   */
  async secretsFile(): Promise<string> {
    const cr = await this.cr()
    const local = localState(cr.spec.talos.clusterName, this.o.stateDir).secrets
    if (existsSync(local)) return local
    const bundle = this.o.sealedKey && (await readTalosBundle(await this.kube(), this.o.sealedKey, (w) => void this.warnings.push(w)))?.bundle
    if (!bundle)
      throw new IchorError(`no Talos secrets bundle: none in ${localTalosFiles(cr, this.o).stateDir}, and the cluster holds no copy`, {
        exitCode: EXIT.usage,
        hint: 'pass --state-dir DIR of the machine that ran ichor init',
      })
    const file = join(this.privateDir(), 'secrets.yaml')
    writePrivateFileAtomic(file, bundle.secretsYaml)
    return file
  }

  /** The key of the sealed bundle in the cluster (asked once per run), for a command that seals it again. */
  stateKey(): Promise<StateKey> {
    if (!this.o.sealedKey) throw new Error("TalosAccess: this command was not given the sealed bundle's key")
    return this.o.sealedKey()
  }

  /** This machine's talosconfig only, or undefined: for reads that go on without the nodes and never ask a passphrase. */
  localTalosconfig(): Promise<string | undefined> {
    return this.localFile()
  }

  /** Where this machine's files were looked for (init's state folder), for messages. */
  async stateDir(): Promise<string> {
    return localTalosFiles(await this.cr(), this.o).stateDir
  }

  /** This machine's files of the cluster (the talosconfig, init's control-plane config). */
  async localFiles(): Promise<LocalTalosFiles> {
    return localTalosFiles(await this.cr(), this.o)
  }

  /** The node's machine config, read once per run; nodes asked in one turn go out as one talosctl call. */
  async machineConfig(node: string): Promise<string> {
    return this.reads.machineConfig(node, await this.talosconfig())
  }

  /** Read again now (an action decides on what the node runs at that moment). */
  async freshMachineConfig(node: string): Promise<string> {
    return this.reads.freshMachineConfig(node, await this.talosconfig())
  }

  /** The Talos version each node runs, asked now in one talosctl call; a node that did not answer, its error. */
  async runningVersions(nodes: readonly string[]): Promise<Map<string, string | TalosctlError>> {
    return getTalosVersions({nodes: [...nodes], talosconfig: await this.talosconfig()})
  }

  /** A write to the nodes (talosctl patch, upgrade-k8s): what was read from them before or during it is dropped. */
  writeAll<T>(nodes: readonly string[], change: () => Promise<T>): Promise<T> {
    return this.reads.writeAll(nodes, change)
  }
}
