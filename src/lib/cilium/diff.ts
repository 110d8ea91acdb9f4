// `ichor cni values diff`: the effective values and the rendered manifest a change would
// apply, each against what the live release holds. The unified diff is GNU diff's own
// (`diff -u`, from diffutils) on two temporary files; no diff algorithm is written here.
import {mkdtemp, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {execa} from 'execa'
import {stringify} from 'yaml'
import {IchorError} from '../errors/errors.js'
import type {ReleaseRecord} from '../helm/release.js'
import type {Kube} from '../kube/client.js'
import type {Values} from '../values/path.js'
import {prepareValuesChange, type ChangeSources, type ValuesInput} from './change.js'
import {renderCiliumChart} from './validate.js'

export interface CniValuesDiff {
  /** Effective values: the release's against the proposed ones. Empty when equal. */
  values: string
  /** Rendered manifest: the release's against the proposed render. Empty when equal. */
  manifest: string
  changed: boolean
  revision?: number
}

export async function unifiedDiff(before: string, after: string, labels: [string, string]): Promise<string> {
  if (before === after) return ''
  const dir = await mkdtemp(join(tmpdir(), 'ichor-diff-'))
  try {
    const [a, b] = [join(dir, 'a'), join(dir, 'b')]
    await Promise.all([writeFile(a, before, {mode: 0o600}), writeFile(b, after, {mode: 0o600})])
    const r = await execa('diff', ['-u', '--label', labels[0], '--label', labels[1], a, b], {reject: false})
    if (r.exitCode === 0) return ''
    if (r.exitCode !== 1) throw new IchorError(`diff failed: ${r.stderr || `exit ${r.exitCode}`}`, {hint: 'install GNU diffutils (the `diff` command)'})
    return r.stdout.endsWith('\n') ? r.stdout : `${r.stdout}\n`
  } finally {
    await rm(dir, {recursive: true, force: true})
  }
}

/** Red removals, green additions, cyan hunk headers (for a terminal). */
export function colourDiff(text: string): string {
  return text
    .split('\n')
    .map((l) => (l.startsWith('+++') || l.startsWith('---') ? `\u001B[1m${l}\u001B[0m` : l.startsWith('+') ? `\u001B[32m${l}\u001B[0m` : l.startsWith('-') ? `\u001B[31m${l}\u001B[0m` : l.startsWith('@@') ? `\u001B[36m${l}\u001B[0m` : l))
    .join('\n')
}

const yaml = (v: unknown) => stringify(v, {sortMapEntries: true})

/** The release's effective values against `effective`, as a unified diff of sorted YAML. */
export function effectiveValuesDiff(release: ReleaseRecord | undefined, effective: Values): Promise<string> {
  const label = release ? `release ${release.release} revision ${release.revision}` : 'no release'
  return unifiedDiff(release ? yaml(release.config) : '', yaml(effective), [`${label} (effective values)`, 'proposed (effective values)'])
}

export async function diffCiliumValues(kube: Kube, input: ValuesInput, sources: ChangeSources): Promise<CniValuesDiff> {
  const change = await prepareValuesChange(kube, input, sources)
  const release = change.context.release
  const rendered = await renderCiliumChart(change.chartPath, change.effective, kube.serverVersion?.replace(/^v/, '').split('+')[0], undefined, {noHooks: true})
  const label = release ? `release ${release.release} revision ${release.revision}` : 'no release'
  const [values, manifest] = await Promise.all([
    effectiveValuesDiff(release, change.effective),
    unifiedDiff(release ? normalizeManifest(release.manifest) : '', normalizeManifest(rendered), [`${label} (manifest)`, 'proposed (manifest)']),
  ])
  return {values, manifest, changed: values !== '' || manifest !== '', revision: release?.revision}
}

/** helm stores the manifest as rendered, without the hooks and with a trailing newline trimmed. */
function normalizeManifest(text: string): string {
  return `${text.trim()}\n`
}
