// Where the key of the sealed Talos bundle comes from: --state-passphrase-file, else the
// ICHOR_STATE_PASSPHRASE_FILE environment variable (scripts), else a prompt on a terminal.
// Never argv, and never the passphrase itself in the environment: every child (helm,
// talosctl) inherits it and /proc/<pid>/environ shows it; a path there gives nothing away.
// The file holds a passphrase (age's scrypt recipient) or an age identity
// (AGE-SECRET-KEY-1…, as age-keygen writes it, # comments allowed).
import {statSync, readFileSync} from 'node:fs'
import {inspect} from 'node:util'
import {identityToRecipient} from 'age-encryption'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'

const STATE_PASSPHRASE_FLAG = '--state-passphrase-file'
export const STATE_PASSPHRASE_ENV = 'ICHOR_STATE_PASSPHRASE_FILE'

const IDENTITY_LINE = /^AGE-SECRET-KEY-(PQ-)?1[0-9A-Z]+$/

/** The operator's key; the secret is only handed to age (`reveal`), never printed or serialised. */
export class StateKey {
  readonly #secret: string
  private constructor(
    readonly kind: 'passphrase' | 'identity',
    secret: string,
    /** Where it came from, for messages ("--state-passphrase-file ./pass"). */
    readonly origin: string,
    /** age1… for an identity: what the bundle is encrypted to. */
    readonly recipient: string,
  ) {
    this.#secret = secret
  }

  static passphrase(passphrase: string, origin: string): StateKey {
    return new StateKey('passphrase', passphrase, origin, '')
  }

  static async identity(identity: string, origin: string): Promise<StateKey> {
    let recipient: string
    try {
      recipient = await identityToRecipient(identity)
    } catch {
      throw new IchorError(`${origin}: the age identity in it is malformed`, {
        exitCode: EXIT.usage,
        hint: 'write a passphrase, or an identity from age-keygen (AGE-SECRET-KEY-1…)',
      })
    }
    return new StateKey('identity', identity, origin, recipient)
  }

  reveal(): string {
    return this.#secret
  }

  toJSON() {
    return {kind: this.kind, origin: this.origin}
  }

  [inspect.custom]() {
    return `StateKey(${this.kind} from ${this.origin})`
  }
}

/**
 * Reads a key file. Refused (exit 2) as ssh refuses a private key: missing, not a regular
 * file, empty, or readable or writable by group or others.
 */
export async function readStateKeyFile(path: string, origin: string): Promise<StateKey> {
  let mode: number
  try {
    const st = statSync(path)
    if (!st.isFile()) throw new IchorError(`${origin}: ${path} is not a regular file`, {exitCode: EXIT.usage})
    mode = st.mode & 0o777
  } catch (error) {
    if (error instanceof IchorError) throw error
    throw new IchorError(`${origin}: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`, {exitCode: EXIT.usage})
  }
  if ((mode & 0o077) !== 0) {
    throw new IchorError(`${origin}: ${path} is accessible by group or others (mode ${mode.toString(8).padStart(4, '0')}); a key file must be private`, {
      exitCode: EXIT.usage,
      hint: `chmod 600 ${path}`,
    })
  }
  const text = readFileSync(path, 'utf8')
  const lines = text.split(/\r?\n/)
  const identity = lines.map((l) => l.trim()).find((l) => IDENTITY_LINE.test(l))
  if (identity) return StateKey.identity(identity, origin)
  // A passphrase is the file's content without its final newline (echo and editors add one).
  const passphrase = text.replace(/\r?\n$/, '')
  if (passphrase === '') throw new IchorError(`${origin}: ${path} is empty`, {exitCode: EXIT.usage, hint: 'write the passphrase (or an age identity) into it'})
  return StateKey.passphrase(passphrase, origin)
}

/** A key named by the flag or the environment, read now; undefined when neither names one. */
export async function givenStateKey(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): Promise<StateKey | undefined> {
  if (flag) return readStateKeyFile(flag, `${STATE_PASSPHRASE_FLAG} ${flag}`)
  const file = env[STATE_PASSPHRASE_ENV]
  if (file) return readStateKeyFile(file, `${STATE_PASSPHRASE_ENV}=${file}`)
  return undefined
}

/**
 * age's scrypt slows each guess but cannot save a guessable passphrase, and the sealed bundle
 * sits in a Secret anyone with read access can copy and attack offline. An identity is 256 random bits.
 */
export const MIN_PASSPHRASE_LENGTH = 12

function isShort(key: StateKey): boolean {
  return key.kind === 'passphrase' && [...key.reveal()].length < MIN_PASSPHRASE_LENGTH // characters, not UTF-16 units
}

/** A key that SETS a new bundle: a short passphrase is refused (exit 2) before anything is written. */
export function requireNewStateKey(key: StateKey): StateKey {
  if (!isShort(key)) return key
  throw new IchorError(`${key.origin}: the passphrase is shorter than ${MIN_PASSPHRASE_LENGTH} characters`, {
    exitCode: EXIT.usage,
    hint: `write a passphrase of at least ${MIN_PASSPHRASE_LENGTH} characters, or an age identity from age-keygen (AGE-SECRET-KEY-1…)`,
  })
}

/** A key that OPENS an existing bundle: it cannot be changed there, so a short one is only warned about. */
export function shortStateKeyWarning(key: StateKey): string | undefined {
  if (!isShort(key)) return undefined
  return `${key.origin}: the passphrase of the Talos admin bundle is shorter than ${MIN_PASSPHRASE_LENGTH} characters; whoever can read its Secret can try to guess it offline`
}

/** Exit 2 when no key is given and there is no terminal to ask on. */
export function missingStateKeyError(why: string): IchorError {
  return new IchorError(`${why}: no passphrase for the Talos admin bundle, and no terminal to ask on`, {
    exitCode: EXIT.usage,
    hint: `pass ${STATE_PASSPHRASE_FLAG} FILE or set ${STATE_PASSPHRASE_ENV}=FILE (a 0600 file with the passphrase or an age identity), or run it on a terminal`,
  })
}

/** Asks on the terminal; `confirm` asks twice (a new bundle), until both answers agree. */
export async function promptStateKey(opts: {confirm: boolean}): Promise<StateKey> {
  const {password} = await import('@inquirer/prompts')
  // A new bundle's passphrase must be long enough (requireNewStateKey); an existing one is what it is.
  const validate = (v: string) =>
    v === ''
      ? 'the passphrase must not be empty'
      : opts.confirm && [...v].length < MIN_PASSPHRASE_LENGTH
        ? `at least ${MIN_PASSPHRASE_LENGTH} characters`
        : true
  for (;;) {
    const first = await password({message: 'Passphrase for the Talos admin bundle kept in the cluster', mask: true, validate})
    if (!opts.confirm) return StateKey.passphrase(first, 'the terminal prompt')
    const second = await password({message: 'The same passphrase again', mask: true})
    if (first === second) return StateKey.passphrase(first, 'the terminal prompt')
    process.stderr.write('The passphrases differ; try again.\n')
  }
}
