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

/** --talosconfig, else the state directory (--state-dir, else init's default for the CR's cluster name). */
export function talosAccess(installation: Installation, flags: {talosconfig?: string; stateDir?: string}): TalosAccess {
  const state = localState(installation.spec.talos.clusterName, flags.stateDir)
  if (flags.talosconfig && !existsSync(flags.talosconfig)) throw new IchorError(`--talosconfig: no such file ${flags.talosconfig}`, {exitCode: EXIT.usage})
  const talosconfig = flags.talosconfig ?? (existsSync(state.talosconfig) ? state.talosconfig : undefined)
  return {talosconfig, localConfigs: [state.controlPlaneConfig].filter((f) => existsSync(f)), stateDir: state.dir}
}

export async function resolveTalosconfig(
  kube: Kube,
  installation: Installation,
  flags: {talosconfig?: string; stateDir?: string},
  privateDir: string,
  /** The key of the sealed cluster copy, asked for only when that copy is needed. */
  key: () => Promise<StateKey>,
  /** A short passphrase's warning when the sealed copy is opened (bundleOfSecret). */
  warn: (warning: string) => void,
): Promise<string> {
  const access = talosAccess(installation, flags)
  if (access.talosconfig) return access.talosconfig
  const bundle = (await readTalosBundle(kube, key, warn))?.bundle
  if (!bundle) {
    throw new IchorError(`no talosconfig: none in ${access.stateDir}, and the cluster holds no copy`, {
      exitCode: EXIT.usage,
      hint: 'pass --talosconfig FILE (or --state-dir DIR of the machine that ran ichor init)',
    })
  }
  const file = join(privateDir, 'talosconfig')
  writePrivateFileAtomic(file, bundle.talosconfig)
  return file
}
