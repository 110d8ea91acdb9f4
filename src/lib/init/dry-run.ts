// The offline dry run's output folder: everything a real run would apply, as files,
// minus secret values. Secret data (say Cilium's generated CA when
// hubble.tls.auto.method=helm, in the manifest and inside the Talos patch) is replaced
// by a placeholder and listed in redacted.txt. Files are 0600 and the folders ichor
// creates 0700: the effective values may carry what a user put in a values file.
import {orderApiOfManifest, shapeOrder} from '../stack/kokumi-api.js'
import {parseDocument, visit, isScalar} from 'yaml'
import {toYaml} from '../yaml/emit.js'
import {foreignEntries, openOutputFolder, writeOutputFolder} from './output-folder.js'
import {holdsSecretData} from '../helm/render-cache.js'
import {serializeObjects} from '../stack/objects.js'
import type {InitInputs} from './inputs.js'
import type {InitRender} from './render.js'
import type {NodeConfigView} from './node-configs.js'
import type {PromotionMode} from '../state/installation-types.js'

export interface DryRunOutput {
  dir: string
  files: string[]
  plan: {id: string; title: string}[]
  /** `file: Secret namespace/name (keys)` for every Secret whose values were left out. */
  redacted: string[]
  /** Files an earlier dry run wrote into the folder and this one does not: removed. */
  removed: string[]
  /** What is in the folder that ichor did not write: left as it is. */
  foreign: string[]
}

export function writeInitDryRun(
  dir: string,
  inputs: InitInputs,
  render: InitRender,
  plan: {id: string; title: string}[],
  nodes: NodeConfigView[] = [],
  warnings: string[] = [],
): DryRunOutput {
  // The folder is checked before anything is written (output-folder.ts).
  const folder = openOutputFolder(dir)
  const files: {rel: string; content: string | Buffer}[] = []
  const redacted: string[] = []
  const write = (rel: string, content: string | Buffer) => files.push({rel, content})
  const writeManifest = (rel: string, text: string) => {
    const r = redactSecretData(text)
    redacted.push(...r.redacted.map((what) => `${rel}: ${what}`))
    write(rel, r.text)
  }
  writeManifest('talos/controlplane-patch.yaml', render.talos.controlPlane)
  writeManifest('talos/worker-patch.yaml', render.talos.worker)
  // Every node's full machine config (secrets left out) and what it will be: disk, image, patches, hostname.
  for (const n of nodes) if (n.config !== undefined) writeManifest(`talos/nodes/${n.node}.yaml`, n.config)
  if (nodes.length > 0) {
    const missing = nodes.some((n) => n.config === undefined) ? ['', '(the full configs need talosctl: install it or set ICHOR_TALOSCTL, and run again)'] : []
    write('talos/nodes.txt', `${[...nodes.map((n) => n.summary), ...missing].join('\n')}\n`)
  }
  writeManifest('cilium/manifest.yaml', render.cilium.manifest)
  write('cilium/values.effective.yaml', toYaml(render.cilium.effective))
  write('cilium/values.effective.json', `${JSON.stringify(render.cilium.effective, null, 2)}\n`)
  // The Orders in the shape of the Order CRD in the Kokumi manifest this run rendered, as a
  // real run shapes them after the live CRD (stack/kokumi-api.ts).
  const kokumi = render.stack.components.kokumi.rendered
  const orderApi = orderApiOfManifest(kokumi.objects, kokumi.version)
  for (const c of Object.values(render.stack.components)) {
    write(`bundles/${c.component}.tar.gz`, c.bundle.layer)
    write(
      `bundles/${c.component}.json`,
      `${JSON.stringify({component: c.component, repository: c.bundle.repository, tag: c.bundle.tag, layerDigest: c.bundle.layerDigest, manifestDigest: c.bundle.artifact.manifestDigest, version: c.rendered.version}, null, 2)}\n`,
    )
    write(`orders/${c.component}.yaml`, serializeObjects([shapeOrder(c.order, orderApi)]))
    writeManifest(`stack/${c.component}/manifest.yaml`, c.rendered.manifest)
  }
  // Names only: the values are generated in the cluster and never written out.
  write('secrets.txt', `${render.stack.secretRefs.map((r) => `${r.namespace}/${r.name}`).join('\n')}\n`)
  if (redacted.length > 0) {
    write(
      'redacted.txt',
      `# Secret values left out of this dry run (a real run generates or reads them; they are never written here)\n${redacted.join('\n')}\n`,
    )
  }
  // The reviewer of plan.txt learns what else is in the folder.
  const foreign = foreignEntries(folder, [...files.map((f) => f.rel), 'plan.txt'])
  write('plan.txt', renderPlanText(inputs, render, plan, warnings, foreign))
  const written = writeOutputFolder(folder, files)
  return {dir, files: files.map((f) => f.rel), plan, redacted, ...written}
}

const PLACEHOLDER = (bytes: number) => `<left out by ichor --dry-run: ${bytes} bytes>`

/**
 * The manifest (one or more YAML documents) with the value of every key of every Secret's
 * data/stringData replaced by a placeholder, also inside string fields that hold a manifest
 * themselves (a Talos inline manifest). Documents without Secret data stay byte for byte.
 */
export function redactSecretData(manifest: string, depth = 0): {text: string; redacted: string[]} {
  const redacted: string[] = []
  if (!holdsSecretData(manifest)) return {text: manifest, redacted}
  const parts = manifest.split(/(^---[ \t]*$)/m) // separators kept, so join('') is the input
  for (let i = 0; i < parts.length; i += 2) {
    const part = parts[i]!
    if (!holdsSecretData(part)) continue
    const doc = parseDocument(part)
    const js = doc.toJS() as {kind?: string; metadata?: {name?: string; namespace?: string}} | null
    if (js?.kind === 'Secret') {
      const keys: string[] = []
      for (const field of ['data', 'stringData']) {
        const map = doc.get(field, true)
        if (map === undefined || map === null) continue
        visit(map as never, {
          Pair(_, pair) {
            if (isScalar(pair.key) && isScalar(pair.value)) {
              keys.push(String(pair.key.value))
              pair.value.value = PLACEHOLDER(String(pair.value.value ?? '').length)
            }
          },
        })
      }
      redacted.push(`Secret ${js.metadata?.namespace ?? '(default)'}/${js.metadata?.name ?? '?'} (${keys.sort().join(', ')})`)
    }
    // A manifest inside a string (Talos's inline manifest): redact it in place.
    visit(doc, {
      Scalar(_, node) {
        if (typeof node.value !== 'string' || !holdsSecretData(node.value)) return
        // a nested manifest is a mapping document of its own: one level deep is all Talos has
        const inner = depth < 2 && node !== doc.contents && /^kind:/m.test(node.value) ? redactSecretData(node.value, depth + 1) : undefined
        if (inner && inner.redacted.length > 0 && !/PRIVATE KEY-----/.test(inner.text)) {
          node.value = inner.text
          redacted.push(...inner.redacted)
        } else {
          // a private key outside any Secret: the whole value goes
          node.value = PLACEHOLDER(node.value.length)
          redacted.push(`${js?.kind ?? 'object'} ${js?.metadata?.namespace ?? '(default)'}/${js?.metadata?.name ?? '?'} (a private key)`)
        }
      },
    })
    const lead = /^\s*/.exec(part)![0].includes('\n') ? '\n' : ''
    parts[i] = `${lead}${doc.toString({lineWidth: 0})}`
  }
  return {text: parts.join(''), redacted}
}

function renderPlanText(inputs: InitInputs, render: InitRender, plan: {id: string; title: string}[], warnings: string[], foreign: string[]): string {
  const lines = [
    `ichor init plan for cluster "${inputs.clusterName}" (${inputs.endpoint})`,
    `Talos ${inputs.talosVersion.tag}, Kubernetes ${inputs.kubernetesVersion.version}, kube-proxy ${inputs.kubeProxy}, tunnel ${inputs.tunnel}`,
    `Cilium ${render.assets.cilium.version}, Kokumi ${render.stack.components.kokumi.rendered.version}, Argo CD ${argocdVersion(render)}`,
    `Kokumi promotion: ${PROMOTION_TEXT[render.stack.promotion]}`,
    `control planes: ${inputs.controlPlanes.join(', ') || '(none given)'}; workers: ${inputs.workers.join(', ') || '(none)'}`,
    ...(warnings.length > 0 ? ['', 'warnings:', ...warnings.map((w) => `  - ${w}`)] : []),
    '',
    'artifacts:',
    ...Object.values(render.assets).map(
      (a) => `  ${a.id}: ${a.pinned.name} ${a.version} ${a.matchesPin ? '(pinned)' : `(NOT the pin ${a.pinned.version})`} sha256 ${a.sha256}`,
    ),
    '',
    'bundles:',
    ...Object.values(render.stack.components).map(
      (c) => `  ${c.component}: ${c.bundle.repository}:${c.bundle.tag} manifest ${c.bundle.artifact.manifestDigest} (${c.bundle.layer.length} bytes gzipped)`,
    ),
    '',
    'steps a real run would execute (each probed first and skipped when it already holds):',
    ...plan.map((s, i) => `  ${String(i + 1).padStart(2)}. ${s.title}`),
    ...(foreign.length > 0 ? ['', 'also in this folder, not written by ichor (left as it is):', ...foreign.map((f) => `  ${f}`)] : []),
    '',
  ]
  return lines.join('\n')
}

const PROMOTION_TEXT: Record<PromotionMode, string> = {
  Automatic: 'Automatic (Kokumi serves each new bundle once rendered; --promotion Manual makes each wait for `ichor stack promote`)',
  Manual: 'Manual (init approves the first install; each later bundle waits for `ichor stack promote <component>`)',
}

/** Argo CD's own version, from the argocd-server image the render runs (values may change it), and its chart's. */
function argocdVersion(render: InitRender): string {
  const c = render.stack.components.argocd.rendered
  const server = c.objects.find((o) => o.kind === 'Deployment' && o.metadata?.name === 'argocd-server') as
    {spec?: {template?: {spec?: {containers?: {image?: string}[]}}}} | undefined
  const image = server?.spec?.template?.spec?.containers?.[0]?.image
  const tag = image && /:([^:/@]+)(@.*)?$/.exec(image)?.[1]
  return tag ? `${tag} (chart argo-cd ${c.version})` : `chart argo-cd ${c.version}`
}
