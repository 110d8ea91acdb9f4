// The talosconfig of a plan that may open the sealed copy in the cluster (`kubernetes upgrade`,
// `cni kube-proxy replace|restore`): talosconfigFor's one rule with the sealed option, its key
// from --state-passphrase-file (read with this machine's input), else asked on a terminal, else
// the error naming the flag; a short passphrase's warning goes into the command's result.
import {canPrompt} from '../cli/consent.js'
import type {Kube} from '../kube/client.js'
import type {Installation} from '../state/installation.js'
import {givenStateKey, missingStateKeyError, promptStateKey, type StateKey} from '../state/state-key.js'
import {talosconfigFor} from '../talos/access.js'
import {once, type Once} from '../tasks/memo.js'

export interface SealedTalosconfigFlags {
  /** --talosconfig */
  talosconfig?: string
  /** --state-dir */
  stateDir?: string
  /** --state-passphrase-file: the key of the Talos bundle in the cluster, needed when no talosconfig is at hand. */
  statePassphraseFile?: string
  /** --yes and --json: never prompt. */
  yes: boolean
  json: boolean
}

export interface SealedTalosconfigAccess {
  /** In checkLocal: the key file is this machine's input, refused (exit 2) before any connection. */
  readKeyFile(): Promise<void>
  /** The talosconfig, looked for once: this machine first, else the sealed copy written into `privateDir`. */
  talosconfig(kube: Kube, installation: Installation, privateDir: string): Once<string>
  /** Accepted but unwise: a passphrase under 12 characters opened the sealed bundle. */
  warnings: string[]
}

export function sealedTalosconfigAccess(o: SealedTalosconfigFlags): SealedTalosconfigAccess {
  let givenKey: StateKey | undefined
  const warnings: string[] = []
  const key = async (): Promise<StateKey> => {
    if (givenKey) return givenKey
    if (!o.json && !o.yes && canPrompt()) return promptStateKey({confirm: false})
    throw missingStateKeyError(`no talosconfig in ${o.stateDir ?? "init's state directory"} and --talosconfig not given, so the copy in the cluster is needed`)
  }
  return {
    warnings,
    async readKeyFile() {
      givenKey = await givenStateKey(o.statePassphraseFile)
    },
    talosconfig: (kube, installation, privateDir) =>
      once(() =>
        talosconfigFor(installation, {
          talosconfig: o.talosconfig,
          stateDir: o.stateDir,
          sealed: {kube, privateDir, key, warn: (w) => warnings.push(w)},
        }),
      ),
  }
}
