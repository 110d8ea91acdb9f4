// `ichor backup` and `ichor backup inspect`. A backup only reads the cluster: a read plan (no
// Lease: an etcd snapshot is consistent at one revision whatever runs beside it). The key that
// encrypts the file is the one that seals the Talos bundle: --state-passphrase-file, else
// ICHOR_STATE_PASSPHRASE_FILE, else asked on a terminal, so a cron job names the file.
import {existsSync, statSync} from 'node:fs'
import {dirname, resolve} from 'node:path'
import {openBackupFile, type BackupManifest} from '../backup/archive.js'
import {takeBackup, type BackupReport, type BackupRequest} from '../backup/take.js'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import {withPrivateTempDir} from '../fs/private-files.js'
import type {ReadAccessOptions} from './options.js'
import {runReadPlan} from './run.js'
import {sealedKeySource} from './sealed-talosconfig.js'

const KEY_NEEDED = 'a backup is encrypted with the key that seals the Talos bundle'

export interface BackupOptions extends Omit<BackupRequest, 'file'>, ReadAccessOptions {
  /** The FILE argument. */
  file?: string
}

export type BackupResult = BackupReport & {warnings: string[]}

/** The folder must exist and FILE must not be one: refused (exit 2) before the cluster is asked. */
function checkFile(file: string | undefined): void {
  if (file === undefined) return
  const path = resolve(file)
  if (existsSync(path) && !statSync(path).isFile()) throw new IchorError(`FILE: ${file} exists and is not a regular file`, {exitCode: EXIT.usage})
  const dir = dirname(path)
  if (!existsSync(dir) || !statSync(dir).isDirectory())
    throw new IchorError(`FILE: the folder ${dir} does not exist`, {exitCode: EXIT.usage, hint: `mkdir -p ${dir}`})
}

export function runBackup(o: BackupOptions): Promise<BackupResult> {
  return runReadPlan(
    {
      command: 'backup',
      session: {kubeconfig: o.kubeconfig, context: o.context},
      talos: {talosconfig: o.talosconfig, stateDir: o.stateDir, sealed: {statePassphraseFile: o.statePassphraseFile, needed: KEY_NEEDED}},
      tempDir: 'ichor-backup-',
      checkLocal: () => checkFile(o.file),
      read: async ({session, talos, tempDir}) => ({...(await takeBackup({kube: await session.kube(), talos, tempDir}, o)), warnings: talos.warnings}),
    },
    o,
  )
}

export interface BackupInspectOptions {
  file: string
  statePassphraseFile?: string
  json: boolean
}

export interface BackupInspection {
  path: string
  bytes: number
  manifest: BackupManifest
}

/** Opens the file on this machine only (no cluster): decrypts, checks every part, and lists it. */
export async function runBackupInspect(o: BackupInspectOptions): Promise<BackupInspection> {
  const key = await sealedKeySource({statePassphraseFile: o.statePassphraseFile, yes: false, json: o.json, needed: KEY_NEEDED})
  const path = resolve(o.file)
  if (!existsSync(path)) throw new IchorError(`FILE: no such file ${o.file}`, {exitCode: EXIT.usage})
  const manifest = await withPrivateTempDir('ichor-backup-', async (dir) => openBackupFile(path, await key(), dir))
  return {path, bytes: statSync(path).size, manifest}
}
