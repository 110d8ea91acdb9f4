// Stack numbers: Argo CD render + bundle (the helm subprocess timed apart), bundle
// sizes, and push time to a real local registry (the test harness's docker-registry).
import {join} from 'node:path'
import {fmtMs, median} from './lib.mjs'

export async function run(ctx) {
  const d = (p) => import(join(ctx.root, 'dist', 'lib', ...p.split('/')))
  const {helmTemplate} = await d('helm/template.js')
  const {postProcessArgoCd, ARGOCD_RELEASE, ARGOCD_NAMESPACE} = await d('stack/argocd.js')
  const {assembleComponent} = await d('stack/component.js')
  const {repoCredsSecret, defaultAppProject} = await d('stack/orders.js')
  const {buildBundle, bundleTag} = await d('oci/bundle.js')
  const {buildArtifact} = await d('oci/artifact.js')
  const {argocdEffectiveValues, prepareStack, generateStackSecrets} = await d('stack/prepare.js')
  const {readChartArchive} = await d('chart/archive.js')
  const chartPath = join(ctx.upstream, 'charts', 'argo-cd-10.1.1.tgz')
  const chart = readChartArchive(chartPath)
  const values = argocdEffectiveValues(chartPath, {})
  const generated = generateStackSecrets()

  const helmTimes = []
  const inProcess = []
  let bundle
  let rendered
  for (let i = 0; i < 6; i++) {
    let t = performance.now()
    const text = await helmTemplate({chartPath, releaseName: ARGOCD_RELEASE, namespace: ARGOCD_NAMESPACE, values, includeCrds: true})
    helmTimes.push(performance.now() - t)
    t = performance.now()
    const argo = postProcessArgoCd(text, chart, generated.argocdRedisPassword)
    rendered = assembleComponent('argocd', argo.version, [
      ...argo.objects,
      repoCredsSecret('oci://kokumi-registry.kokumi.svc.cluster.local:5000'),
      defaultAppProject(),
    ])
    bundle = buildBundle([{path: 'manifest.yaml', content: rendered.manifest}])
    buildArtifact({layer: bundle.layer, layerDigest: bundle.layerDigest, annotations: {source: 'x', version: bundleTag(argo.version, rendered.manifest)}})
    inProcess.push(performance.now() - t)
  }
  const warm = inProcess.slice(1)
  console.log(
    `Argo CD render + bundle, in-process part (parse, drop, split, serialise, tar, gzip, manifest), warm (5 runs): median ${fmtMs(median(warm))}, first ${fmtMs(inProcess[0])}   goal <= 500 ms`,
  )
  console.log(`Argo CD helm template subprocess (6 runs): median ${fmtMs(median(helmTimes))}`)

  const stack = await prepareStack({argocdChartPath: chartPath, kokumiManifestPath: join(ctx.upstream, 'kokumi-0.14.0', 'install.yaml'), generated})
  for (const c of Object.values(stack.components)) {
    console.log(
      `bundle ${c.component} ${c.bundle.tag}: manifest.yaml ${(Buffer.byteLength(c.rendered.manifest) / 1024 / 1024).toFixed(2)} MB raw, layer ${(c.bundle.layer.length / 1024).toFixed(1)} KB gzipped (${c.rendered.objects.length} objects + ${c.rendered.policies.length} policies)`,
    )
  }

  const {startRegistry} = await import(join(ctx.root, 'test', 'harness', 'registry.ts'))
  const registry = await startRegistry()
  try {
    const {OciClient} = await d('oci/client.js')
    const {publishBundle} = await d('oci/publish.js')
    const client = new OciClient(registry.endpoint)
    for (const c of Object.values(stack.components)) {
      const input = {
        repository: `ichor/${c.component}`,
        tag: c.bundle.tag,
        layer: c.bundle.layer,
        layerDigest: c.bundle.layerDigest,
        annotations: {source: `oci://${c.bundle.repository}`, version: c.bundle.tag},
      }
      let t = performance.now()
      const first = await publishBundle(client, input)
      const firstMs = performance.now() - t
      t = performance.now()
      const again = await publishBundle(client, input)
      const againMs = performance.now() - t
      console.log(
        `push ${c.component} to a local registry: first ${fmtMs(firstMs)} (${first.uploadedBlobs} blobs), again ${fmtMs(againMs)} (${again.uploadedBlobs} blobs, pushed=${again.pushed})`,
      )
    }
  } finally {
    await registry.stop()
  }
}
