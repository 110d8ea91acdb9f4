// The Talos admin bundle as the cluster keeps it (ichor-system/ichor-talos): encrypted with
// age (the format SOPS users already keep Talos secrets in) to a passphrase (scrypt) or an
// X25519 identity that only the operator holds. Anything in the cluster allowed to read
// Secrets then reads ciphertext only. A Secret without the format annotation was written
// by an older ichor in plaintext: it is read as is and re-written sealed by the next init.
import {armor, Decrypter, Encrypter} from 'age-encryption'
import {ICHOR_SYSTEM, MANAGED_BY, STATE_SECRETS} from '../constants.js'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import type {KubeObject} from '../kube/objects.js'
import {shortStateKeyWarning, type StateKey} from './state-key.js'

export const BUNDLE_FORMAT_ANNOTATION = 'ichor.maesh.dev/bundle-format'
/** ASCII-armored age file in data key `bundle.age`; its plaintext is SealedPayload as JSON. */
export const SEALED_FORMAT = 'age-armor-v1'
export const SEALED_KEY = 'bundle.age'
export const TALOS_SECRET_NAME = `${ICHOR_SYSTEM}/${STATE_SECRETS.talos}`

interface SealedPayload {
  version: 1
  /** base64, so any bytes survive the JSON. */
  'secrets.yaml': string
  talosconfig: string
}

/** The Talos secrets bundle and talosconfig another machine continues with. */
export interface TalosBundle {
  secretsYaml: Buffer
  talosconfig: Buffer
}

export type SecretWithData = KubeObject & {data?: Record<string, string>}

/** How a stored bundle was kept: sealed with age, or plaintext by an ichor before sealing. */
export type StoredFormat = 'sealed' | 'plaintext'

export class WrongStateKeyError extends IchorError {
  constructor(key: StateKey, cause?: unknown) {
    super(`the ${key.kind} from ${key.origin} does not decrypt ${TALOS_SECRET_NAME}; nothing was changed`, {
      exitCode: EXIT.usage,
      cause,
      hint: 'use the passphrase (or age identity) the cluster was set up with (--state-passphrase-file FILE or ICHOR_STATE_PASSPHRASE_FILE)',
    })
    this.name = 'WrongStateKeyError'
  }
}

/** age's encrypter to the key: an identity's recipient, or the passphrase (scrypt). */
export function encrypter(key: StateKey): Encrypter {
  const e = new Encrypter()
  if (key.kind === 'identity') e.addRecipient(key.recipient)
  else e.setPassphrase(key.reveal())
  return e
}

/** age's decrypter with the key. */
export function decrypter(key: StateKey): Decrypter {
  const d = new Decrypter()
  if (key.kind === 'identity') d.addIdentity(key.reveal())
  else d.addPassphrase(key.reveal())
  return d
}

/** The armored age file of a bundle. */
async function sealBundle(bundle: TalosBundle, key: StateKey): Promise<string> {
  const payload: SealedPayload = {version: 1, 'secrets.yaml': bundle.secretsYaml.toString('base64'), talosconfig: bundle.talosconfig.toString('base64')}
  return armor.encode(await encrypter(key).encrypt(JSON.stringify(payload)))
}

/** The bundle inside an armored age file; a key that does not open it is a WrongStateKeyError (exit 2). */
export async function openBundle(armored: string, key: StateKey): Promise<TalosBundle> {
  let binary: Uint8Array
  try {
    binary = armor.decode(armored)
  } catch (error) {
    throw new IchorError(`${TALOS_SECRET_NAME} holds no readable age file (${(error as Error).message})`, {cause: error})
  }
  let text: string
  try {
    text = await decrypter(key).decrypt(binary, 'text')
  } catch (error) {
    // age says "no identity matched" for a wrong passphrase or key (or a passphrase for a file sealed to an identity).
    if (/no identity matched/.test((error as Error).message)) throw new WrongStateKeyError(key, error)
    throw new IchorError(`${TALOS_SECRET_NAME} holds no readable age file (${(error as Error).message})`, {cause: error})
  }
  const payload = JSON.parse(text) as Partial<SealedPayload>
  if (payload.version !== 1 || typeof payload['secrets.yaml'] !== 'string' || typeof payload.talosconfig !== 'string') {
    throw new IchorError(
      `${TALOS_SECRET_NAME} decrypts to a bundle of an unknown shape (version ${String(payload.version)}); a newer ichor may have written it`,
    )
  }
  return {secretsYaml: Buffer.from(payload['secrets.yaml'], 'base64'), talosconfig: Buffer.from(payload.talosconfig, 'base64')}
}

/** The Secret that holds a sealed bundle (ciphertext only, the format named in an annotation). */
export async function sealedBundleSecret(bundle: TalosBundle, key: StateKey): Promise<SecretWithData> {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {name: STATE_SECRETS.talos, namespace: ICHOR_SYSTEM, labels: {...MANAGED_BY}, annotations: {[BUNDLE_FORMAT_ANNOTATION]: SEALED_FORMAT}},
    type: 'Opaque',
    data: {[SEALED_KEY]: Buffer.from(await sealBundle(bundle, key), 'utf8').toString('base64')},
  }
}

export function storedFormatOf(secret: SecretWithData): StoredFormat {
  const format = secret.metadata.annotations?.[BUNDLE_FORMAT_ANNOTATION]
  if (format === undefined) return 'plaintext'
  if (format === SEALED_FORMAT) return 'sealed'
  throw new IchorError(`${TALOS_SECRET_NAME} is in a format this ichor does not know (${BUNDLE_FORMAT_ANNOTATION}: ${format}); a newer ichor wrote it`, {
    exitCode: EXIT.usage,
    hint: 'upgrade ichor',
  })
}

/**
 * The bundle a Secret holds. A sealed one needs the key (asked for only then); a plaintext
 * one from an older ichor is read without it. Undefined when the Secret holds no whole bundle.
 * Every command opens it here, so every one warns (`warn`, the bare text) about a passphrase
 * under MIN_PASSPHRASE_LENGTH: it cannot be changed by opening, only by re-sealing.
 */
export async function bundleOfSecret(
  secret: SecretWithData,
  key: () => Promise<StateKey>,
  warn: (warning: string) => void,
): Promise<{bundle: TalosBundle; format: StoredFormat} | undefined> {
  const format = storedFormatOf(secret)
  const data = secret.data ?? {}
  if (format === 'sealed') {
    const armored = data[SEALED_KEY]
    if (!armored) return undefined
    const k = await key()
    const opened = await openBundle(Buffer.from(armored, 'base64').toString('utf8'), k)
    const short = shortStateKeyWarning(k)
    if (short) warn(short)
    return {format, bundle: opened}
  }
  if (!data['secrets.yaml'] || !data.talosconfig) return undefined
  return {format, bundle: {secretsYaml: Buffer.from(data['secrets.yaml'], 'base64'), talosconfig: Buffer.from(data.talosconfig, 'base64')}}
}
