// The effective Cilium values (ichor defaults ⟶ user layer ⟶ owned values) without any
// check: what `cni status` and `cni values get --effective` compare and show. Apart from
// validate.ts, so those commands load neither the schema validator nor helm's runner.
import {readChartArchive, type ChartArchive} from '../chart/archive.js'
import {chartValuesYaml} from '../chart/values-yaml.js'
import {layeredValues} from '../values/merge.js'
import type {Values} from '../values/path.js'
import type {TunnelProtocol} from '../state/installation-types.js'
import {ciliumDefaults, ciliumOwnedValues, ownedCapabilitiesOf, type OwnedCapabilities} from './defaults.js'
import type {CiliumFacts} from './guards.js'
import {minorOf} from './versions.js'

/** What the effective values are made of; validate.ts's input adds what the checks need. */
export interface EffectiveInput {
  chartPath: string
  user: Values
  /**
   * upgradeCompatibility: the minor first installed (absent with a chart at hand: that
   * chart's minor, as at init). capabilities: derived from the chart at hand, else these.
   */
  facts: CiliumFacts & {tunnel: TunnelProtocol; upgradeCompatibility?: string; capabilities?: OwnedCapabilities}
}

/** The defaults and owned layers; a chart at hand gives upgradeCompatibility's default and the capabilities. */
export function ciliumLayers(input: EffectiveInput) {
  const chart = input.chartPath ? readChartArchive(input.chartPath) : undefined
  const {kubeProxy, tunnel} = input.facts
  const upgradeCompatibility = input.facts.upgradeCompatibility ?? (chart ? minorOf(chart.version) : undefined)
  const capabilities = chart ? ownedCapabilitiesOf(chartDefaultValues(chart)) : input.facts.capabilities
  return {defaults: ciliumDefaults({nodeCount: input.facts.nodeCount}), owned: ciliumOwnedValues({kubeProxy, tunnel, upgradeCompatibility, capabilities})}
}

const chartDefaults = new Map<string, Values>()

/** The chart's values.yaml (js-yaml shares aliased nodes, so a hostile file stays small here; only paths are read). */
export function chartDefaultValues(chart: ChartArchive): Values {
  let v = chartDefaults.get(chart.sha256)
  if (!v) {
    const loaded = chartValuesYaml(chart)
    v = loaded && typeof loaded === 'object' && !Array.isArray(loaded) ? (loaded as Values) : {}
    chartDefaults.set(chart.sha256, v)
  }
  return v
}

/** The effective values alone (defaults ⟶ user ⟶ owned), without any check. */
export function ciliumEffectiveValues(input: EffectiveInput): Values {
  return layeredValues(ciliumLayers(input), input.user)
}
