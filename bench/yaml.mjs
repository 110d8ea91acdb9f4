// YAML numbers on the largest YAML ichor reads and writes: the Argo CD render (parse of
// `helm template`'s output, emit of its objects as a bundle) and Cilium's values.yaml
// (parsed once per process for its known keys), per library. This is the benchmark behind
// the choice of libraries (see yaml/emit.ts and stack/objects.ts).
import {join} from 'node:path'
import {fmtMB, fmtMs, median} from './lib.mjs'

const RUNS = 7

function time(fn) {
  const times = []
  let out
  for (let i = 0; i < RUNS; i++) {
    globalThis.gc?.()
    const t = performance.now()
    out = fn()
    times.push(performance.now() - t)
  }
  return {out, times}
}

function report(what, {times}) {
  const warm = times.slice(1)
  console.log(`${what}: median ${fmtMs(median(warm))} warm (${warm.length} runs), first ${fmtMs(times[0])}`)
}

export async function run(ctx) {
  const d = (p) => import(join(ctx.root, 'dist', 'lib', ...p.split('/')))
  const {helmTemplate} = await d('helm/template.js')
  const {ARGOCD_RELEASE, ARGOCD_NAMESPACE} = await d('stack/argocd.js')
  const {argocdEffectiveValues} = await d('stack/prepare.js')
  const {parseObjects, serializeObjects} = await d('stack/objects.js')
  const {readChartArchive} = await d('chart/archive.js')
  const yaml = await import('yaml')
  const jsyaml = await import('js-yaml')

  const chartPath = join(ctx.upstream, 'charts', 'argo-cd-10.1.1.tgz')
  const text = await helmTemplate({
    chartPath,
    releaseName: ARGOCD_RELEASE,
    namespace: ARGOCD_NAMESPACE,
    values: argocdEffectiveValues(chartPath, {}),
    includeCrds: true,
  })
  const objects = parseObjects(text, 'Argo CD render')
  console.log(`input: Argo CD 10.1.1 render, ${fmtMB(Buffer.byteLength(text))}, ${objects.length} objects`)
  report(
    'parse  js-yaml loadAll, core schema (parseObjects)',
    time(() => parseObjects(text, 'bench')),
  )
  report(
    'parse  yaml parseAllDocuments + toJS, YAML 1.2 core',
    time(() => yaml.parseAllDocuments(text).map((doc) => doc.toJS())),
  )
  report(
    'parse  yaml parseAllDocuments + toJS, YAML 1.1',
    time(() => yaml.parseAllDocuments(text, {version: '1.1'}).map((doc) => doc.toJS())),
  )
  const bundle = time(() => serializeObjects(objects))
  report(`emit   js-yaml dump, sorted keys, no folding, no refs (serializeObjects, ${fmtMB(Buffer.byteLength(bundle.out))})`, bundle)
  const yamlOptions = {sortMapEntries: true, lineWidth: 0, aliasDuplicateObjects: false, compat: 'yaml-1.1'}
  report(
    'emit   yaml stringify, the same options',
    time(() => objects.map((o) => `---\n${yaml.stringify(o, yamlOptions)}`).join('')),
  )

  const values = readChartArchive(join(ctx.upstream, 'charts', 'cilium-1.18.0.tgz'))
    .files.get('values.yaml')
    .toString('utf8')
  console.log(`input: Cilium 1.18.0 values.yaml, ${(Buffer.byteLength(values) / 1024).toFixed(0)} KB`)
  report(
    'parse  js-yaml load (knownKeys)',
    time(() => jsyaml.load(values)),
  )
  report(
    'parse  yaml parse, YAML 1.2 core',
    time(() => yaml.parse(values)),
  )
}
