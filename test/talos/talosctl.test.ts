// The patches against the REAL talosctl (built from the Talos Go module by
// scripts/build-talosctl.sh, or ICHOR_TALOSCTL): `gen config` applies them, `validate
// --mode metal` accepts the result, and the generated configs have the intended shape.
// A missing or unbuildable talosctl fails this file; it never skips.
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {execa} from 'execa'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {parseAllDocuments} from 'yaml'
import {addHelmOwnership} from '../../src/lib/talos/ownership.js'
import {removeInlineManifestPatch, renderTalosPatches} from '../../src/lib/talos/patches.js'
import type {KubeProxyMode} from '../../src/lib/state/installation-types.js'
import {kubernetesRangeOfTalos} from '../../src/lib/compatibility/queries.js'
import {DEFAULT_TALOS_VERSION, defaultKubernetesVersion} from '../../src/lib/talos/versions.js'
import {PROJECT_ROOT} from '../support/upstream.js'
import {renderRealCilium} from './fixtures.js'

type Doc = Record<string, any>

let talosctl = ''
let manifest = ''
const work = mkdtempSync(join(tmpdir(), 'ichor-talosctl-'))

beforeAll(async () => {
  if (process.env.ICHOR_TALOSCTL) {
    talosctl = process.env.ICHOR_TALOSCTL
  } else {
    const built = await execa('bash', [join(PROJECT_ROOT, 'scripts', 'build-talosctl.sh')], {reject: false, stderr: 'inherit'})
    if (built.exitCode !== 0) throw new Error(`scripts/build-talosctl.sh failed (exit ${built.exitCode}); talosctl is needed for these tests`)
    talosctl = built.stdout.trim().split('\n').pop()!
  }
  manifest = addHelmOwnership(await renderRealCilium())
}, 30 * 60_000)

afterAll(() => rmSync(work, {recursive: true, force: true}))

async function run(args: string[]): Promise<string> {
  const r = await execa(talosctl, args, {reject: false, all: true})
  if (r.exitCode !== 0) throw new Error(`talosctl ${args.join(' ')} failed (exit ${r.exitCode}):\n${r.all}`)
  return r.all ?? ''
}

function docs(file: string): Doc[] {
  return parseAllDocuments(readFileSync(file, 'utf8'))
    .map((d) => d.toJS() as Doc | null)
    .filter((d): d is Doc => d !== null)
}

const byKind = (ds: Doc[], kind: string) => ds.filter((d) => d.kind === kind)
const legacy = (ds: Doc[]) => ds.find((d) => d.kind === undefined && d.version === 'v1alpha1')

interface Generated {
  dir: string
  controlPlane: Doc[]
  worker: Doc[]
}

/** gen config with our patches for both roles, then validate each file as Talos would on metal. */
async function generate(
  name: string,
  talosContract: string,
  kubernetesVersion: string,
  kubeProxy: KubeProxyMode,
  forwardKubeDNSToHost?: boolean,
): Promise<Generated> {
  const dir = join(work, name)
  const patches = renderTalosPatches({talosVersion: `${talosContract}.0`, kubeProxy, ciliumManifest: manifest, forwardKubeDNSToHost})
  writeFileSync(join(work, `${name}-cp.yaml`), patches.controlPlane)
  writeFileSync(join(work, `${name}-worker.yaml`), patches.worker)
  await run([
    'gen',
    'config',
    'ichor-test',
    'https://ichor-test.invalid:6443',
    '--talos-version',
    talosContract,
    '--kubernetes-version',
    kubernetesVersion,
    '--config-patch-control-plane',
    `@${join(work, `${name}-cp.yaml`)}`,
    '--config-patch-worker',
    `@${join(work, `${name}-worker.yaml`)}`,
    '--with-docs=false',
    '--with-examples=false',
    '--output-types',
    'controlplane,worker',
    '--output',
    dir,
  ])
  for (const role of ['controlplane', 'worker']) {
    await run(['validate', '--mode', 'metal', '--strict', '--config', join(dir, `${role}.yaml`)])
  }
  return {dir, controlPlane: docs(join(dir, 'controlplane.yaml')), worker: docs(join(dir, 'worker.yaml'))}
}

const v114 = DEFAULT_TALOS_VERSION.split('.').slice(0, 2).join('.')

describe(`real talosctl ${DEFAULT_TALOS_VERSION}: v1.14 contract (multi-document Kubernetes config)`, () => {
  it('replaced: no flannel, kube-proxy disabled, KubePrism 7445, Cilium inline on the control plane only', async () => {
    const g = await generate('v114-replaced', v114, defaultKubernetesVersion(), 'replaced', false)
    expect(byKind(g.controlPlane, 'KubeFlannelCNIConfig')).toEqual([])
    expect(byKind(g.controlPlane, 'KubeProxyConfig').map((d) => d.enabled)).toEqual([false])
    expect(byKind(g.controlPlane, 'KubePrismConfig').map((d) => d.port)).toEqual([7445])
    expect(byKind(g.worker, 'KubePrismConfig').map((d) => d.port)).toEqual([7445])
    const inline = byKind(g.controlPlane, 'KubeInlineManifestConfig')
    expect(inline.map((d) => d.name)).toEqual(['cilium'])
    expect(inline[0]!.manifest).toBe(manifest)
    expect(byKind(g.worker, 'KubeInlineManifestConfig')).toEqual([])
    expect(byKind(g.worker, 'KubeFlannelCNIConfig')).toEqual([])
    expect(byKind(g.worker, 'KubeProxyConfig')).toEqual([])
    for (const role of [g.controlPlane, g.worker]) {
      expect(byKind(role, 'ResolverConfig')[0]!.hostDNS).toMatchObject({enabled: true, forwardKubeDNSToHost: false})
      // The legacy fields Talos refuses beside the documents are absent.
      expect(legacy(role)?.cluster?.proxy).toBeUndefined()
      expect(legacy(role)?.cluster?.network).toBeUndefined()
      expect(legacy(role)?.cluster?.inlineManifests).toBeUndefined()
      expect(legacy(role)?.machine?.features?.kubePrism).toBeUndefined()
    }
  })

  it('kube-proxy: kube-proxy stays enabled, flannel still gone, Cilium inline on the control plane only', async () => {
    const g = await generate('v114-kube-proxy', v114, defaultKubernetesVersion(), 'kube-proxy')
    expect(byKind(g.controlPlane, 'KubeFlannelCNIConfig')).toEqual([])
    const proxy = byKind(g.controlPlane, 'KubeProxyConfig')
    expect(proxy).toHaveLength(1)
    expect(proxy[0]!.enabled).not.toBe(false)
    expect(byKind(g.controlPlane, 'KubeInlineManifestConfig').map((d) => d.name)).toEqual(['cilium'])
    expect(byKind(g.worker, 'KubeInlineManifestConfig')).toEqual([])
    expect(byKind(g.worker, 'KubePrismConfig').map((d) => d.port)).toEqual([7445])
  })

  it('the hand-over patch removes the inline manifest and nothing else; the result still validates', async () => {
    const cp = join(work, 'v114-replaced', 'controlplane.yaml')
    writeFileSync(join(work, 'v114-remove.yaml'), removeInlineManifestPatch(DEFAULT_TALOS_VERSION))
    const out = join(work, 'v114-after-handover.yaml')
    await run(['machineconfig', 'patch', cp, '--patch', `@${join(work, 'v114-remove.yaml')}`, '--output', out])
    await run(['validate', '--mode', 'metal', '--strict', '--config', out])
    const before = docs(cp)
    const after = docs(out)
    expect(byKind(after, 'KubeInlineManifestConfig')).toEqual([])
    expect(after).toEqual(before.filter((d) => d.kind !== 'KubeInlineManifestConfig'))
  })
})

describe(`real talosctl ${DEFAULT_TALOS_VERSION}: v1.13 contract (legacy v1alpha1 fields)`, () => {
  const k8s113 = kubernetesRangeOfTalos('1.13')!.max.replace(/\.99$/, '.0')

  it('replaced: cni none, proxy disabled, kubePrism 7445, cluster.inlineManifests on the control plane only', async () => {
    const g = await generate('v113-replaced', 'v1.13', k8s113, 'replaced', true)
    for (const role of [g.controlPlane, g.worker]) {
      expect(role.filter((d) => d.kind?.startsWith('Kube'))).toEqual([])
      const cfg = legacy(role)!
      expect(cfg.cluster.network.cni).toEqual({name: 'none'})
      expect(cfg.cluster.proxy.disabled).toBe(true)
      expect(cfg.machine.features.kubePrism).toEqual({enabled: true, port: 7445})
      expect(cfg.machine.features.hostDNS).toMatchObject({enabled: true, forwardKubeDNSToHost: true})
    }
    expect(legacy(g.controlPlane)!.cluster.inlineManifests).toEqual([{name: 'cilium', contents: manifest}])
    expect(legacy(g.worker)!.cluster.inlineManifests ?? []).toEqual([])
  })

  it('kube-proxy: cluster.proxy is not disabled', async () => {
    const g = await generate('v113-kube-proxy', 'v1.13', k8s113, 'kube-proxy')
    expect(legacy(g.controlPlane)!.cluster.proxy?.disabled).not.toBe(true)
    expect(legacy(g.controlPlane)!.cluster.network.cni).toEqual({name: 'none'})
    expect(legacy(g.controlPlane)!.cluster.inlineManifests.map((m: Doc) => m.name)).toEqual(['cilium'])
  })

  it('the hand-over patch removes the cilium entry from cluster.inlineManifests', async () => {
    const cp = join(work, 'v113-replaced', 'controlplane.yaml')
    writeFileSync(join(work, 'v113-remove.yaml'), removeInlineManifestPatch('v1.13.9'))
    const out = join(work, 'v113-after-handover.yaml')
    await run(['machineconfig', 'patch', cp, '--patch', `@${join(work, 'v113-remove.yaml')}`, '--output', out])
    await run(['validate', '--mode', 'metal', '--strict', '--config', out])
    const after = legacy(docs(out))!
    expect(after.cluster.inlineManifests ?? []).toEqual([])
    expect(after.cluster.network.cni).toEqual({name: 'none'})
  })
})

describe('real talosctl: removal patches on a config that no longer has the entry (why callers probe first)', () => {
  it('v1.14: the document delete is a no-op on a config without the document', async () => {
    const handedOver = join(work, 'v114-after-handover.yaml')
    const again = join(work, 'v114-after-second-removal.yaml')
    await run(['machineconfig', 'patch', handedOver, '--patch', `@${join(work, 'v114-remove.yaml')}`, '--output', again])
    expect(docs(again)).toEqual(docs(handedOver))
  })

  it('legacy: the list-element delete FAILS when the entry is absent, so it is sent only to configs that carry it', async () => {
    const handedOver = join(work, 'v113-after-handover.yaml')
    const r = await execa(
      talosctl,
      ['machineconfig', 'patch', handedOver, '--patch', `@${join(work, 'v113-remove.yaml')}`, '--output', join(work, 'unused.yaml')],
      {reject: false, all: true},
    )
    expect(r.exitCode).not.toBe(0)
    expect(r.all).toMatch(/inlineManifests/)
  })
})

describe('real talosctl refuses the mixes the patches avoid (proves the checks are live)', () => {
  it('a legacy cluster.proxy beside KubeProxyConfig on a v1.14 contract fails validation', async () => {
    const bad = join(work, 'mixed.yaml')
    writeFileSync(bad, 'cluster:\n  proxy:\n    disabled: true\n')
    const out = join(work, 'mixed-controlplane.yaml')
    const gen = await execa(
      talosctl,
      [
        'gen',
        'config',
        'ichor-test',
        'https://ichor-test.invalid:6443',
        '--talos-version',
        v114,
        '--config-patch-control-plane',
        `@${bad}`,
        '--with-docs=false',
        '--with-examples=false',
        // With one output type, --output names the file.
        '--output-types',
        'controlplane',
        '--output',
        out,
      ],
      {reject: false, all: true},
    )
    const validated = gen.exitCode === 0 ? await execa(talosctl, ['validate', '--mode', 'metal', '--config', out], {reject: false, all: true}) : gen
    expect(validated.exitCode).not.toBe(0)
    expect(validated.all).toMatch(/KubeProxyConfig/)
  })
})
