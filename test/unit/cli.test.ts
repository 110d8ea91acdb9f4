// The built CLI, run as a user runs it (npm test builds first): in this process
// (runCliInProcess), and as a real process where the row needs one (stdin, two processes).
import {execFileSync} from 'node:child_process'
import {mkdtempSync, readFileSync, existsSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {describe, expect, it} from 'vitest'
import {parseAllDocuments} from 'yaml'
import {createHash} from 'node:crypto'
import {pinnedAssets} from '../../src/lib/assets/lock.js'
import {untarSync} from '../../src/lib/chart/archive.js'
import {DEFAULT_TALOS_VERSION, defaultKubernetesVersion} from '../../src/lib/talos/versions.js'
import {PROJECT_ROOT, UPSTREAM} from '../support/upstream.js'
import {runCli, type CliResult} from '../support/run-cli.js'
import {runCliInProcess} from '../support/run-cli-inprocess.js'

const BIN = join(PROJECT_ROOT, 'bin', 'run.js')
if (!existsSync(join(PROJECT_ROOT, 'dist', 'commands', 'init.js'))) throw new Error('dist/ is missing: run `npm run build` first (npm test does)')

function ichor(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  return runCliInProcess(args, {env: {...process.env, ICHOR_MIRROR: '', ...env}})
}

/** A process of its own: for a row that writes to its stdin (values/input.ts reads fd 0) or compares two processes. */
function spawned(args: string[], input?: string): Promise<CliResult> {
  return runCli(args, {input, env: {...process.env, ICHOR_MIRROR: ''}})
}

const NODES = ['--cluster-name', 'homelab', '--endpoint', 'https://192.0.2.10:6443', '--control-plane', '192.0.2.10', '--worker', '192.0.2.11']

describe('ichor init --dry-run --output DIR', () => {
  it('renders patches, manifest, effective values and the plan offline, naming the artifacts used', async () => {
    const out = mkdtempSync(join(tmpdir(), 'ichor-dry-'))
    const r = await ichor(['init', '--dry-run', '--output-dir', out, ...NODES, '--mirror', UPSTREAM.dir])
    const pin = pinnedAssets().cilium
    expect(r.stderr).toContain(`cilium: ${UPSTREAM.pinnedCiliumChart} (cilium ${pin.version}, `)
    expect(r.stderr).toMatch(new RegExp(`from mirror\\) matches the pin ${pin.version.replace(/\./g, '\\.')}`))
    expect(r.stderr).toMatch(/argocd: .*argo-cd-10\.1\.1\.tgz .*does NOT match the pin 10\.11\.6/)
    expect(r.code, r.stderr).toBe(0)
    // The default set is one someone tested: no compatibility warning, and plan.txt names it.
    expect(r.stderr).not.toMatch(/warning/i)
    expect(readFileSync(join(out, 'plan.txt'), 'utf8')).toContain(`Talos ${DEFAULT_TALOS_VERSION}, Kubernetes ${defaultKubernetesVersion()}, `)
    expect(r.stdout).toMatch(/Adopt Cilium into Helm release kube-system\/cilium/)
    const cp = parseAllDocuments(readFileSync(join(out, 'talos', 'controlplane-patch.yaml'), 'utf8')).map((d) => d.toJS())
    expect(cp.map((d) => d.kind)).toEqual(['KubeFlannelCNIConfig', 'KubeProxyConfig', 'KubePrismConfig', 'KubeInlineManifestConfig'])
    const inline = cp.find((d) => d.kind === 'KubeInlineManifestConfig')
    const objects = parseAllDocuments(inline.manifest as string)
      .map((d) => d.toJS())
      .filter(Boolean)
    expect(objects.length).toBeGreaterThan(15)
    for (const o of objects) {
      expect(o.metadata.annotations).toMatchObject({'meta.helm.sh/release-name': 'cilium', 'meta.helm.sh/release-namespace': 'kube-system'})
      expect(o.metadata.labels).toMatchObject({'app.kubernetes.io/managed-by': 'Helm'})
    }
    expect(readFileSync(join(out, 'talos', 'worker-patch.yaml'), 'utf8')).not.toMatch(/Inline|cilium/)
    const effective = JSON.parse(readFileSync(join(out, 'cilium', 'values.effective.json'), 'utf8'))
    expect(effective).toMatchObject({kubeProxyReplacement: true, k8sServicePort: 7445, tunnelProtocol: 'vxlan', ipam: {mode: 'kubernetes'}})
  })

  it('writes byte-identical bundles from two processes, with no Secret in them, and lists Secret names only', async () => {
    const [a, b] = [mkdtempSync(join(tmpdir(), 'ichor-dry-')), mkdtempSync(join(tmpdir(), 'ichor-dry-'))]
    for (const out of [a, b]) expect((await spawned(['init', '--dry-run', '--output-dir', out, ...NODES, '--mirror', UPSTREAM.dir])).code).toBe(0)
    for (const c of ['argocd', 'kokumi']) {
      const layer = readFileSync(join(a, 'bundles', `${c}.tar.gz`))
      expect(layer.equals(readFileSync(join(b, 'bundles', `${c}.tar.gz`)))).toBe(true)
      const meta = JSON.parse(readFileSync(join(a, 'bundles', `${c}.json`), 'utf8'))
      expect(meta.tag).toMatch(/^\d+\.\d+\.\d+-[0-9a-f]{12}$/)
      expect(meta.layerDigest).toBe(`sha256:${createHash('sha256').update(layer).digest('hex')}`)
      const files = untarSync(layer, c)
      expect([...files.keys()]).toEqual(['manifest.yaml'])
      const manifest = files.get('manifest.yaml')!.toString('utf8')
      expect(manifest).not.toMatch(/^kind: Secret$/m)
      expect(manifest).toMatch(/^kind: CiliumNetworkPolicy$/m)
      const order = parseAllDocuments(readFileSync(join(a, 'orders', `${c}.yaml`), 'utf8'))[0]!.toJS()
      expect(order.spec.source).toEqual({oci: `oci://${meta.repository}`, version: meta.tag})
    }
    const secrets = readFileSync(join(a, 'secrets.txt'), 'utf8').trim().split('\n')
    expect(secrets).toEqual(expect.arrayContaining(['ichor-system/ichor-kokumi-admin', 'kokumi/kokumi-server-auth', 'argocd/argocd-redis']))
    expect(readFileSync(join(a, 'secrets.txt'), 'utf8')).not.toMatch(/password|:/i)
  })

  it('uses the legacy forms below Talos v1.14 and keeps kube-proxy when asked', async () => {
    const out = mkdtempSync(join(tmpdir(), 'ichor-dry-'))
    const r = await ichor([
      'init',
      '--dry-run',
      '--output-dir',
      out,
      ...NODES,
      '--mirror',
      UPSTREAM.dir,
      '--talos-version',
      'v1.13.2',
      '--kube-proxy',
      'kube-proxy',
      '--tunnel',
      'geneve',
    ])
    expect(r.code, r.stderr).toBe(0)
    const [cp] = parseAllDocuments(readFileSync(join(out, 'talos', 'controlplane-patch.yaml'), 'utf8')).map((d) => d.toJS())
    expect(cp.cluster.network.cni.name).toBe('none')
    expect(cp.cluster.proxy).toBeUndefined()
    expect(cp.cluster.inlineManifests[0].name).toBe('cilium')
    expect(cp.cluster.inlineManifests[0].contents).toMatch(/tunnel-protocol: "?geneve/)
  })

  it('refuses invalid Cilium values before writing anything', async () => {
    const out = join(mkdtempSync(join(tmpdir(), 'ichor-dry-')), 'o')
    const values = join(out, '..', 'v.yaml')
    writeFileSync(values, 'ipam:\n  mode: cluster-pool\nbpf:\n  masquerade: true\nhubbel:\n  enabled: true\n')
    // An owned key at another value than ichor's is refused first, as the files are read (before
    // any cluster would be read); then the chart's and the guards' problems, all together.
    const r = await ichor(['init', '--dry-run', '--output-dir', out, ...NODES, '--mirror', UPSTREAM.dir, '--cilium-values', values])
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(/ipam\.mode: is owned by ichor and cannot be set \(ichor sets "kubernetes"\)/)
    expect(r.stderr).not.toMatch(/\n\s+at /) // no stack trace
    const rest = await ichor(['init', '--dry-run', '--output-dir', out, ...NODES, '--mirror', UPSTREAM.dir, '-f', values, '--set', 'ipam.mode=kubernetes'])
    expect(rest.code).toBe(2)
    expect(rest.stderr).toMatch(/bpf\.masquerade: true breaks CoreDNS/)
    expect(rest.stderr).toMatch(/hubbel: is not a key the chart knows/)
    expect(existsSync(out)).toBe(false)
  })

  it("takes the Talos Cilium guide's values file: each owned key at ichor's value is a note, and the run goes on", async () => {
    const out = join(mkdtempSync(join(tmpdir(), 'ichor-dry-')), 'o')
    const values = join(out, '..', 'talos-guide.yaml')
    // The guide's --set flags for kube-proxy replacement, as a values file (Cilium 1.18's capabilities).
    writeFileSync(
      values,
      [
        'ipam:\n  mode: kubernetes',
        'kubeProxyReplacement: true',
        'securityContext:\n  capabilities:',
        '    ciliumAgent: [CHOWN, KILL, NET_ADMIN, NET_RAW, IPC_LOCK, SYS_ADMIN, SYS_RESOURCE, DAC_OVERRIDE, FOWNER, SETGID, SETUID]',
        '    cleanCiliumState: [NET_ADMIN, SYS_ADMIN, SYS_RESOURCE]',
        'cgroup:\n  autoMount:\n    enabled: false\n  hostRoot: /sys/fs/cgroup',
        'k8sServiceHost: localhost',
        'k8sServicePort: 7445',
        '',
      ].join('\n'),
    )
    const args = [
      'init',
      '--dry-run',
      '--output-dir',
      out,
      ...NODES,
      '--mirror',
      UPSTREAM.dir,
      '--cilium-chart',
      UPSTREAM.ciliumChart,
      '--cilium-values',
      values,
    ]
    const r = await ichor([...args, '--kube-proxy', 'replaced'])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stderr.match(/Cilium values: \S+: .* is the value ichor sets itself; accepted, not stored/g)).toHaveLength(8)
    // With kube-proxy kept, three of them disagree: refused, each named with ichor's value.
    const kept = await ichor([...args.map((a) => (a === out ? `${out}2` : a)), '--kube-proxy', 'kube-proxy'])
    expect(kept.code).toBe(2)
    expect(kept.stderr).toMatch(/kubeProxyReplacement: is owned by ichor and cannot be set \(ichor sets false\)/)
    expect(kept.stderr).toMatch(/k8sServiceHost: is owned by ichor/)
    expect(existsSync(`${out}2`)).toBe(false)
  })

  it("takes Cilium values as helm install does: repeatable -f (also --cilium-values) and the --set family, in helm's order", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ichor-dry-'))
    writeFileSync(join(dir, 'a.yaml'), 'hubble:\n  relay:\n    enabled: true\ncluster:\n  name: from-a\n')
    writeFileSync(join(dir, 'b.yaml'), 'cluster:\n  name: from-b\n  id: 3\n')
    const out = join(dir, 'o')
    const args = ['init', '--dry-run', '--output-dir', out, ...NODES, '--mirror', UPSTREAM.dir]
    const r = await ichor([
      ...args,
      '-f',
      join(dir, 'a.yaml'),
      '--cilium-values',
      join(dir, 'b.yaml'),
      '--set',
      'hubble.ui.enabled=true',
      '--set-string',
      'cluster.name=1234',
    ])
    expect(r.code, r.stderr).toBe(0)
    const effective = JSON.parse(readFileSync(join(out, 'cilium', 'values.effective.json'), 'utf8'))
    // b.yaml after a.yaml; --set-string keeps "1234" a string (the chart's schema wants one).
    expect(effective).toMatchObject({hubble: {relay: {enabled: true}, ui: {enabled: true}}, cluster: {name: '1234', id: 3}})
    // A bad --set is refused naming it, before anything is written.
    const bad = await ichor([...args.map((a) => (a === out ? `${out}-bad` : a)), '--set', 'hubble.relay.enabled'])
    expect(bad.code).toBe(2)
    expect(bad.stderr).toMatch(/--set/)
    expect(existsSync(`${out}-bad`)).toBe(false)
  })

  it('reports every bad flag together, exit 2, no stack trace', async () => {
    const r = await ichor([
      'init',
      '--dry-run',
      '--output-dir',
      '/nonexistent/x',
      '--cluster-name',
      'Bad_Name',
      '--endpoint',
      'http://x',
      '--control-plane',
      '1.2.3',
      '--talos-version',
      '1.14',
      '--mirror',
      UPSTREAM.dir,
    ])
    expect(r.code).toBe(2)
    for (const flag of ['--cluster-name', '--endpoint', '--control-plane', '--talos-version']) expect(r.stderr).toContain(`- ${flag}:`)
    expect(r.stderr).not.toMatch(/\n\s+at /)
  })

  it('a missing artifact is a clear error saying how to get it', async () => {
    const r = await ichor(['init', '--dry-run', '--output-dir', '/tmp/x', ...NODES], {ICHOR_ASSETS_DIR: mkdtempSync(join(tmpdir(), 'ichor-empty-'))})
    expect(r.code).toBe(1)
    expect(r.stderr).toContain(`Cilium Helm chart ${pinnedAssets().cilium.version} is missing`)
    expect(r.stderr).toMatch(/ichor assets fetch/)
  })
})

describe('ichor cni values validate', () => {
  it('exit 0 and a one-line verdict for valid values', async () => {
    const r = await ichor(['cni', 'values', 'validate', '--set', 'hubble.relay.enabled=true', '--cilium-chart', UPSTREAM.ciliumChart])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toMatch(/Cilium values are valid for cilium 1\.18\.0/)
  })
  it('--show-effective: stdout holds only the effective values document, every status line is on stderr', async () => {
    const r = await ichor(['cni', 'values', 'validate', '--set', 'hubble.relay.enabled=true', '--cilium-chart', UPSTREAM.ciliumChart, '--show-effective'])
    expect(r.code, r.stderr).toBe(0)
    const docs = parseAllDocuments(r.stdout)
    expect(docs.map((d) => d.errors)).toEqual([[]])
    const effective = docs[0]!.toJS() as {hubble: {relay: {enabled: boolean}}; kubeProxyReplacement: unknown}
    expect(effective.hubble.relay.enabled).toBe(true)
    expect(effective.kubeProxyReplacement).toBeDefined()
    expect(r.stderr).toMatch(/Cilium values are valid for cilium 1\.18\.0/)
    expect(r.stderr).toMatch(/cilium-1\.18\.0\.tgz/)
  })
  it('--json: invalid values are the documented error document carrying every issue with its path, exit 2', async () => {
    const r = await spawned(['cni', 'values', 'validate', '-f', '-', '--cilium-chart', UPSTREAM.ciliumChart, '--json'], 'hubbel: {}\ntunnelProtocol: geneve\n')
    expect(r.code).toBe(2)
    const out = JSON.parse(r.stdout)
    expect(out).toMatchObject({schemaVersion: 1, error: {exitCode: 2, code: 'usage', message: 'Cilium values are invalid: 2 problems'}})
    expect(out.error.issues.map((i: {path: string}) => i.path).sort()).toEqual(['hubbel', 'tunnelProtocol'])
  })
  it('malformed YAML is a clear error, no stack trace', async () => {
    const r = await spawned(['cni', 'values', 'validate', '-f', '-', '--cilium-chart', UPSTREAM.ciliumChart], 'a: [1, 2\n')
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(/-f -: not valid YAML at line \d+/)
    expect(r.stderr).not.toMatch(/\n\s+at /)
  })
  it('--help is fast enough to be generated from the manifest', async () => {
    const out = execFileSync(process.execPath, [BIN, 'cni', 'values', 'validate', '--help'], {encoding: 'utf8'})
    expect(out).toMatch(/--forward-kube-dns-to-host/)
  })
})
