// The key of the sealed Talos bundle in the cluster, for a plan that may open it when this
// machine has no talosconfig (`kubernetes upgrade`, `cni kube-proxy replace|restore`): from
// --state-passphrase-file (read with this machine's input, exit 2 before any connection), else
// asked on a terminal, else the error naming the flag. Asked only when the copy is needed.
import {canPrompt} from './consent.js'
import {givenStateKey, missingStateKeyError, promptStateKey, type StateKey} from '../state/state-key.js'

export interface SealedKeyFlags {
  /** --state-passphrase-file */
  statePassphraseFile?: string
  /** --state-dir, for the message. */
  stateDir?: string
  /** Why the key is needed, for the error without a terminal (default: the talosconfig's copy in the cluster). */
  needed?: string
  /** --yes and --json: never prompt. */
  yes: boolean
  json: boolean
}

/** Reads the key file now (this machine's input); the returned function gives the key when the sealed copy is opened. */
export async function sealedKeySource(o: SealedKeyFlags): Promise<() => Promise<StateKey>> {
  const givenKey = await givenStateKey(o.statePassphraseFile)
  // Asked once per run: the talosconfig and the secrets (node replace) both open the sealed copy.
  let asked: Promise<StateKey> | undefined
  return async () => {
    if (givenKey) return givenKey
    if (!o.json && !o.yes && canPrompt()) return (asked ??= promptStateKey({confirm: false}))
    throw missingStateKeyError(
      o.needed ?? `no talosconfig in ${o.stateDir ?? "init's state directory"} and --talosconfig not given, so the copy in the cluster is needed`,
    )
  }
}
