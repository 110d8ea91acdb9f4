// The one function every command uses to turn a user's Cilium values into effective
// values, or into a list of problems that each name a path. Nothing is applied here.
import {readChartArchive, type ChartArchive} from '../chart/archive.js'
import type {Issue} from '../errors/errors.js'
import {helmTemplate, HelmRenderError} from '../helm/template.js'
import {checkLayeredValues} from '../values/engine.js'
import type {Values} from '../values/path.js'
import {CILIUM_OWNED_KEYS} from './defaults.js'
import {CILIUM_RELEASE} from '../constants.js'
import {ciliumEffectiveValues, ciliumLayers, type EffectiveInput} from './effective.js'
import {checkCiliumGuards, type CiliumFacts} from './guards.js'

export interface CiliumValuesInput extends EffectiveInput {
  /** Kubernetes version the offline render targets. */
  kubeVersion?: string
  /**
   * Facts that arrive later (Talos's side, read over talosctl): the chart's own checks, which
   * do not need them, run meanwhile; the guards wait for them. A rejection fails the validation.
   */
  laterFacts?: Promise<Partial<CiliumFacts>>
}

export interface CiliumValuesReport {
  valid: boolean
  chart: {name: string; version: string; path: string}
  effective: Values
  /** The user layer to store: the given one without owned keys set to ichor's own value. */
  user: Values
  issues: Issue[]
  notes: string[]
  /** The notes among `notes` about owned keys the user set to ichor's own value. */
  ownedNotes: string[]
  /** The chart rendered with the effective values, when the render ran and passed. */
  rendered?: string
}

/** The chart's own checks (merge, owned keys, unknown keys, schema, size): no live fact needed. */
function checkChartValues(input: CiliumValuesInput, chart: ChartArchive) {
  return checkLayeredValues({chart, ...ciliumLayers(input), ownedKeys: CILIUM_OWNED_KEYS}, input.user)
}

/** Everything but the helm render: merge, owned keys, unknown keys, schema, size, guards. */
export function checkCiliumValues(input: CiliumValuesInput, chart: ChartArchive = readChartArchive(input.chartPath)) {
  const {effective, issues, user, notes} = checkChartValues(input, chart)
  const guards = checkCiliumGuards(effective, input.facts)
  return {chart, effective, user, issues: [...issues, ...guards.issues], notes: [...notes, ...guards.notes]}
}

/**
 * The API versions the render declares present beyond the built-in ones. monitoring.coreos.com/v1
 * is declared present, as the ADR amendment does, so a ServiceMonitor the user asks for renders;
 * but never for a cluster known not to serve it (a fresh cluster at init), so the render never
 * claims an API the cluster will not have.
 */
export function ciliumRenderApiVersions(facts: Pick<CiliumFacts, 'monitoringCrds'>): string[] {
  return facts.monitoringCrds === 'absent' ? [] : ['monitoring.coreos.com/v1']
}

/**
 * Full validation: the offline checks, then (only when they pass) one `helm template`
 * of the chart with the effective values so the chart's own validate templates refuse
 * at once (with the API versions of `ciliumRenderApiVersions`).
 */
export async function validateCiliumValues(input: CiliumValuesInput): Promise<CiliumValuesReport> {
  // The render is a separate helm process: start it at once on the effective values and
  // run the offline checks meanwhile (2 cores: about 250 ms less wall time). When a
  // check fails, the render is cancelled and its result never read.
  const effectiveValues = ciliumEffectiveValues(input)
  const abort = new AbortController()
  const render = renderCiliumChart(input.chartPath, effectiveValues, input.kubeVersion, abort.signal, {apiVersions: ciliumRenderApiVersions(input.facts)})
  render.catch(() => {}) // judged below, or abandoned
  const chart = readChartArchive(input.chartPath)
  const checked = checkChartValues(input, chart)
  let facts = input.facts
  try {
    if (input.laterFacts) facts = {...facts, ...(await input.laterFacts)}
  } catch (error) {
    abort.abort()
    throw error
  }
  const guards = checkCiliumGuards(checked.effective, facts)
  const {effective} = checked
  const issues = [...checked.issues, ...guards.issues]
  const notes = [...checked.notes, ...guards.notes]
  const report: CiliumValuesReport = {
    valid: false,
    chart: {name: chart.name, version: chart.version, path: input.chartPath},
    effective,
    user: checked.user,
    issues,
    notes,
    ownedNotes: checked.notes,
  }
  if (issues.length > 0) {
    abort.abort()
    return report
  }
  try {
    report.rendered = await render
  } catch (error) {
    if (!(error instanceof HelmRenderError)) throw error
    report.issues.push(renderIssue(error.helmMessage))
    return report
  }
  report.valid = true
  return report
}

export function renderCiliumChart(
  chartPath: string,
  effective: Values,
  kubeVersion?: string,
  signal?: AbortSignal,
  options: {noHooks?: boolean; apiVersions?: string[]} = {},
): Promise<string> {
  return helmTemplate({
    signal,
    noHooks: options.noHooks,
    chartPath,
    releaseName: CILIUM_RELEASE.name,
    namespace: CILIUM_RELEASE.namespace,
    values: effective,
    kubeVersion,
    apiVersions: options.apiVersions ?? ['monitoring.coreos.com/v1'],
  })
}

/** Names the chart template that refused, e.g. "chart cilium/templates/validate.yaml:162". */
function renderIssue(message: string): Issue {
  const at = /execution error at \(([^)]+?):(\d+):\d+\):\s*([\s\S]*)/.exec(message)
  if (at) return {path: `(chart ${at[1]}:${at[2]})`, message: at[3]!.trim()}
  const schema = /don't meet the specifications of the schema[\s\S]*?- at '([^']*)':\s*(.*)/.exec(message)
  if (schema) return {path: schema[1]!.split('/').filter(Boolean).join('.') || '(values)', message: `${schema[2]} (chart schema, from helm)`}
  return {path: '(chart render)', message}
}
