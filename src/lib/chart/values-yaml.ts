// A chart's values.yaml parsed once per chart digest: the effective values (its defaults) and
// the known-keys tree both read it, and parsing Cilium's 160 KB twice was a tenth of a cold
// `cni values validate` (issue 25). js-yaml: only the structure is read, and it shares an
// aliased node instead of copying it (the readers bound their walks).
import jsyaml from 'js-yaml'
import type {ChartArchive} from './archive.js'

const parsed = new Map<string, unknown>()

/** What js-yaml loads from the chart's values.yaml (undefined when the chart has none or it is empty). Read only. */
export function chartValuesYaml(chart: ChartArchive): unknown {
  if (!parsed.has(chart.sha256)) parsed.set(chart.sha256, jsyaml.load(chart.files.get('values.yaml')?.toString('utf8') ?? ''))
  return parsed.get(chart.sha256)
}
