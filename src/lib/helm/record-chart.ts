// The chart a release runs, taken back out of its Helm record. Helm stores the whole chart in
// each release record (pkg/release/release.go Release.Chart; pkg/chart/chart.go Chart: metadata,
// templates, values, schema and the other files, each file's bytes base64 in the JSON), so a
// laptop that has not got that chart version can still change the release's values with the
// very templates it runs. What the record does not keep: values.yaml's comments (the values
// are a parsed map) and subcharts (Chart's dependencies are not serialised): a chart with
// dependencies is refused.
import {join} from 'node:path'
import {IchorError} from '../errors/errors.js'
import {openPrivateTempDir, writePrivateFileAtomic} from '../fs/private-files.js'
import type {Kube} from '../kube/client.js'
import {buildBundle} from '../oci/bundle.js'
import {toYaml} from '../yaml/emit.js'
import {releaseRecordJson, type ReleaseSecret} from './release-record.js'

interface ChartFile {
  name: string
  /** base64 */
  data: string
}

interface RecordChart {
  metadata?: {name?: string; version?: string; dependencies?: unknown[]} & Record<string, unknown>
  templates?: ChartFile[] | null
  values?: Record<string, unknown> | null
  /** base64 of values.schema.json */
  schema?: string | null
  files?: ChartFile[] | null
}

/** The chart of the record in Secret `secretName`, rebuilt as a .tgz in a private folder removed at exit; its path. */
export async function chartFromReleaseRecord(kube: Kube, namespace: string, secretName: string): Promise<{path: string; name: string; version: string}> {
  const secret = await kube.request<ReleaseSecret>('GET', `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets/${encodeURIComponent(secretName)}`)
  const chart = (JSON.parse(releaseRecordJson(secret)) as {chart?: RecordChart}).chart
  const name = chart?.metadata?.name
  const version = chart?.metadata?.version
  if (!chart || !name || !version) throw new IchorError(`Helm release Secret ${namespace}/${secretName} holds no chart`)
  if ((chart.metadata?.dependencies ?? []).length > 0) {
    throw new IchorError(`the chart ${name} ${version} in ${namespace}/${secretName} has subcharts, which a Helm record does not keep`, {
      hint: 'pass the chart file with --cilium-chart',
    })
  }
  const files = [
    {path: `${name}/Chart.yaml`, content: toYaml(chart.metadata, {sortKeys: false})},
    {path: `${name}/values.yaml`, content: toYaml(chart.values ?? {}, {sortKeys: false})},
    ...(chart.schema ? [{path: `${name}/values.schema.json`, content: Buffer.from(chart.schema, 'base64')}] : []),
    ...[...(chart.templates ?? []), ...(chart.files ?? [])].map((f) => ({path: `${name}/${f.name}`, content: Buffer.from(f.data, 'base64')})),
  ]
  const dir = openPrivateTempDir('ichor-record-chart-').dir
  const path = join(dir, `${name}-${version}.tgz`)
  writePrivateFileAtomic(path, buildBundle(files).layer)
  return {path, name, version}
}
