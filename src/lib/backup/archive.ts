// The backup file: one age file, encrypted to the key that seals the Talos bundle in the cluster
// (an age identity's recipient, or the passphrase through scrypt), whose plaintext is a gzipped
// tar of manifest.json and the parts it lists, each with its size and sha256. The etcd snapshot
// holds every Secret of the cluster in plaintext, so nothing of it is ever written unencrypted
// outside a private (0700) folder; the file itself is written 0600 and atomically.
import {createHash} from 'node:crypto'
import {createReadStream, existsSync, openSync, readFileSync, readSync, closeSync, statSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {Readable} from 'node:stream'
import type {ReadableStream as WebReadableStream} from 'node:stream/web'
import {create as createTar, Unpack} from 'tar'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import {writePrivateFileFromStream} from '../fs/private-files.js'
import {decrypter, encrypter} from '../state/sealed-bundle.js'
import type {StateKey} from '../state/state-key.js'

export const BACKUP_FORMAT = 'ichor-backup/v1'

/** The parts every backup holds, besides manifest.json. */
export const BACKUP_PARTS = ['etcd.snapshot', 'installation.json', 'talos-bundle.json'] as const
export type BackupPart = (typeof BACKUP_PARTS)[number]

export interface BackupManifest {
  format: typeof BACKUP_FORMAT
  createdAt: string
  /** The ichor that wrote it. */
  ichorVersion: string
  cluster: {name: string; endpoint: string}
  versions: {talos: string; kubernetes: string; cilium?: string; argocd?: string; kokumi?: string}
  nodes: {controlPlanes: string[]; workers: string[]}
  /** What `talosctl etcd snapshot` said of the snapshot, and which control plane gave it. */
  etcd: {node: string; revision: number; hash: string; totalKeys: number; totalSize: number}
  parts: Record<BackupPart, {bytes: number; sha256: string}>
}

/** age's binary header line: every age file starts with it. */
const AGE_HEADER = 'age-encryption.org/v1\n'

export function sha256File(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex')
}

/** The size and sha256 of each part in `folder`, for the manifest. */
export function describeParts(folder: string): BackupManifest['parts'] {
  return Object.fromEntries(
    BACKUP_PARTS.map((part) => [part, {bytes: statSync(join(folder, part)).size, sha256: sha256File(join(folder, part))}]),
  ) as BackupManifest['parts']
}

/**
 * Writes manifest.json beside the parts in `folder` (a private one) and the encrypted file to
 * `path`: streamed, so a large etcd never sits in memory; the old file stays until the new one
 * is whole. Resolves to the file's size.
 */
export async function writeBackupFile(path: string, folder: string, manifest: BackupManifest, key: StateKey): Promise<number> {
  writeFileSync(join(folder, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`, {mode: 0o600})
  const tar = createTar({cwd: folder, gzip: true, portable: true}, ['manifest.json', ...BACKUP_PARTS])
  const plain = Readable.toWeb(Readable.from(tar)) as unknown as ReadableStream<Uint8Array>
  const sealed = await encrypter(key).encrypt(plain)
  return writePrivateFileFromStream(path, sealed as unknown as WebReadableStream<Uint8Array>)
}

function refuse(message: string, hint?: string, cause?: unknown): IchorError {
  return new IchorError(message, {exitCode: EXIT.usage, hint, cause})
}

/**
 * Decrypts the file into `folder` (a private one) and checks it: an age file, opened by the key,
 * a whole stream, a manifest of this format, and every part of the size and sha256 it names.
 * Anything else is refused (exit 2) naming why. Resolves to the manifest.
 */
export async function openBackupFile(path: string, key: StateKey, folder: string): Promise<BackupManifest> {
  let size: number
  try {
    const st = statSync(path)
    if (!st.isFile()) throw refuse(`${path} is not a regular file`)
    size = st.size
  } catch (error) {
    if (error instanceof IchorError) throw error
    throw refuse(`cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`)
  }
  if (!startsWithAgeHeader(path, size)) throw refuse(`${path} is not an ichor backup: it is not an age file`, 'name a file `ichor backup` wrote')
  let plain: ReadableStream<Uint8Array>
  try {
    plain = (await decrypter(key).decrypt(
      Readable.toWeb(createReadStream(path)) as unknown as ReadableStream<Uint8Array>,
    )) as unknown as ReadableStream<Uint8Array>
  } catch (error) {
    if (/no identity matched/.test((error as Error).message))
      throw refuse(
        `the ${key.kind} from ${key.origin} does not decrypt ${path}`,
        'a backup is encrypted with the passphrase (or age identity) that seals the Talos bundle of the cluster it was taken from',
        error,
      )
    throw refuse(`${path} is damaged: its age header does not read (${(error as Error).message})`, undefined, error)
  }
  const names = new Set<string>(['manifest.json', ...BACKUP_PARTS])
  const unpack = new Unpack({cwd: folder, strict: true, filter: (entry, stat) => names.has(entry) && ('type' in stat ? stat.type === 'File' : true)})
  const done = new Promise<void>((resolve, reject) => {
    unpack.on('close', resolve)
    unpack.on('error', reject)
  })
  try {
    for await (const chunk of plain as unknown as AsyncIterable<Uint8Array>)
      if (!unpack.write(Buffer.from(chunk))) await new Promise((r) => unpack.once('drain', r))
    unpack.end()
    await done
  } catch (error) {
    // age authenticates every 64 KiB chunk and the end: a changed or cut file fails here.
    throw refuse(`${path} is damaged: ${(error as Error).message}`, 'take a new backup, or use another copy of this one', error)
  }
  return checkedManifest(path, folder)
}

function startsWithAgeHeader(path: string, size: number): boolean {
  if (size < AGE_HEADER.length) return false
  const fd = openSync(path, 'r')
  try {
    const head = Buffer.alloc(AGE_HEADER.length)
    readSync(fd, head, 0, head.length, 0)
    return head.toString('latin1') === AGE_HEADER
  } finally {
    closeSync(fd)
  }
}

function checkedManifest(path: string, folder: string): BackupManifest {
  const file = join(folder, 'manifest.json')
  if (!existsSync(file)) throw refuse(`${path} decrypts, but is not an ichor backup: it holds no manifest.json`)
  let manifest: Partial<BackupManifest>
  try {
    manifest = JSON.parse(readFileSync(file, 'utf8')) as Partial<BackupManifest>
  } catch (error) {
    throw refuse(`${path}: its manifest.json is not JSON (${(error as Error).message})`)
  }
  if (manifest.format !== BACKUP_FORMAT)
    throw refuse(
      `${path} is a backup of format ${String(manifest.format)}; this ichor reads ${BACKUP_FORMAT}`,
      'a newer ichor may have written it: upgrade ichor',
    )
  for (const part of BACKUP_PARTS) {
    const want = manifest.parts?.[part]
    if (!want) throw refuse(`${path}: its manifest names no part ${part}`)
    const at = join(folder, part)
    if (!existsSync(at)) throw refuse(`${path}: part ${part} is missing`)
    const got = {bytes: statSync(at).size, sha256: sha256File(at)}
    if (got.sha256 !== want.sha256 || got.bytes !== want.bytes)
      throw refuse(
        `${path}: part ${part} does not match its manifest (sha256 ${got.sha256}, ${got.bytes} bytes; the manifest says ${want.sha256}, ${want.bytes} bytes)`,
      )
  }
  return manifest as BackupManifest
}
