// What `init` tells about a cluster it is about to create, before any node is touched.
// Issue 12 point 5 at init: a new cluster does not serve monitoring.coreos.com, so `init`
// refuses a ServiceMonitor (naming the day-2 command that enables it later) and its render
// does not declare that API present. Point 7: a Kubernetes version outside the range the
// Cilium minor is tested on is warned about. Runs the built CLI's offline dry run (real
// helm, real chart).
import {spawnSync} from 'node:child_process'
import {existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {parseAllDocuments} from 'yaml'
import {pinnedAssets} from '../../src/lib/assets/lock.js'
import {kubernetesCompatibilityWarning} from '../../src/lib/cilium/compatibility.js'
import {ciliumRenderApiVersions} from '../../src/lib/cilium/validate.js'
import type {InitInputs} from '../../src/lib/init/inputs.js'
import {freshClusterFacts} from '../../src/lib/init/render.js'
import {DEFAULT_TALOS_VERSION, defaultKubernetesVersion} from '../../src/lib/talos/versions.js'
import {PROJECT_ROOT, UPSTREAM} from '../support/upstream.js'

const BIN = join(PROJECT_ROOT, 'bin', 'run.js')
if (!existsSync(join(PROJECT_ROOT, 'dist', 'commands', 'init.js'))) throw new Error('dist/ is missing: run `npm run build` first (npm test does)')
const NODES = ['--cluster-name', 'homelab', '--endpoint', 'https://192.0.2.10:6443', '--control-plane', '192.0.2.10']

let work: string
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'ichor-init-fresh-'))
})
afterAll(() => rmSync(work, {recursive: true, force: true}))

describe('ichor init on a new cluster: ServiceMonitors', () => {
  it('Given a values file enabling the agent ServiceMonitor, When init renders, Then exit 2 naming the path and `ichor cni values set`, and nothing is written', () => {
    const values = join(work, 'sm.yaml')
    writeFileSync(values, 'prometheus:\n  enabled: true\n  serviceMonitor:\n    enabled: true\n')
    const out = join(work, 'out')
    const r = spawnSync(process.execPath, [BIN, 'init', '--dry-run', '--output-dir', out, ...NODES, '--mirror', UPSTREAM.dir, '--cilium-values', values], {
      encoding: 'utf8',
      env: {...process.env, ICHOR_MIRROR: ''},
    })
    expect(r.status, r.stdout + r.stderr).toBe(2)
    expect(r.stderr).toMatch(/prometheus\.serviceMonitor\.enabled: .*monitoring\.coreos\.com/)
    expect(r.stderr).toMatch(/`ichor cni values set prometheus\.serviceMonitor\.enabled=true`/)
    expect(existsSync(out)).toBe(false)
  })

  it('the render for a new cluster declares no monitoring.coreos.com; a cluster serving it (a rerun) does', () => {
    const inputs = {kubeProxy: 'replaced', tunnel: 'vxlan', controlPlanes: ['192.0.2.10'], workers: ['192.0.2.11']} as unknown as InitInputs
    expect(ciliumRenderApiVersions(freshClusterFacts(inputs))).toEqual([])
    expect(ciliumRenderApiVersions(freshClusterFacts(inputs, new Set(['monitoring.coreos.com'])))).toEqual(['monitoring.coreos.com/v1'])
    expect(freshClusterFacts(inputs, new Set(['apps'])).freshCluster).toBe(false)
  })
})

describe("ichor init: Kubernetes vs the Cilium minor's tested range", () => {
  it("Given Kubernetes 1.37 (Talos 1.14's default) and Cilium 1.18, When init renders, Then it warns naming both and the tested range, and goes on", () => {
    const out = join(work, 'out-k8s')
    const r = spawnSync(
      process.execPath,
      [
        BIN,
        'init',
        '--dry-run',
        '--output-dir',
        out,
        ...NODES,
        '--mirror',
        UPSTREAM.dir,
        '--cilium-chart',
        UPSTREAM.ciliumChart,
        '--kubernetes-version',
        '1.37.0',
      ],
      {encoding: 'utf8', env: {...process.env, ICHOR_MIRROR: ''}},
    )
    expect(r.status, r.stdout + r.stderr).toBe(0)
    expect(r.stderr).toMatch(/warning: Kubernetes 1\.37 is outside the versions Cilium 1\.18 is tested on \(1\.30 to 1\.33; .*v1\.18\.14\)/)
    // plan.txt, the file a reviewer reads, says it too.
    expect(readFileSync(join(out, 'plan.txt'), 'utf8')).toMatch(/^warnings:\n {2}- Kubernetes 1\.37 is outside the versions Cilium 1\.18 is tested on/m)
    // Issue 12 point 4: no Helm hook (the post-install hubble-generate-certs Job) in the Talos inline manifest.
    const inline = readFileSync(join(out, 'cilium', 'manifest.yaml'), 'utf8')
    expect(inline).toMatch(/kind: DaemonSet/)
    expect(inline).not.toMatch(/helm\.sh\/hook/)
    const objects = parseAllDocuments(inline).map((d) => d.toJS() as {kind: string; metadata: {name: string}})
    expect(objects.map((o) => `${o.kind}/${o.metadata.name}`)).not.toContain('Job/hubble-generate-certs')
    expect(objects.map((o) => `${o.kind}/${o.metadata.name}`)).toContain('CronJob/hubble-generate-certs') // the chart's non-hook renewal stays
  })

  it('Given the default combination and --json, When the offline dry run ends, Then no compatibility warning is given and plan.txt names the tested versions', () => {
    const out = join(work, 'out-k8s-json')
    const r = spawnSync(process.execPath, [BIN, 'init', '--dry-run', '--output-dir', out, ...NODES, '--mirror', UPSTREAM.dir, '--json'], {
      encoding: 'utf8',
      env: {...process.env, ICHOR_MIRROR: ''},
    })
    expect(r.status, r.stdout + r.stderr).toBe(0)
    const result = JSON.parse(r.stdout) as {warnings: string[]}
    expect(result.warnings.filter((w) => /is tested on|nobody tested/.test(w))).toEqual([])
    expect(r.stderr).not.toMatch(/nobody tested/)
    expect(readFileSync(join(out, 'plan.txt'), 'utf8')).not.toMatch(/^warnings:/m)
    const plan = readFileSync(join(out, 'plan.txt'), 'utf8')
    expect(plan).toContain(`Talos ${DEFAULT_TALOS_VERSION}, Kubernetes ${defaultKubernetesVersion()},`)
    expect(plan).toMatch(new RegExp(`cilium: cilium ${pinnedAssets().cilium.version.replace(/\./g, '\\.')} \\(pinned\\)`))
  })

  it('Given another Cilium chart and no --kubernetes-version, When init renders, Then the default Kubernetes is one that chart is tested on', () => {
    const out = join(work, 'out-k8s-chart')
    const r = spawnSync(
      process.execPath,
      [BIN, 'init', '--dry-run', '--output-dir', out, ...NODES, '--mirror', UPSTREAM.dir, '--cilium-chart', UPSTREAM.ciliumChart, '--json'],
      {
        encoding: 'utf8',
        env: {...process.env, ICHOR_MIRROR: ''},
      },
    )
    expect(r.status, r.stdout + r.stderr).toBe(0)
    expect((JSON.parse(r.stdout) as {warnings: string[]}).warnings).toEqual([])
    // Cilium 1.18 is tested on 1.30 to 1.33 and Talos v1.14 runs 1.33: the newest 1.33 patch ichor knows.
    expect(defaultKubernetesVersion(DEFAULT_TALOS_VERSION, '1.18.0')).toBe('1.33.6')
    expect(readFileSync(join(out, 'plan.txt'), 'utf8')).toContain(`Talos ${DEFAULT_TALOS_VERSION}, Kubernetes 1.33.6,`)
  })

  it('names what to do: a tested minor the Talos version runs, or none when their ranges do not meet', () => {
    const talos = {major: 1, minor: 14}
    expect(kubernetesCompatibilityWarning('1.18.0', {major: 1, minor: 37}, talos)).toMatch(/--kubernetes-version 1\.33\.N/)
    expect(kubernetesCompatibilityWarning('1.19.6', {major: 1, minor: 37}, talos)).toMatch(/--kubernetes-version 1\.35\.N/)
    // Talos v1.10 runs 1.28 to 1.33; Cilium 1.19 is tested on 1.32 to 1.35: 1.33.
    expect(kubernetesCompatibilityWarning('1.19.6', {major: 1, minor: 29}, {major: 1, minor: 10})).toMatch(/--kubernetes-version 1\.33\.N/)
  })

  it('warns below and above the range, not inside it, and not for a Cilium minor with no recorded table', () => {
    expect(kubernetesCompatibilityWarning('1.18.0', {major: 1, minor: 30})).toBeUndefined()
    expect(kubernetesCompatibilityWarning('1.18.0', {major: 1, minor: 33})).toBeUndefined()
    expect(kubernetesCompatibilityWarning('1.18.0', {major: 1, minor: 29})).toMatch(/Kubernetes 1\.29 is outside .* \(1\.30 to 1\.33/)
    expect(kubernetesCompatibilityWarning('1.19.6', {major: 1, minor: 36})).toMatch(/Cilium 1\.19 .* \(1\.32 to 1\.35/)
    expect(kubernetesCompatibilityWarning('1.19.6', {major: 1, minor: 35})).toBeUndefined()
    expect(kubernetesCompatibilityWarning('1.99.0', {major: 1, minor: 37})).toBeUndefined()
  })
})
