// `ichor cni values diff`: the effective values and the rendered manifest a change would
// apply, each against what the live release holds. Both are unified diffs from jsdiff (the
// `diff` package), made by the one function below so they have the same shape.
import {createTwoFilesPatch, FILE_HEADERS_ONLY} from 'diff'
import {stringify} from 'yaml'
import type {ReleaseRecord} from '../helm/release.js'
import type {Kube} from '../kube/client.js'
import {wantsColour} from '../log/colour.js'
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

/** `---`/`+++` labels, then hunks with three lines of context, as `diff -u` prints them; '' when equal. */
export function unifiedDiff(before: string, after: string, labels: [string, string]): string {
  if (before === after) return ''
  return createTwoFilesPatch(labels[0], labels[1], before, after, undefined, undefined, {context: 3, headerOptions: FILE_HEADERS_ONLY})
}

/** Red removals, green additions, cyan hunk headers, bold file labels (for a terminal). */
export function colourDiff(text: string): string {
  return text
    .split('\n')
    .map((l) =>
      l.startsWith('+++') || l.startsWith('---')
        ? `\u001B[1m${l}\u001B[0m`
        : l.startsWith('+')
          ? `\u001B[32m${l}\u001B[0m`
          : l.startsWith('-')
            ? `\u001B[31m${l}\u001B[0m`
            : l.startsWith('@@')
              ? `\u001B[36m${l}\u001B[0m`
              : l,
    )
    .join('\n')
}

/** The diff as it should reach `stream`: coloured when `wantsColour` (log/colour.ts), untouched otherwise; every diff printer uses it. */
export function paintDiff(text: string, stream: {isTTY?: boolean} = process.stdout, env: NodeJS.ProcessEnv = process.env): string {
  return wantsColour(stream, env) ? colourDiff(text) : text
}

const yaml = (v: unknown) => stringify(v, {sortMapEntries: true})

/** The release's effective values against `effective`, as a unified diff of sorted YAML. */
export function effectiveValuesDiff(release: ReleaseRecord | undefined, effective: Values): string {
  const label = release ? `release ${release.release} revision ${release.revision}` : 'no release'
  return unifiedDiff(release ? yaml(release.config) : '', yaml(effective), [`${label} (effective values)`, 'proposed (effective values)'])
}

export async function diffCiliumValues(kube: Kube, input: ValuesInput, sources: ChangeSources): Promise<CniValuesDiff> {
  const change = await prepareValuesChange(kube, input, sources)
  const release = change.context.release
  const rendered = await renderCiliumChart(change.chartPath, change.effective, kube.serverVersion?.replace(/^v/, '').split('+')[0], undefined, {noHooks: true})
  const label = release ? `release ${release.release} revision ${release.revision}` : 'no release'
  const values = effectiveValuesDiff(release, change.effective)
  const manifest = unifiedDiff(release ? normalizeManifest(release.manifest) : '', normalizeManifest(rendered), [`${label} (manifest)`, 'proposed (manifest)'])
  return {values, manifest, changed: values !== '' || manifest !== '', revision: release?.revision}
}

/** helm stores the manifest as rendered, without the hooks and with a trailing newline trimmed. */
function normalizeManifest(text: string): string {
  return `${text.trim()}\n`
}
