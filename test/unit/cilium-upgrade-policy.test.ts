// `ichor cni upgrade`'s offline rules: Cilium's upgrade guide on versions, the owned keys
// derived from the target chart (the real 1.18.0 / 1.19.6 / 1.20.0 charts), the pre-flight
// values (rendered with the real chart beside the agents') and the wait budget.
import {describe, expect, it} from 'vitest'
import {parse} from 'yaml'
import {helmTemplate} from '../../src/lib/helm/template.js'
import type {Values} from '../../src/lib/values/path.js'
import {CILIUM_OWNED_KEYS} from '../../src/lib/cilium/defaults.js'
import {pinnedAssets} from '../../src/lib/assets/lock.js'
import {chartUpgrade} from '../../src/lib/cilium/status.js'
import {preflightValues, resolveUpgradeChart} from '../../src/lib/cilium/upgrade.js'
import {checkCiliumValues} from '../../src/lib/cilium/validate.js'
import {ciliumEffectiveValues} from '../../src/lib/cilium/effective.js'
import {judgeCiliumUpgrade, nextCiliumUpgrade, upgradeWaitSeconds} from '../../src/lib/cilium/versions.js'
import {UPSTREAM} from '../support/upstream.js'

const KNOWN = ['1.17.4', '1.17.9', '1.18.0', '1.18.3', '1.19.6', '1.20.0', '1.21.0-pre.0']

describe('judgeCiliumUpgrade: never down, one minor at a time', () => {
  it('given the same version, then there is nothing to upgrade', () => {
    expect(judgeCiliumUpgrade('1.18.0', '1.18.0', {known: KNOWN})).toEqual({kind: 'same'})
  })
  it('given a patch or the next minor from the newest patch, then it is allowed without warnings', () => {
    expect(judgeCiliumUpgrade('1.18.0', '1.18.3', {known: KNOWN})).toEqual({kind: 'patch', warnings: []})
    expect(judgeCiliumUpgrade('1.18.3', '1.19.6', {known: KNOWN})).toEqual({kind: 'minor', warnings: []})
  })
  it('given the next minor from an older patch, then it is refused naming the newest patch and the flag; with --skip-patch-check it goes on with a warning', () => {
    const v = judgeCiliumUpgrade('1.18.0', '1.19.6', {known: KNOWN})
    expect(v).toMatchObject({
      kind: 'refused',
      reason: expect.stringMatching(/1\.18\.0 is not the newest 1\.18 patch ichor knows \(1\.18\.3\).*latest patch.*--to 1\.18\.3.*--skip-patch-check/),
    })
    const skipped = judgeCiliumUpgrade('1.18.0', '1.19.6', {known: KNOWN, skipPatchCheck: true})
    expect(skipped).toMatchObject({
      kind: 'minor',
      warnings: [expect.stringMatching(/1\.18\.0 is not the newest 1\.18 patch ichor knows \(1\.18\.3\).*--skip-patch-check/)],
    })
  })
  it('given the charts ichor knows, then 1.18.12 is the newest 1.18 patch: 1.18.0 -> 1.19.6 is refused, 1.18.12 -> 1.19.6 is not', () => {
    expect(judgeCiliumUpgrade('1.18.0', '1.18.12')).toEqual({kind: 'patch', warnings: []})
    expect(judgeCiliumUpgrade('1.18.0', '1.19.6')).toMatchObject({kind: 'refused', reason: expect.stringMatching(/upgrade to 1\.18\.12 first/)})
    expect(judgeCiliumUpgrade('1.18.12', '1.19.6')).toEqual({kind: 'minor', warnings: []})
  })
  it('given two minors ahead, then it is refused naming the minor in between and the version to go to first', () => {
    const v = judgeCiliumUpgrade('1.18.0', '1.20.0', {known: KNOWN})
    expect(v.kind).toBe('refused')
    expect(v.kind === 'refused' && v.reason).toMatch(/1\.18\.0 to 1\.20\.0 skips 1\.19: .*one minor at a time; upgrade to 1\.19\.6 first/)
    const three = judgeCiliumUpgrade('1.17.4', '1.20.0', {known: KNOWN})
    expect(three.kind === 'refused' && three.reason).toMatch(/skips 1\.18, 1\.19: .*upgrade to 1\.18\.3, then 1\.19\.6 first/)
  })
  it('given an older version (patch or minor), then it is refused as a downgrade', () => {
    expect(judgeCiliumUpgrade('1.19.6', '1.18.0', {known: KNOWN})).toMatchObject({
      kind: 'refused',
      reason: expect.stringMatching(/1\.18\.0 is older than the installed 1\.19\.6: Cilium is never downgraded/),
    })
    expect(judgeCiliumUpgrade('1.18.3', '1.18.0', {known: KNOWN}).kind).toBe('refused')
  })
  it('given another major or a version that is not one, then it is refused', () => {
    expect(judgeCiliumUpgrade('1.20.0', '2.0.0', {known: KNOWN}).kind).toBe('refused')
    expect(judgeCiliumUpgrade('1.18.0', 'latest', {known: KNOWN})).toMatchObject({
      kind: 'refused',
      reason: expect.stringMatching(/"latest" is not a Cilium version/),
    })
  })
})

describe('nextCiliumUpgrade and cni status', () => {
  it('is the newest patch of the minor first, else the newest patch of the next minor', () => {
    expect(nextCiliumUpgrade('1.18.0', KNOWN)).toBe('1.18.3')
    expect(nextCiliumUpgrade('1.18.3', KNOWN)).toBe('1.19.6')
    expect(nextCiliumUpgrade('1.20.0', KNOWN)).toBeUndefined()
  })
  it("cni status names the planner's next Cilium hop (upgrade plan's), with its command and why", () => {
    const around = {talos: 'v1.14.1', kubernetes: '1.33.6'}
    // Cilium's upgrade guide: the newest patch of the current minor first (1.18.12), then the next minor.
    expect(chartUpgrade('1.18.0', around)).toMatchObject({
      upgrade: 'too-far',
      next: {version: '1.18.12', command: 'ichor cni upgrade --to 1.18.12', why: expect.stringMatching(/newest 1\.18 patch/)},
    })
    expect(chartUpgrade('1.18.12', around)).toMatchObject({next: {version: '1.19.6', command: 'ichor cni upgrade --to 1.19.6'}})
    expect(chartUpgrade('1.18.12', around).next?.after).toBeUndefined()
    expect(chartUpgrade('1.20.0', around).next).toBeUndefined()
    // Cilium 1.19 is tested from Kubernetes 1.32: at 1.31, Kubernetes moves first, and the hop says so.
    const later = chartUpgrade('1.18.12', {talos: 'v1.13.9', kubernetes: '1.31.4'}).next
    expect(later).toMatchObject({version: '1.19.6', command: 'ichor cni upgrade --to 1.19.6'})
    expect(later?.after?.[0]).toMatch(/^ichor kubernetes upgrade --to 1\.32\.\d+$/)
  })
})

describe('owned keys from the target chart', () => {
  const facts = {kubeProxy: 'replaced', tunnel: 'vxlan'} as const
  const caps = (chartPath: string) =>
    (ciliumEffectiveValues({chartPath, user: {}, facts}).securityContext as {capabilities: Record<string, string[]>}).capabilities
  it("agent capabilities are the chart's default list minus SYS_MODULE: 1.19 and 1.20 add SYSLOG", () => {
    expect(caps(UPSTREAM.ciliumChart).ciliumAgent).toEqual([
      'CHOWN',
      'KILL',
      'NET_ADMIN',
      'NET_RAW',
      'IPC_LOCK',
      'SYS_ADMIN',
      'SYS_RESOURCE',
      'DAC_OVERRIDE',
      'FOWNER',
      'SETGID',
      'SETUID',
    ])
    for (const chart of [UPSTREAM.cilium119Chart, UPSTREAM.cilium120Chart]) {
      expect(caps(chart).ciliumAgent).toContain('SYSLOG')
      expect(caps(chart).ciliumAgent).not.toContain('SYS_MODULE')
      expect(caps(chart).cleanCiliumState).toEqual(['NET_ADMIN', 'SYS_ADMIN', 'SYS_RESOURCE'])
    }
  })
  it('upgradeCompatibility is owned: the chart minor at init, the recorded minor afterwards', () => {
    expect(ciliumEffectiveValues({chartPath: UPSTREAM.ciliumChart, user: {}, facts}).upgradeCompatibility).toBe('1.18')
    expect(ciliumEffectiveValues({chartPath: UPSTREAM.cilium119Chart, user: {}, facts: {...facts, upgradeCompatibility: '1.18'}}).upgradeCompatibility).toBe(
      '1.18',
    )
    expect(CILIUM_OWNED_KEYS.map((k) => k.path.join('.'))).toContain('upgradeCompatibility')
    const refused = checkCiliumValues({chartPath: UPSTREAM.cilium119Chart, user: {upgradeCompatibility: '1.10'}, facts})
    expect(refused.issues).toEqual([expect.objectContaining({path: 'upgradeCompatibility'})])
  })
})

describe('the pre-flight release and the wait budget', () => {
  it("pre-flight values are the upgrade guide's, with the release's API server address", () => {
    expect(preflightValues({k8sServiceHost: 'localhost', k8sServicePort: 7445, ipam: {mode: 'kubernetes'}})).toEqual({
      preflight: {enabled: true},
      agent: false,
      operator: {enabled: false},
      k8sServiceHost: 'localhost',
      k8sServicePort: 7445,
    })
    expect(preflightValues({})).toEqual({preflight: {enabled: true}, agent: false, operator: {enabled: false}})
  })
  it('helm waits one batch time more per two nodes the agents roll over', () => {
    expect(upgradeWaitSeconds({baseSeconds: 900, nodes: 2})).toBe(1020)
    expect(upgradeWaitSeconds({baseSeconds: 900, nodes: 50})).toBe(900 + 25 * 120)
    expect(upgradeWaitSeconds({baseSeconds: 900, nodes: 0})).toBe(1020)
  })
})

describe('resolveUpgradeChart: which file, which version, pinned or not', () => {
  it('--to a version finds it in the mirror and says it is not the pin but a chart ichor knows', () => {
    const t = resolveUpgradeChart({to: '1.19.6', mirror: UPSTREAM.dir})
    expect(t.chart.version).toBe('1.19.6')
    expect(t.describe).toMatch(
      /^Cilium chart 1\.19\.6: .*cilium-1\.19\.6\.tgz \(from mirror, sha256 21c43cf53841\), not the pin \(1\.20\.0\); a chart ichor knows/,
    )
  })
  it('--to the pinned version names the pin', () => {
    const pin = pinnedAssets().cilium.version
    expect(resolveUpgradeChart({to: pin, mirror: UPSTREAM.dir}).describe).toMatch(new RegExp(`the pinned chart ${pin.replace(/\./g, '\\.')}$`))
  })
  it('--to a version the mirror lacks is exit 2 naming the flag; --to and --cilium-chart that disagree too', () => {
    expect(() => resolveUpgradeChart({to: '1.19.2', mirror: UPSTREAM.dir})).toThrowError(
      expect.objectContaining({exitCode: 2, message: expect.stringMatching(/^--to 1\.19\.2: no Cilium chart 1\.19\.2/)}),
    )
    expect(() => resolveUpgradeChart({to: '1.20.0', chart: UPSTREAM.cilium119Chart})).toThrowError(
      expect.objectContaining({exitCode: 2, message: expect.stringMatching(/disagree: that file is Cilium 1\.19\.6/)}),
    )
  })
})

describe('the pre-flight release follows the effective values (rendered with the real 1.19.6 chart)', () => {
  type Container = {name: string; image: string}
  type PodSpec = {
    containers: Container[]
    initContainers?: Container[]
    imagePullSecrets?: unknown
    nodeSelector?: unknown
    tolerations?: unknown
    affinity?: {nodeAffinity?: unknown; podAffinity?: unknown}
  }
  type Obj = {kind: string; metadata: {name: string}; spec: {template: {spec: PodSpec}}}
  const render = async (values: Values, releaseName: string) =>
    (await helmTemplate({chartPath: UPSTREAM.cilium119Chart, releaseName, namespace: 'kube-system', values}))
      .split(/^---$/m)
      .map((d) => parse(d) as Obj | null)
      .filter((d): d is Obj => Boolean(d && d.kind))
  const workload = (objs: Obj[], kind: string, name: string) => objs.find((o) => o.kind === kind && o.metadata.name === name)!.spec.template.spec
  const images = (spec: PodSpec, name: string) => [...(spec.initContainers ?? []), ...spec.containers].find((c) => c.name === name)?.image
  const nodeAffinity = {
    requiredDuringSchedulingIgnoredDuringExecution: {
      nodeSelectorTerms: [{matchExpressions: [{key: 'node-role.example/cni', operator: 'In', values: ['yes']}]}],
    },
  }
  const user: Values = {
    image: {repository: 'mirror.example/cilium/cilium'},
    envoy: {image: {override: 'mirror.example/cilium/cilium-envoy:v1.36.9'}},
    imagePullSecrets: [{name: 'mirror-pull'}],
    nodeSelector: {'node-role.example/cni': 'yes'},
    tolerations: [{key: 'dedicated', operator: 'Equal', value: 'net', effect: 'NoSchedule'}],
    affinity: {nodeAffinity},
  }

  it("pre-pulls the agents' cilium and envoy images, with their pull secrets, on the agents' nodes", async () => {
    const effective = ciliumEffectiveValues({
      chartPath: UPSTREAM.cilium119Chart,
      user,
      facts: {kubeProxy: 'replaced', tunnel: 'vxlan', upgradeCompatibility: '1.18'},
    })
    const [agent, pre] = await Promise.all([render(effective, 'cilium'), render(preflightValues(effective), 'cilium-preflight')])
    const agentDs = workload(agent, 'DaemonSet', 'cilium')
    const envoyDs = workload(agent, 'DaemonSet', 'cilium-envoy')
    const preDs = workload(pre, 'DaemonSet', 'cilium-pre-flight-check')
    const preDeploy = workload(pre, 'Deployment', 'cilium-pre-flight-check')
    expect(images(agentDs, 'cilium-agent')).toMatch(/^mirror\.example\/cilium\/cilium:v1\.19\.6@sha256:/)
    expect(images(preDs, 'cilium-pre-flight-check')).toBe(images(agentDs, 'cilium-agent'))
    expect(images(preDeploy, 'cnp-validator')).toBe(images(agentDs, 'cilium-agent'))
    expect(images(preDs, 'cilium-pre-flight-envoy')).toBe(images(envoyDs, 'cilium-envoy'))
    for (const spec of [preDs, preDeploy]) expect(spec.imagePullSecrets).toEqual([{name: 'mirror-pull'}])
    expect(preDs.nodeSelector).toEqual(agentDs.nodeSelector)
    expect(preDs.tolerations).toEqual(agentDs.tolerations)
    expect(preDs.affinity?.nodeAffinity).toEqual(nodeAffinity)
    // Still only beside a running agent: the chart's podAffinity to k8s-app=cilium is kept.
    expect(preDs.affinity?.podAffinity).toBeDefined()
  })

  it("given the envoy DaemonSet off, then the pre-flight pulls no envoy image (the agents' l7Proxy/envoy.enabled/upgradeCompatibility)", async () => {
    const effective = ciliumEffectiveValues({
      chartPath: UPSTREAM.cilium119Chart,
      user: {envoy: {enabled: false}},
      facts: {kubeProxy: 'replaced', tunnel: 'vxlan', upgradeCompatibility: '1.18'},
    })
    const pre = await render(preflightValues(effective), 'cilium-preflight')
    expect(images(workload(pre, 'DaemonSet', 'cilium-pre-flight-check'), 'cilium-pre-flight-envoy')).toBeUndefined()
  })
})
