// `ichor cni values diff`: the effective values and the rendered manifest a change would
// apply, each against what the live release holds. Both are made by `unifiedDiff`
// (text/diff.ts) so they have the same shape.
import {stringify} from 'yaml'
import type {ReleaseRecord} from '../helm/release-record.js'
import type {Kube} from '../kube/client.js'
import {unifiedDiff} from '../text/diff.js'
import type {Values} from '../values/path.js'
import {prepareValuesChange, type ChangeSources} from './change.js'
import type {ValuesInput} from '../values/layer.js'
import {renderCiliumChart} from './validate.js'

export interface CniValuesDiff {
  /** Effective values: the release's against the proposed ones. Empty when equal. */
  values: string
  /** Rendered manifest: the release's against the proposed render. Empty when equal. */
  manifest: string
  changed: boolean
  revision?: number
  /** What validation said besides problems (an owned key at ichor's own value, the chart used). */
  notes: string[]
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
  return {values, manifest, changed: values !== '' || manifest !== '', revision: release?.revision, notes: change.notes}
}

/** helm stores the manifest as rendered, without the hooks and with a trailing newline trimmed. */
function normalizeManifest(text: string): string {
  return `${text.trim()}\n`
}
