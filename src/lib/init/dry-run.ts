// The offline dry run's output folder: everything a real run would apply, as files.
import {mkdirSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {toYaml} from '../yaml/emit.js'
import {serializeObjects} from '../stack/objects.js'
import type {InitInputs} from './inputs.js'
import type {InitRender} from './render.js'
import {initPlanSteps} from '../plans/init.js'

export interface DryRunOutput {
  dir: string
  files: string[]
  plan: {id: string; title: string}[]
}

export function writeInitDryRun(dir: string, inputs: InitInputs, render: InitRender): DryRunOutput {
  const files: string[] = []
  const write = (rel: string, content: string | Buffer) => {
    const path = join(dir, rel)
    mkdirSync(join(path, '..'), {recursive: true})
    writeFileSync(path, content)
    files.push(rel)
  }
  write('talos/controlplane-patch.yaml', render.talos.controlPlane)
  write('talos/worker-patch.yaml', render.talos.worker)
  write('cilium/manifest.yaml', render.cilium.manifest)
  write('cilium/values.effective.yaml', toYaml(render.cilium.effective))
  write('cilium/values.effective.json', `${JSON.stringify(render.cilium.effective, null, 2)}\n`)
  for (const c of Object.values(render.stack.components)) {
    write(`bundles/${c.component}.tar.gz`, c.bundle.layer)
    write(`bundles/${c.component}.json`, `${JSON.stringify({component: c.component, repository: c.bundle.repository, tag: c.bundle.tag, layerDigest: c.bundle.layerDigest, manifestDigest: c.bundle.artifact.manifestDigest, version: c.rendered.version}, null, 2)}\n`)
    write(`orders/${c.component}.yaml`, serializeObjects([c.order]))
    write(`stack/${c.component}/manifest.yaml`, c.rendered.manifest)
  }
  // Names only: the values are generated in the cluster and never written out.
  write('secrets.txt', `${render.stack.secretRefs.map((r) => `${r.namespace}/${r.name}`).join('\n')}\n`)
  const plan = initPlanSteps()
  write('plan.txt', renderPlanText(inputs, render, plan))
  return {dir, files, plan}
}

export function renderPlanText(inputs: InitInputs, render: InitRender, plan: {id: string; title: string}[]): string {
  const lines = [
    `ichor init plan for cluster "${inputs.clusterName}" (${inputs.endpoint})`,
    `Talos ${inputs.talosVersion.tag}, Kubernetes ${inputs.kubernetesVersion.version}, kube-proxy ${inputs.kubeProxy}, tunnel ${inputs.tunnel}`,
    `control planes: ${inputs.controlPlanes.join(', ') || '(none given)'}; workers: ${inputs.workers.join(', ') || '(none)'}`,
    '',
    'artifacts:',
    ...Object.values(render.assets).map((a) => `  ${a.id}: ${a.pinned.name} ${a.version} ${a.matchesPin ? '(pinned)' : `(NOT the pin ${a.pinned.version})`} sha256 ${a.sha256}`),
    '',
    'bundles:',
    ...Object.values(render.stack.components).map((c) => `  ${c.component}: ${c.bundle.repository}:${c.bundle.tag} manifest ${c.bundle.artifact.manifestDigest} (${c.bundle.layer.length} bytes gzipped)`),
    '',
    'steps a real run would execute (each probed first and skipped when it already holds):',
    ...plan.map((s, i) => `  ${String(i + 1).padStart(2)}. ${s.title}`),
    '',
  ]
  return lines.join('\n')
}
