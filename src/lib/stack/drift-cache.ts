// What the drift check (drift.ts) keeps between runs, in $XDG_CACHE_HOME/ichor/drift
// (ICHOR_DRIFT_CACHE=off disables it):
//
// - Verdicts. A server-side dry-run apply is a function of the live object and the body
//   applied. The live object is named by its uid and resourceVersion (every write moves it);
//   the body by the sha256 of the bundle's object (the tracking marks copied into it come
//   from the live object); and what else the server's answer depends on: its version, its
//   admission configuration and the kind's CRD (drift.ts `verdictBasis`). While all are the same, "a sync changes nothing" stays true and
//   is not asked again: the dry run of Argo CD's applicationsets CRD alone costs the API
//   server about a second. Only that verdict is kept (a drifted object is checked every time,
//   so the fields it names are current), never one for a Secret.
// - Bundle indexes. A bundle is addressed by its digest, so its contents never change: the
//   reference and hash of each object it declares, so a warm check neither pulls nor parses
//   it (1.9 MB of YAML for Argo CD).
//
// The entries hold references, uids, versions and hashes, never an object's content. The
// folder is 0700 and its files 0600 like every other cache; a cache that cannot be read or
// written only makes the check slower.
import {createHash} from 'node:crypto'
import {readdirSync, readFileSync, rmSync, statSync} from 'node:fs'
import {join} from 'node:path'
import {cacheHome} from '../assets/lock.js'
import {ensurePrivateDir, writePrivateFileAtomic} from '../fs/private-files.js'
import type {KubeObject} from '../kube/objects.js'

/** One object a bundle declares, as the index keeps it. */
export interface IndexedObject {
  apiVersion: string
  kind: string
  name: string
  namespace?: string
  /** sha256 of the object as the bundle declares it ('' for a Secret). */
  hash: string
}

export interface DriftCache {
  bundleIndex(digest: string): IndexedObject[] | undefined
  writeBundleIndex(digest: string, objects: IndexedObject[]): void
  /**
   * Whether a dry run of the object with this hash against this live version, on a server in
   * this state (`basis`: its version, admission, the kind's CRD; drift.ts), was found to change nothing.
   */
  unchanged(uid: string, resourceVersion: string, hash: string, basis: string): boolean
  recordUnchanged(uid: string, resourceVersion: string, hash: string, basis: string): void
  /** Writes the verdicts of this run (only those: entries of objects no longer checked fall away). */
  save(): void
}

/** Files of each kind kept, the newest: bundle indexes (a few per component and cluster), verdicts (one per component and cluster). */
const KEPT_FILES = 32

export function driftCacheDir(): string {
  return join(cacheHome(), 'ichor', 'drift')
}

/** A Secret is indexed without a hash: its verdict is never kept, and nothing derived from its data is written. */
export function indexedObject(object: KubeObject): IndexedObject {
  const {apiVersion, kind, metadata} = object
  return {
    apiVersion,
    kind,
    name: metadata.name,
    ...(metadata.namespace ? {namespace: metadata.namespace} : {}),
    hash: kind === 'Secret' ? '' : objectHash(object),
  }
}

export function objectHash(object: KubeObject): string {
  return createHash('sha256').update(JSON.stringify(object)).digest('hex')
}

/** The cache of one component's objects on one cluster (by API server URL); undefined when off. */
export function driftCache(server: string, component: string): DriftCache | undefined {
  if (process.env.ICHOR_DRIFT_CACHE === 'off') return undefined
  const dir = driftCacheDir()
  const verdictsFile = join(dir, `verdicts-v1-${createHash('sha256').update(`${server}\0${component}`).digest('hex').slice(0, 32)}.json`)
  // v1: the index format and objectHash; another ichor that hashes differently uses other files.
  const indexFile = (digest: string) => join(dir, `bundle-v1-${digest.replace(/^sha256:/, '')}.json`)
  const usable = (): boolean => {
    try {
      ensurePrivateDir(dir, {createParents: true, loose: 'fix'})
      return true
    } catch {
      return false
    }
  }
  const read = <T>(file: string): T | undefined => {
    try {
      return JSON.parse(readFileSync(file, 'utf8')) as T
    } catch {
      return undefined
    }
  }
  const write = (file: string, value: unknown): void => {
    try {
      if (usable()) writePrivateFileAtomic(file, JSON.stringify(value))
    } catch {
      // only slower next time
    }
  }
  const known = new Map(Object.entries(read<Record<string, string>>(verdictsFile) ?? {}))
  const seen = new Map<string, string>()
  const key = (resourceVersion: string, hash: string, basis: string) => `${resourceVersion}/${hash}/${basis}`
  return {
    bundleIndex(digest) {
      if (!/^sha256:[0-9a-f]{64}$/.test(digest)) return undefined
      const index = read<{objects?: IndexedObject[]}>(indexFile(digest))
      return Array.isArray(index?.objects) && index.objects.every(isIndexedObject) ? index.objects : undefined
    },
    writeBundleIndex(digest, objects) {
      if (!/^sha256:[0-9a-f]{64}$/.test(digest)) return
      write(indexFile(digest), {objects})
      prune(dir, 'bundle-')
    },
    unchanged(uid, resourceVersion, hash, basis) {
      const hit = known.get(uid) === key(resourceVersion, hash, basis)
      if (hit) seen.set(uid, key(resourceVersion, hash, basis))
      return hit
    },
    recordUnchanged(uid, resourceVersion, hash, basis) {
      seen.set(uid, key(resourceVersion, hash, basis))
    },
    save() {
      const next = Object.fromEntries(seen)
      if (JSON.stringify(next) !== JSON.stringify(Object.fromEntries(known))) {
        write(verdictsFile, next)
        prune(dir, 'verdicts-')
      }
    },
  }
}

function isIndexedObject(x: unknown): x is IndexedObject {
  const o = x as Partial<IndexedObject> | null
  return (
    typeof o === 'object' &&
    o !== null &&
    typeof o.apiVersion === 'string' &&
    typeof o.kind === 'string' &&
    typeof o.name === 'string' &&
    (o.namespace === undefined || typeof o.namespace === 'string') &&
    typeof o.hash === 'string'
  )
}

/** Keeps the newest KEPT_FILES files whose names start with `prefix` (clusters come and go: test clusters, rebuilt ones). */
function prune(dir: string, prefix: string): void {
  try {
    const files = readdirSync(dir)
      .filter((n) => n.startsWith(prefix))
      .map((n) => ({path: join(dir, n), at: statSync(join(dir, n)).mtimeMs}))
    for (const old of files.sort((a, b) => b.at - a.at).slice(KEPT_FILES)) rmSync(old.path, {force: true})
  } catch {
    // another run pruned at the same time
  }
}
