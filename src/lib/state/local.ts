// Local state before the cluster exists: Talos secrets, machine configs, talosconfig and
// kubeconfig in the XDG state directory (or --state-dir). Once the cluster is up the
// secrets and talosconfig are also stored in ichor-system, so another machine can go on.
// Every file here holds a root secret of the cluster: 0600 in a 0700 folder, written
// atomically, and checked when read (a truncated bundle must never be reused).
import {closeSync, fsyncSync, openSync, renameSync, rmSync} from 'node:fs'
import {join} from 'node:path'
import {parse as parseYaml, parseAllDocuments} from 'yaml'
import {IchorError} from '../errors/errors.js'
import {homeDir} from '../fs/home.js'
import {describeModeFix, ensurePrivateDir, readCheckedFile, securePrivateFiles, writePrivateFileAtomic} from '../fs/private-files.js'

export interface LocalState {
  dir: string
  secrets: string
  talosconfig: string
  kubeconfig: string
  controlPlaneConfig: string
  workerConfig: string
  /** Hash of the inputs the machine configs were generated from. */
  configsHash: string
  /** The folder came from --state-dir (its parent must exist), not the XDG default. */
  fromFlag: boolean
}

/** The files of the local state, by the name LocalState gives their paths. */
export type StateFile = 'secrets' | 'talosconfig' | 'kubeconfig' | 'controlPlaneConfig' | 'workerConfig' | 'configsHash'
const STATE_FILES: readonly StateFile[] = ['secrets', 'talosconfig', 'kubeconfig', 'controlPlaneConfig', 'workerConfig', 'configsHash']

/** Where every cluster's local state folder lives by default: $XDG_STATE_HOME/ichor. */
export function stateRoot(): string {
  return join(process.env.XDG_STATE_HOME || join(homeDir(), '.local', 'state'), 'ichor')
}

export function localState(clusterName: string, override?: string): LocalState {
  const dir = override ?? join(stateRoot(), clusterName)
  return {
    dir,
    secrets: join(dir, 'secrets.yaml'),
    talosconfig: join(dir, 'talosconfig'),
    kubeconfig: join(dir, 'kubeconfig'),
    controlPlaneConfig: join(dir, 'controlplane.yaml'),
    workerConfig: join(dir, 'worker.yaml'),
    configsHash: join(dir, 'configs.sha256'),
    fromFlag: override !== undefined,
  }
}

/**
 * Makes the state folder private before anything is written into it: created 0700 (the
 * parent of a --state-dir must exist; the XDG default's parents are created), an existing
 * folder others could read set to 0700 and every state file in it to 0600, each change
 * reported in `fixed` for the caller to print. A shared folder (sticky, or writable by
 * others, who could have planted files) or one owned by another user is refused, as is an
 * unwritable one: a PrivatePathError naming the folder, exit 2.
 */
export function prepareStateDir(state: LocalState): {fixed: string[]} {
  const label = state.fromFlag ? '--state-dir' : 'state folder'
  const dirFix = ensurePrivateDir(state.dir, {label, createParents: !state.fromFlag, loose: 'fix'})
  const fileFixes = securePrivateFiles(STATE_FILES.map((f) => state[f]))
  const fixed = [...dirFix.fixed, ...fileFixes].map(describeModeFix)
  // Files others could read through a folder they could enter: say so, they may be copied.
  const wasOpen = dirFix.fixed.some((f) => (f.was & 0o011) !== 0)
  const exposed = fileFixes.filter((f) => (f.was & 0o044) !== 0).map((f) => f.path)
  if (wasOpen && exposed.length > 0) {
    fixed.push(`other users of this machine could read ${exposed.join(', ')} until now: treat what they hold as possibly copied`)
  }
  return {fixed}
}

/**
 * Sets every state file present to 0600 and says what changed. Call it after anything
 * that writes into the folder without ichor's writer: `talosctl gen secrets`,
 * `talosctl gen config` (it writes 0644), `talosctl kubeconfig`.
 */
export function secureStateFiles(state: LocalState): string[] {
  return securePrivateFiles(STATE_FILES.map((f) => state[f])).map(describeModeFix)
}

export type StateFileRead =
  | {status: 'absent'; file: StateFile; path: string}
  | {status: 'corrupt'; file: StateFile; path: string; reason: string}
  | {status: 'ok'; file: StateFile; path: string; text: string}

/** Reads one state file and checks its content: absent, corrupt (with the reason) or ok. */
export function readStateFile(state: LocalState, file: StateFile): StateFileRead {
  return {...readCheckedFile(state[file], STATE_FILE_CHECKS[file]), file}
}

/** The content of a state file that must be there and sound, or a CorruptStateFileError / a missing-file error naming it. */
export function requireStateFile(state: LocalState, file: StateFile): string {
  const read = readStateFile(state, file)
  if (read.status === 'ok') return read.text
  if (read.status === 'corrupt') throw new CorruptStateFileError(read.path, file, read.reason)
  throw new IchorError(`${read.path} is missing`, {hint: REPAIR[file]})
}

/**
 * Writes a state file atomically (0600, temp file, fsync, rename). The content is checked
 * first as a reader would check it: a corrupt copy (say, from the cluster) is refused and
 * the file on disk is left as it was.
 */
export function writeStateFile(state: LocalState, file: StateFile, content: string | Uint8Array): void {
  const text = typeof content === 'string' ? content : Buffer.from(content).toString('utf8')
  const reason = text.trim() === '' ? 'the content is empty' : STATE_FILE_CHECKS[file](text)
  if (reason !== undefined) throw new CorruptStateFileError(state[file], file, reason, 'not written')
  writePrivateFileAtomic(state[file], content)
}

/**
 * Moves a file another program wrote (say `talosctl gen secrets --output-file` into a temp
 * name in the state folder) into place as a state file: checked like a read, set 0600,
 * fsynced, renamed. A corrupt one (the disk filled while talosctl wrote it) is removed and
 * reported, so a cut-short bundle never becomes the cluster's secrets.
 */
export function commitStateFile(state: LocalState, file: StateFile, writtenPath: string): void {
  const read = readCheckedFile(writtenPath, STATE_FILE_CHECKS[file])
  if (read.status !== 'ok') {
    rmSync(writtenPath, {force: true})
    throw new CorruptStateFileError(writtenPath, file, read.status === 'corrupt' ? read.reason : 'it was not written', 'removed')
  }
  securePrivateFiles([writtenPath])
  const fd = openSync(writtenPath, 'r')
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
  renameSync(writtenPath, state[file])
}

export class CorruptStateFileError extends IchorError {
  constructor(
    readonly path: string,
    readonly file: StateFile,
    readonly reason: string,
    verb = 'not used',
  ) {
    super(`${path} is corrupt (${reason}); it was ${verb}`, {hint: REPAIR[file]})
    this.name = 'CorruptStateFileError'
  }
}

const REPAIR: Record<StateFile, string> = {
  secrets:
    'restore secrets.yaml from a backup, or run ichor with --kubeconfig pointing at the cluster, which keeps a copy in ichor-system/ichor-talos. ' +
    'Do not delete it to get a new one: configured nodes accept only the original.',
  talosconfig: 'it is generated from secrets.yaml with the machine configs: delete talosconfig and configs.sha256 and run again.',
  kubeconfig: 'it is fetched again from the first control plane: delete kubeconfig and run again.',
  controlPlaneConfig: 'the machine configs are generated from secrets.yaml: delete configs.sha256 and run again.',
  workerConfig: 'the machine configs are generated from secrets.yaml: delete configs.sha256 and run again.',
  configsHash: 'delete configs.sha256 and run again; the machine configs are then generated anew.',
}

// --- content checks: each returns why a file is unusable, or undefined -----------------

const STATE_FILE_CHECKS: Record<StateFile, (text: string) => string | undefined> = {
  secrets: checkSecretsBundle,
  talosconfig: checkTalosconfig,
  kubeconfig: checkKubeconfig,
  controlPlaneConfig: checkMachineConfig,
  workerConfig: checkMachineConfig,
  configsHash: (text) => (/^[0-9a-f]{64}\s*$/.test(text) ? undefined : 'not a sha256 hex digest'),
}

type Doc = Record<string, unknown>
const TOKEN = /^[a-z0-9]{6}\.[a-z0-9]{16}$/

/** The Talos secrets bundle as `talosctl gen secrets` writes it (pkg/machinery/config/generate/secrets). */
function checkSecretsBundle(text: string): string | undefined {
  const doc = yamlMapping(text)
  const problems: string[] = []
  const str = (path: string) => {
    const v = at(doc, path)
    if (typeof v !== 'string' || v === '') problems.push(`${path} is missing`)
    return typeof v === 'string' ? v : undefined
  }
  str('cluster.id')
  str('cluster.secret')
  for (const token of ['secrets.bootstraptoken', 'trustdinfo.token']) {
    const v = str(token)
    if (v !== undefined && v !== '' && !TOKEN.test(v)) problems.push(`${token} is not a token of the form abcdef.0123456789abcdef`)
  }
  const encryption = ['secrets.secretboxencryptionsecret', 'secrets.aescbcencryptionsecret'].filter((p) => at(doc, p) !== undefined)
  if (encryption.length === 0) problems.push('secrets.secretboxencryptionsecret is missing')
  for (const p of encryption) problems.push(...base64Problem(p, at(doc, p)))
  for (const ca of ['etcd', 'k8s', 'k8saggregator', 'os'])
    for (const part of ['crt', 'key']) problems.push(...base64Problem(`certs.${ca}.${part}`, at(doc, `certs.${ca}.${part}`)))
  problems.push(...base64Problem('certs.k8sserviceaccount.key', at(doc, 'certs.k8sserviceaccount.key')))
  return problems.length > 0 ? problems.join('; ') : undefined
}

function checkTalosconfig(text: string): string | undefined {
  const doc = yamlMapping(text)
  const name = doc.context
  if (typeof name !== 'string' || name === '') return 'context is missing'
  const context = at(doc, 'contexts')
  const ctx = isMapping(context) ? context[name] : undefined
  if (!isMapping(ctx)) return `contexts.${name} is missing`
  const problems = ['ca', 'crt', 'key'].flatMap((k) => base64Problem(`contexts.${name}.${k}`, ctx[k]))
  return problems.length > 0 ? problems.join('; ') : undefined
}

function checkKubeconfig(text: string): string | undefined {
  const doc = yamlMapping(text)
  const problems: string[] = []
  const named = (key: string) => (Array.isArray(doc[key]) ? (doc[key] as unknown[]) : [])
  for (const list of ['clusters', 'contexts', 'users']) if (named(list).length === 0) problems.push(`${list} is empty`)
  const byName = (list: string, name: unknown) => named(list).find((e) => isMapping(e) && e.name === name)
  const current = doc['current-context']
  if (typeof current === 'string' && current !== '') {
    const context = byName('contexts', current)
    const body = isMapping(context) ? context.context : undefined
    if (!isMapping(body)) problems.push(`current-context "${current}" names no context`)
    else for (const ref of ['cluster', 'user']) if (!byName(`${ref}s`, body[ref])) problems.push(`context "${current}" names no known ${ref}`)
  }
  for (const [list, inner] of [
    ['clusters', 'cluster'],
    ['users', 'user'],
  ] as const) {
    named(list).forEach((entry, i) => {
      const body = isMapping(entry) ? entry[inner] : undefined
      if (!isMapping(body)) return problems.push(`${list}[${i}].${inner} is missing`)
      if (inner === 'cluster' && typeof body.server !== 'string') problems.push(`${list}[${i}].cluster.server is missing`)
      if ('client-certificate-data' in body !== 'client-key-data' in body)
        problems.push(`${list}[${i}].user has a client certificate without its key, or a key without its certificate`)
      for (const [k, v] of Object.entries(body)) if (k.endsWith('-data')) problems.push(...base64Problem(`${list}[${i}].${inner}.${k}`, v))
    })
  }
  return problems.length > 0 ? problems.join('; ') : undefined
}

/** A Talos machine config: YAML documents, one of them the v1alpha1 config with machine and cluster. */
function checkMachineConfig(text: string): string | undefined {
  const docs = parseAllDocuments(text)
  for (const d of docs) if (d.errors.length > 0) return `not valid YAML: ${d.errors[0]!.message.split('\n')[0]}`
  const v1 = docs.map((d) => d.toJS() as unknown).find((d) => isMapping(d) && d.version === 'v1alpha1')
  if (!isMapping(v1)) return 'no v1alpha1 document'
  if (!isMapping(v1.machine) || !isMapping(v1.cluster)) return 'the v1alpha1 document lacks machine or cluster'
  return undefined
}

/** Strict base64 (padded, as Go's StdEncoding writes it); a value that decodes to PEM must hold a whole block. */
function base64Problem(path: string, value: unknown): string[] {
  if (typeof value !== 'string' || value === '') return [`${path} is missing`]
  if (value.length % 4 !== 0 || !/^[A-Za-z0-9+/]+={0,2}$/.test(value)) return [`${path} is not valid base64 (cut short?)`]
  const decoded = Buffer.from(value, 'base64').toString('latin1')
  // A value cut right after its first characters decodes to a mere start of a PEM header.
  if (decoded.startsWith('-----') || '-----BEGIN '.startsWith(decoded)) {
    const block = /^-----BEGIN ([A-Z0-9 ]+)-----\r?\n[\s\S]*?\r?\n-----END \1-----\s*$/.exec(decoded)
    if (!block) return [`${path} holds an incomplete PEM block`]
  }
  return []
}

function yamlMapping(text: string): Doc {
  const doc = parseYaml(text) as unknown
  if (!isMapping(doc)) throw new Error('not a YAML mapping')
  return doc
}

function isMapping(v: unknown): v is Doc {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

function at(doc: Doc, path: string): unknown {
  let cur: unknown = doc
  for (const key of path.split('.')) cur = isMapping(cur) ? cur[key] : undefined
  return cur
}
