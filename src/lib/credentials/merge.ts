// Where the admin kubeconfig and talosconfig go on this machine, and how they join the files an
// operator already has. Merging follows talosctl (`talosctl kubeconfig` merges into
// ~/.kube/config, `talosctl config merge` into ~/.talos/config, each making the new context the
// current one), except on a name clash: talosctl asks or renames, ichor refuses (exit 2) unless
// --force, so another cluster's context is never overwritten by accident. An entry that is
// already exactly the same is no clash: a rerun changes nothing.
import {existsSync, readFileSync} from 'node:fs'
import {dirname, join} from 'node:path'
import {isDeepStrictEqual} from 'node:util'
import {parse as parseYaml, stringify} from 'yaml'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import {homeDir} from '../fs/home.js'
import {ensurePrivateDir, writePrivateFileAtomic} from '../fs/private-files.js'

type Named<K extends string> = {name: string} & Record<K, unknown>
export interface KubeconfigFile {
  apiVersion?: string
  kind?: string
  'current-context'?: string
  clusters?: Named<'cluster'>[]
  users?: Named<'user'>[]
  contexts?: Named<'context'>[]
  [key: string]: unknown
}

export interface TalosconfigFile {
  context?: string
  contexts?: Record<string, Record<string, unknown>>
  [key: string]: unknown
}

/** Where the credentials are written: a file of their own, or merged into the operator's. */
export interface CredentialTarget {
  /** --output FILE; absent: the default file of the tool (kubectl's, talosctl's). */
  output?: string
  /** --merge: join the file that is there (the default when no --output is named). */
  merge: boolean
  /** --force: replace a clashing entry, or an existing --output file. */
  force: boolean
}

/** kubectl's file: the first of $KUBECONFIG, else ~/.kube/config. */
export function defaultKubeconfigPath(): string {
  const first = (process.env.KUBECONFIG ?? '').split(':').find(Boolean)
  return first ?? join(homeDir(), '.kube', 'config')
}

/** talosctl's file: $TALOSCONFIG, else ~/.talos/config. */
export function defaultTalosconfigPath(): string {
  return process.env.TALOSCONFIG || join(homeDir(), '.talos', 'config')
}

const usage = (message: string, hint?: string) => new IchorError(message, {exitCode: EXIT.usage, hint})

/** The one context of a Talos-made kubeconfig, its cluster and user, all under `name`. */
export function renameKubeconfig(doc: KubeconfigFile, name: string): KubeconfigFile {
  const context = doc.contexts?.find((c) => c.name === doc['current-context']) ?? doc.contexts?.[0]
  if (!context) throw new IchorError('the kubeconfig Talos returned has no context')
  const ref = context.context as {cluster?: string; user?: string}
  const cluster = doc.clusters?.find((c) => c.name === ref.cluster)
  const user = doc.users?.find((u) => u.name === ref.user)
  if (!cluster || !user) throw new IchorError(`the kubeconfig Talos returned names a cluster or user it does not hold (context "${context.name}")`)
  return {
    ...doc,
    'current-context': name,
    clusters: [{...cluster, name}],
    users: [{...user, name}],
    contexts: [{...context, name, context: {...(context.context as Record<string, unknown>), cluster: name, user: name}}],
  }
}

/**
 * `from`'s context, cluster and user joined into `into`; its context becomes the current one.
 * A different entry of the same name is a clash: refused unless `force` replaces it.
 */
export function mergeKubeconfig(into: KubeconfigFile, from: KubeconfigFile, o: {force: boolean; path: string}): {doc: KubeconfigFile; changed: boolean} {
  const doc: KubeconfigFile = {apiVersion: 'v1', kind: 'Config', ...into}
  const clashes: string[] = []
  for (const kind of ['clusters', 'users', 'contexts'] as const) {
    const mine = [...((doc[kind] ?? []) as Named<string>[])]
    for (const entry of (from[kind] ?? []) as Named<string>[]) {
      const at = mine.findIndex((e) => e.name === entry.name)
      if (at < 0) mine.push(entry)
      else if (!isDeepStrictEqual(mine[at], entry)) {
        clashes.push(`${kind.slice(0, -1)} "${entry.name}"`)
        mine[at] = entry
      }
    }
    ;(doc as Record<string, unknown>)[kind] = mine
  }
  if (clashes.length > 0 && !o.force)
    throw usage(
      `${o.path} already has a different ${clashes.join(', ')}: ichor does not overwrite it`,
      'pass --context-name NAME to add these credentials under another name, or --force to replace that entry',
    )
  doc['current-context'] = from['current-context']
  return {doc, changed: !isDeepStrictEqual(doc, into)}
}

/** `from`'s contexts joined into `into` (talosctl config merge), the current one set; a different context of the same name is a clash. */
export function mergeTalosconfig(into: TalosconfigFile, from: TalosconfigFile, o: {force: boolean; path: string}): {doc: TalosconfigFile; changed: boolean} {
  const contexts = {...into.contexts}
  const clashes: string[] = []
  for (const [name, context] of Object.entries(from.contexts ?? {})) {
    if (contexts[name] !== undefined && !isDeepStrictEqual(contexts[name], context)) clashes.push(`context "${name}"`)
    contexts[name] = context
  }
  if (clashes.length > 0 && !o.force)
    throw usage(
      `${o.path} already has a different ${clashes.join(', ')}: ichor does not overwrite it`,
      'pass --context-name NAME to add this talosconfig under another name, or --force to replace that context',
    )
  const doc = {...into, context: from.context, contexts}
  return {doc, changed: !isDeepStrictEqual(doc, into)}
}

/** Where the file goes and what it holds after the merge, or the refusal; nothing written yet. */
export function planCredentialWrite<T extends object>(
  what: 'kubeconfig' | 'talosconfig',
  text: string,
  target: CredentialTarget,
  merge: (into: T, from: T, o: {force: boolean; path: string}) => {doc: T; changed: boolean},
): {path: string; content: string; changed: boolean; merged: boolean} {
  const path = target.output ?? (what === 'kubeconfig' ? defaultKubeconfigPath() : defaultTalosconfigPath())
  const merged = target.merge || target.output === undefined
  const exists = existsSync(path)
  if (!merged) {
    if (exists && !target.force) throw usage(`PATH: ${path} already exists`, 'pass --force to replace it, or --merge to add these credentials to it')
    return {path, content: text, changed: !exists || readFileSync(path, 'utf8') !== text, merged: false}
  }
  const from = parseYaml(text) as T
  let into = {} as T
  if (exists) {
    try {
      into = (parseYaml(readFileSync(path, 'utf8')) ?? {}) as T
    } catch (error) {
      throw usage(`${path} is not a ${what} ichor can read (${(error as Error).message}); nothing was changed`)
    }
    if (typeof into !== 'object' || Array.isArray(into)) throw usage(`${path} is not a ${what} (a YAML mapping); nothing was changed`)
  }
  const {doc, changed} = merge(into, from, {force: target.force, path})
  return {path, content: stringify(doc), changed: changed || !exists, merged: true}
}

/** Writes it 0600, atomically; a folder ichor creates for it is 0700. */
export function writeCredentialFile(path: string, content: string): void {
  ensurePrivateDir(dirname(path), {createParents: true, loose: 'keep'})
  writePrivateFileAtomic(path, content)
}
