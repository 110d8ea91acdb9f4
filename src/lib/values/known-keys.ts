// Which keys a chart knows, to refuse typos that the schema lets through (Cilium's
// schema has no additionalProperties). Three sources, read once per chart:
//  1. the values.yaml tree;
//  2. options documented but commented out in values.yaml (`# mode: snat` under
//     `loadBalancer:`) — real options, not typos;
//  3. every `.Values.a.b.c` the templates read.
// A map whose default is `{}`, or whose name says it is free-form (annotations,
// labels, nodeSelector, extraArgs, ...), accepts any key below it.
import type {ChartArchive} from '../chart/archive.js'
import {chartValuesYaml} from '../chart/values-yaml.js'
import {IchorError} from '../errors/errors.js'
import {isMap} from './path.js'
import {EXIT} from '../errors/exit-codes.js'

export interface KeyNode {
  children: Map<string, KeyNode>
  /** Any key below is accepted. */
  freeForm: boolean
  /** The chart's default here is a list or scalar (user maps below it are not checked further unless templates name children). */
  leaf: boolean
}

/** Names whose contents are Kubernetes maps or user-chosen keys. */
const FREE_FORM_NAMES = new Set([
  'annotations',
  'labels',
  'podAnnotations',
  'podLabels',
  'nodeSelector',
  'extraArgs',
  'extraEnv',
  'extraConfig',
  'tolerations',
  'affinity',
  'resources',
  'extraVolumes',
  'extraVolumeMounts',
  'extraContainers',
  'extraInitContainers',
  'env',
  'envFrom',
  'podSecurityContext',
  'topologySpreadConstraints',
  'extraHostPathMounts',
  'config',
  'customConfig',
  'commonLabels',
  'commonAnnotations',
  'deploymentAnnotations',
  'serviceAnnotations',
  'matchLabels',
  'certManagerIssuerRef',
])
const FREE_FORM_SUFFIX = /(Annotations|Labels|Selector|Env|ExtraArgs)$/

function isFreeFormName(name: string): boolean {
  return FREE_FORM_NAMES.has(name) || FREE_FORM_SUFFIX.test(name)
}

function newNode(): KeyNode {
  return {children: new Map(), freeForm: false, leaf: false}
}

function child(node: KeyNode, key: string): KeyNode {
  let c = node.children.get(key)
  if (!c) {
    c = newNode()
    if (isFreeFormName(key)) c.freeForm = true
    node.children.set(key, c)
  }
  return c
}

const cache = new Map<string, KeyNode>()

export function knownKeys(chart: ChartArchive): KeyNode {
  const hit = cache.get(chart.sha256)
  if (hit) return hit
  const root = newNode()
  const valuesYaml = chart.files.get('values.yaml')?.toString('utf8') ?? ''
  // js-yaml: only the structure is needed here, and it parses Cilium's 170 KB values.yaml several times faster
  // js-yaml shares an aliased node instead of copying it, so a "billion laughs" values.yaml parses
  // small and would explode only in this walk: it is bounded.
  addTree(root, chartValuesYaml(chart) ?? {}, {left: MAX_VALUES_YAML_NODES, chart})
  addCommentedKeys(root, valuesYaml)
  for (const [name, data] of chart.files) {
    if (name.startsWith('templates/')) addTemplateRefs(root, data.toString('utf8'))
  }
  cache.set(chart.sha256, root)
  return root
}

/** Cilium's values.yaml holds about 2,000 nodes; a chart with a hundred times that is hostile. */
const MAX_VALUES_YAML_NODES = 200_000

function addTree(node: KeyNode, value: unknown, budget: {left: number; chart: ChartArchive}): void {
  if (--budget.left < 0) {
    throw new IchorError(
      `${budget.chart.path}: the chart's values.yaml expands to more than ${MAX_VALUES_YAML_NODES} values (aliases nested like a "billion laughs"?); not a chart ichor can read`,
      {exitCode: EXIT.usage},
    )
  }
  if (!isMap(value)) {
    node.leaf = true
    return
  }
  if (Object.keys(value).length === 0) node.freeForm = true
  for (const [k, v] of Object.entries(value)) addTree(child(node, k), v, budget)
}

/**
 * A commented line `# key: value` at an indentation belongs to the nearest real key
 * above it with less indentation. Helm-docs prose starts with `# --` or `# @` and is
 * skipped; lines that read like prose (spaces in the key) never match.
 */
function addCommentedKeys(root: KeyNode, text: string): void {
  const stack: {indent: number; node: KeyNode}[] = [{indent: -1, node: root}]
  for (const line of text.split('\n')) {
    const real = /^(\s*)([A-Za-z0-9_./-]+):(\s|$)/.exec(line)
    const commented = /^(\s*)#\s?(\s*)([A-Za-z][A-Za-z0-9_]*):(\s+\S.*|\s*)$/.exec(line)
    if (real) {
      const indent = real[1]!.length
      while (stack.length > 1 && stack[stack.length - 1]!.indent >= indent) stack.pop()
      const node = child(stack[stack.length - 1]!.node, real[2]!)
      stack.push({indent, node})
    } else if (commented && !/^\s*#\s*(--|@)/.test(line)) {
      const indent = commented[1]!.length + commented[2]!.length
      const parents = stack.filter((s) => s.indent < indent)
      const parent = parents[parents.length - 1]!
      const existing = parent.node.children.get(commented[3]!)
      if (!existing) child(parent.node, commented[3]!).leaf = true
    }
  }
}

function addTemplateRefs(root: KeyNode, text: string): void {
  const nodeAt = (dotted: string) =>
    dotted
      .slice(1)
      .split('.')
      .reduce((node, key) => child(node, key), root)
  for (const match of text.matchAll(/\$?\.Values((?:\.[A-Za-z0-9_]+)+)/g)) nodeAt(match[1]!)
  // A value the chart hands on whole (`toYaml .Values.x`, or `with .Values.x` then
  // `toYaml .`) is a Kubernetes structure: any of its fields is real, not a typo.
  for (const match of text.matchAll(/(?:toYaml|toJson)\s+\$?\.Values((?:\.[A-Za-z0-9_]+)+)|\$?\.Values((?:\.[A-Za-z0-9_]+)+)\s*\|\s*(?:toYaml|toJson)/g)) {
    nodeAt(match[1] ?? match[2]!).freeForm = true
  }
  for (const match of text.matchAll(/\{\{-?\s*with\s+\$?\.Values((?:\.[A-Za-z0-9_]+)+)\s*-?\}\}([\s\S]*?)\{\{-?\s*end\b/g)) {
    if (/(?:toYaml|toJson)\s+\.(?![\w.])/.test(match[2]!)) nodeAt(match[1]!).freeForm = true
  }
  // A map the chart walks key by key (`range $k, $v := .Values.x`) or hands on but for a few
  // keys (`omit .Values.x "create"`): argo-cd's configs.cm and configs.params become the
  // ConfigMaps' data this way, so any key there is one its component reads (dex.config, url).
  for (const match of text.matchAll(/range\s+\$\w+\s*,\s*\$\w+\s*:=\s*\$?\.Values((?:\.[A-Za-z0-9_]+)+)|omit\s+\(?\s*\$?\.Values((?:\.[A-Za-z0-9_]+)+)/g)) {
    nodeAt(match[1] ?? match[2]!).freeForm = true
  }
  // `index .Values "a" "b"` reads keys that hold characters Go templates cannot dot into
  for (const match of text.matchAll(/index\s+\$?\.Values((?:\s+"[^"]+")+)/g)) {
    let node = root
    for (const key of [...match[1]!.matchAll(/"([^"]+)"/g)].map((m) => m[1]!)) node = child(node, key)
  }
}

/** Sibling keys close to `key` (a typo's likely intent), best first. */
export function suggestKeys(node: KeyNode, key: string, max = 3): string[] {
  const lower = key.toLowerCase()
  return [...node.children.keys()]
    .map((k) => ({k, d: k.toLowerCase() === lower ? 0 : editDistance(k.toLowerCase(), lower)}))
    .filter(({k, d}) => d <= Math.max(1, Math.min(3, Math.floor(key.length / 3))) && k !== key)
    .sort((a, b) => a.d - b.d || a.k.localeCompare(b.k))
    .slice(0, max)
    .map(({k}) => k)
}

function editDistance(a: string, b: string): number {
  const prev = Array.from({length: b.length + 1}, (_, i) => i)
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0]!
    prev[0] = i
    for (let j = 1; j <= b.length; j++) {
      const tmp = prev[j]!
      prev[j] = Math.min(prev[j]! + 1, prev[j - 1]! + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1))
      diag = tmp
    }
  }
  return prev[b.length]!
}
