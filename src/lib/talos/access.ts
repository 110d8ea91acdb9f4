// Where a day-2 command gets a talosconfig: --talosconfig, else init's state directory on
// this machine, else the copy init stored in the cluster (ichor-system), so another
// machine with only the kubeconfig can reach the nodes. The cluster copy is written into a
// private folder the caller owns (0600 in 0700) and never outlives the command.
import {existsSync} from 'node:fs'
import {join} from 'node:path'
import {IchorError} from '../errors/errors.js'
import {writePrivateFileAtomic} from '../fs/private-files.js'
import type {Kube} from '../kube/client.js'
import {readTalosBundle, type Installation} from '../state/installation.js'
import {localState} from '../state/local.js'
import type {StateKey} from '../state/state-key.js'
import {EXIT} from '../errors/exit-codes.js'

export interface TalosAccess {
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
export function talosAccess(installation: Installation, flags: {talosconfig?: string; stateDir?: string}): TalosAccess {
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
  const access = talosAccess(installation, lookup)
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
