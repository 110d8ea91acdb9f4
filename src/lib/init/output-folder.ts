// The offline dry run's output folder holds this run's files only. ichor lists what it wrote
// in the folder (OUTPUT_MANIFEST); the next run removes what that list names and the run no
// longer writes (a removed node's talos/nodes/<node>.yaml), and never touches anything else:
// an operator's own files stay and are named. A folder that already holds other things and
// no list is refused before a byte is written, as is overwriting a file ichor did not write.
import {existsSync, lstatSync, readdirSync, readFileSync, realpathSync, rmdirSync, statSync, unlinkSync} from 'node:fs'
import {dirname, isAbsolute, join, normalize, sep} from 'node:path'
import {IchorError} from '../errors/errors.js'
import {EXIT} from '../errors/exit-codes.js'
import {ensurePrivateDir, writePrivateFileAtomic} from '../fs/private-files.js'

/** The list of the files ichor wrote into the folder, one relative path a line. */
export const OUTPUT_MANIFEST = '.ichor-dry-run'

/** What an ichor dry run writes at the top of its folder: an older ichor wrote no list, but only these. */
const OWN_TOP_LEVEL = new Set(['plan.txt', 'secrets.txt', 'redacted.txt', 'talos', 'cilium', 'bundles', 'orders', 'stack'])

export interface OutputFolderResult {
  /** Files an earlier run wrote and this one does not: removed. */
  removed: string[]
  /** What ichor did not write (a folder as `name/`): left as it is. */
  foreign: string[]
}

/** The folder as found, before this run writes: checked, and what an earlier run listed. */
export interface OutputFolder {
  dir: string
  previous: Set<string>
  /** An earlier run's list was found. */
  listed: boolean
}

/**
 * Reads the folder before anything is written. Refused (exit 2): a folder holding entries an
 * ichor dry run never writes and no list of an earlier run (a project folder, a home folder).
 */
export function openOutputFolder(dir: string): OutputFolder {
  const previous = readManifest(dir)
  if (previous === undefined && existsSync(dir) && statSync(dir).isDirectory()) {
    const others = readdirSync(dir).filter((name) => !OWN_TOP_LEVEL.has(name))
    if (others.length > 0) {
      throw new IchorError(
        `--output-dir: ${dir} holds ${listed(others)}, which ichor did not write, and no ${OUTPUT_MANIFEST} of an earlier dry run: nothing was written`,
        {exitCode: EXIT.usage, hint: 'give a new or empty folder, or the folder an earlier dry run wrote'},
      )
    }
  }
  return {dir, previous: previous ?? new Set(), listed: previous !== undefined}
}

/** What is in the folder that neither this run nor the earlier one wrote: said, left as it is. */
export function foreignEntries(folder: OutputFolder, written: readonly string[]): string[] {
  const known = new Set([...written, ...folder.previous, OUTPUT_MANIFEST])
  const knownDirs = new Set([...known].flatMap(parentsOf))
  const out: string[] = []
  const walk = (rel: string) => {
    const abs = rel ? join(folder.dir, rel) : folder.dir
    if (!existsSync(abs)) return
    for (const e of readdirSync(abs, {withFileTypes: true}).sort((a, b) => a.name.localeCompare(b.name))) {
      const path = rel ? `${rel}/${e.name}` : e.name
      // A folder ichor never wrote into is named once, not walked (a .git of thousands of files).
      if (!e.isDirectory()) {
        if (!known.has(path)) out.push(path)
      } else if (knownDirs.has(path)) walk(path)
      else out.push(`${path}/`)
    }
  }
  walk('')
  return out
}

/**
 * Writes the files (0600; the folders ichor makes 0700), removes what the earlier run listed
 * and this one does not write, and lists this run's files. A file this run would overwrite
 * that an earlier run did not write is refused first (exit 2), naming it.
 */
export function writeOutputFolder(folder: OutputFolder, files: readonly {rel: string; content: string | Buffer}[]): OutputFolderResult {
  const {dir, previous} = folder
  const theirs = folder.listed ? files.filter((f) => !previous.has(f.rel) && existsSync(join(dir, f.rel))).map((f) => f.rel) : []
  if (theirs.length > 0) {
    throw new IchorError(`--output-dir: ${listed(theirs)} in ${dir} ${theirs.length === 1 ? 'was' : 'were'} not written by ichor: nothing was written`, {
      exitCode: EXIT.usage,
      hint: 'move them out of the folder, or give another --output-dir',
    })
  }
  ensurePrivateDir(dir, {label: '--output-dir', createParents: true, loose: 'keep'})
  const now = new Set(files.map((f) => f.rel))
  // Listed before they are written: a run stopped halfway leaves no file of ichor's unlisted.
  writeManifest(dir, new Set([...previous, ...now]))
  for (const {rel, content} of files) {
    // Folders ichor makes are 0700 (an earlier run's too); one owned by someone else is refused.
    for (const sub of parentsOf(rel)) ensurePrivateDir(join(dir, sub), {label: '--output-dir', loose: 'fix'})
    writePrivateFileAtomic(join(dir, rel), content)
  }
  const removed = [...previous].filter((rel) => !now.has(rel) && removeOwnFile(dir, rel)).sort()
  writeManifest(dir, now)
  return {removed, foreign: foreignEntries(folder, [...now])}
}

function writeManifest(dir: string, files: Set<string>): void {
  writePrivateFileAtomic(
    join(dir, OUTPUT_MANIFEST),
    `# The files ichor init --dry-run wrote here; the next dry run into this folder removes those it does not write again.\n${[...files].join('\n')}\n`,
  )
}

/** The earlier run's list, each entry a plain relative path inside the folder; undefined when there is none. */
function readManifest(dir: string): Set<string> | undefined {
  const path = join(dir, OUTPUT_MANIFEST)
  if (!existsSync(path) || !lstatSync(path).isFile()) return undefined
  const entries = readFileSync(path, 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
  // A hand-edited list never reaches outside the folder.
  return new Set(entries.filter((rel) => !isAbsolute(rel) && normalize(rel) === rel && !rel.split(/[\\/]/).includes('..') && rel !== OUTPUT_MANIFEST))
}

/** Removes a file an earlier run wrote, if it is still a plain file inside the folder, and the folders it leaves empty. */
function removeOwnFile(dir: string, rel: string): boolean {
  const path = join(dir, rel)
  if (!existsSync(path) || !lstatSync(path).isFile()) return false
  // Through a folder replaced by a link, the path would lead out of the output folder.
  if (!`${realpathSync(dirname(path))}${sep}`.startsWith(`${realpathSync(dir)}${sep}`)) return false
  unlinkSync(path)
  for (const sub of parentsOf(rel).reverse()) {
    const abs = join(dir, sub)
    if (readdirSync(abs).length > 0) break
    rmdirSync(abs)
  }
  return true
}

/** `a`, `a/b` for `a/b/c.yaml`. */
function parentsOf(rel: string): string[] {
  const out: string[] = []
  for (let sub = dirname(rel); sub !== '.' && sub !== '/'; sub = dirname(sub)) out.unshift(sub)
  return out
}

function listed(names: readonly string[]): string {
  const shown = names.slice(0, 5).join(', ')
  return names.length > 5 ? `${shown} and ${names.length - 5} more` : shown
}
