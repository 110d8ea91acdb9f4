// `ichor kubernetes upgrade`'s offline rules, checked before anything runs: the Talos
// version's Kubernetes range, one minor at a time, the installed Cilium minor's tested
// range (or --allow-untested, which says what nobody tested), and the reading of
// talosctl upgrade-k8s's dry run that the prune guard relies on.
import {describe, expect, it} from 'vitest'
import {IchorError} from '../../src/lib/errors/errors.js'
import {nextMinorNeedsCilium} from '../../src/lib/cilium/compatibility.js'
import {checkKubernetesUpgrade, parseUpgradeK8sDryRun, protectedChanges} from '../../src/lib/kubernetes/policy.js'

const refusal = (f: () => unknown): IchorError => {
  try {
    f()
  } catch (e) {
    if (e instanceof IchorError) return e
    throw e
  }
  throw new Error('not refused')
}

describe('checkKubernetesUpgrade', () => {
  const base = {talosVersion: 'v1.14.1', ciliumVersion: '1.18.0', allowUntested: false}

  it('given the next minor inside both ranges, then it is allowed without warnings', () => {
    expect(checkKubernetesUpgrade({...base, from: '1.32.0', to: '1.33.1'})).toEqual({kind: 'minor', from: '1.32.0', to: '1.33.1', warnings: []})
  })

  it('given the version already running, then there is nothing to do', () => {
    expect(checkKubernetesUpgrade({...base, from: '1.33.1', to: '1.33.1'})).toMatchObject({kind: 'same'})
  })

  it('given a two-minor jump, then it is refused (exit 2) naming the minor in between', () => {
    const e = refusal(() => checkKubernetesUpgrade({...base, ciliumVersion: '1.19.6', from: '1.32.0', to: '1.34.0'}))
    expect(e.exitCode).toBe(2)
    expect(e.message).toMatch(/--to: 1\.32\.0 to 1\.34\.0 skips Kubernetes 1\.33.*one minor at a time/)
  })

  it('given a downgrade, then it is refused (exit 2)', () => {
    const e = refusal(() => checkKubernetesUpgrade({...base, from: '1.33.0', to: '1.32.5'}))
    expect(e.exitCode).toBe(2)
    expect(e.message).toMatch(/--to: 1\.32\.5 is older than the running 1\.33\.0/)
  })

  it("given a target outside the Talos version's range, then it is refused naming the range, even with --allow-untested", () => {
    const e = refusal(() =>
      checkKubernetesUpgrade({...base, ciliumVersion: '1.19.6', talosVersion: 'v1.13.0', from: '1.36.2', to: '1.37.0', allowUntested: true}),
    )
    expect(e.exitCode).toBe(2)
    expect(e.message).toMatch(/--to: Kubernetes 1\.37\.0 does not run on Talos v1\.13\.0 \(accepted: 1\.31\.0 to 1\.36\.x\)/)
  })

  it("given a target outside the installed Cilium minor's tested range, then it is refused naming the range and the cni upgrade that makes it compatible", () => {
    const e = refusal(() => checkKubernetesUpgrade({...base, from: '1.33.0', to: '1.34.0'}))
    expect(e.exitCode).toBe(2)
    expect(e.message).toMatch(/--to: Cilium 1\.18 is tested on Kubernetes 1\.30 to 1\.33, not 1\.34/)
    expect(e.hint).toMatch(/ichor cni upgrade --to 1\.18\.12.*then.*ichor cni upgrade --to 1\.19\.6/)
    expect(e.hint).toMatch(/--allow-untested/)
  })

  it('given --allow-untested, then an untested target goes on with a warning that says what nobody tested', () => {
    const v = checkKubernetesUpgrade({...base, from: '1.33.0', to: '1.34.0', allowUntested: true})
    expect(v).toMatchObject({kind: 'minor', warnings: [expect.stringMatching(/nobody tested Cilium 1\.18 on Kubernetes 1\.34/)]})
  })

  it('given a Cilium minor whose tested range ichor does not know, then it is refused unless --allow-untested', () => {
    expect(refusal(() => checkKubernetesUpgrade({...base, ciliumVersion: '1.21.0', from: '1.33.0', to: '1.34.0'})).message).toMatch(
      /no tested Kubernetes range is known for Cilium 1\.21/,
    )
    expect(checkKubernetesUpgrade({...base, ciliumVersion: '1.21.0', from: '1.33.0', to: '1.34.0', allowUntested: true}).warnings).toHaveLength(1)
  })

  it('given Cilium 1.20 (compatibility.rst at v1.20.2: 1.33 to 1.36), then 1.34 is a tested step and 1.37 is not', () => {
    expect(checkKubernetesUpgrade({...base, ciliumVersion: '1.20.0', from: '1.33.0', to: '1.34.0'}).warnings).toEqual([])
    expect(refusal(() => checkKubernetesUpgrade({...base, ciliumVersion: '1.20.0', from: '1.36.0', to: '1.37.0'})).message).toMatch(
      /Cilium 1\.20 is tested on Kubernetes 1\.33 to 1\.36, not 1\.37/,
    )
  })

  it('given a version that is not MAJOR.MINOR.PATCH, then it is refused naming --to and what is accepted', () => {
    const e = refusal(() => checkKubernetesUpgrade({...base, from: '1.32.0', to: '1.33'}))
    expect(e.exitCode).toBe(2)
    expect(e.message).toMatch(/--to: "1\.33" is not a Kubernetes release version \(accepted: vMAJOR\.MINOR\.PATCH or MAJOR\.MINOR\.PATCH/)
  })
})

describe('nextMinorNeedsCilium', () => {
  it("says whether the next Kubernetes minor is outside the installed Cilium minor's tested range", () => {
    expect(nextMinorNeedsCilium('1.18.0', '1.32.0')).toEqual({next: '1.33', needsCiliumUpgrade: false})
    expect(nextMinorNeedsCilium('1.18.0', '1.33.2')).toMatchObject({next: '1.34', needsCiliumUpgrade: true, cilium: '1.19'})
  })
})

describe("reading talosctl upgrade-k8s's dry run", () => {
  // The lines go-kubernetes v0.2.41 ssa.Manager.Diff results print through talosctl's
  // syncManifestsSSA (" < <Action> <Kind>/<namespace>/<name>", then the diff).
  const out = [
    'automatically detected the lowest Kubernetes version 1.32.0',
    'updating manifests (dry run)',
    ' < Pruned ConfigMap/kube-system/cilium-config',
    '--- a/v1.ConfigMap/kube-system/cilium-config',
    '+++ b/v1.ConfigMap/kube-system/cilium-config',
    ' < configured DaemonSet/kube-system/cilium',
    ' < unchanged ClusterRole/cilium',
    ' < created ServiceAccount/default/other',
  ].join('\n')

  it('lists every object with its action', () => {
    expect(parseUpgradeK8sDryRun(out)).toEqual([
      {action: 'Pruned', kind: 'ConfigMap', namespace: 'kube-system', name: 'cilium-config'},
      {action: 'configured', kind: 'DaemonSet', namespace: 'kube-system', name: 'cilium'},
      {action: 'unchanged', kind: 'ClusterRole', namespace: '', name: 'cilium'},
      {action: 'created', kind: 'ServiceAccount', namespace: 'default', name: 'other'},
    ])
  })

  it('names the protected objects Talos would prune or change, and nothing unchanged or unprotected', () => {
    const protectedSet = [
      {kind: 'ConfigMap', namespace: 'kube-system', name: 'cilium-config', owner: 'the Cilium release kube-system/cilium'},
      {kind: 'DaemonSet', namespace: 'kube-system', name: 'cilium', owner: 'the Cilium release kube-system/cilium'},
      {kind: 'ClusterRole', namespace: '', name: 'cilium', owner: 'the Cilium release kube-system/cilium'},
    ]
    expect(protectedChanges(parseUpgradeK8sDryRun(out), protectedSet).map((c) => `${c.action} ${c.subject}`)).toEqual([
      'Pruned ConfigMap/kube-system/cilium-config',
      'configured DaemonSet/kube-system/cilium',
    ])
  })

  it("leaves the objects of the operator's own inline manifests to Talos (issue 38 point 7): applied and pruned as the operator's config says, never a refusal", () => {
    const operator = [
      'updating manifests (dry run)',
      ' < configured Namespace/gateway-system',
      ' < Pruned CustomResourceDefinition/gateways.gateway.networking.k8s.io',
      ' < configured DaemonSet/kube-system/cilium',
    ].join('\n')
    const protectedSet = [{kind: 'DaemonSet', namespace: 'kube-system', name: 'cilium', owner: 'the Cilium release kube-system/cilium'}]
    expect(protectedChanges(parseUpgradeK8sDryRun(operator), protectedSet).map((c) => c.subject)).toEqual(['DaemonSet/kube-system/cilium'])
  })
})

describe("reading talosctl upgrade-k8s's legacy dry run (a node below Talos 1.13)", () => {
  // talosctl v1.14.1 pkg/cluster/kubernetes/talos_managed.go: when any node runs Talos below
  // 1.13 the sync is go-kubernetes v0.2.41 manifests.SyncWithLog, which prints per object
  // " > processing manifest <group/version>.<Kind>/[<namespace>/]<name>", then " < no changes",
  // or the diff and " < dry run, change skipped" (the real run then replaces the object whole).
  const out = [
    'automatically detected the lowest Kubernetes version 1.35.0',
    'updating kubelet to version "1.36.3"',
    'updating manifests',
    ' > processing manifest v1.ConfigMap/kube-system/cilium-config',
    '--- a/v1.ConfigMap/kube-system/cilium-config',
    '+++ b/v1.ConfigMap/kube-system/cilium-config',
    '@@ -1,3 +1,3 @@',
    '-  value: "1"',
    '+  value: "2"',
    '',
    ' < dry run, change skipped',
    ' > processing manifest rbac.authorization.k8s.io/v1.ClusterRole/system:coredns',
    ' < no changes',
    ' > processing manifest apps/v1.DaemonSet/kube-system/kube-proxy',
    '--- a/apps/v1.DaemonSet/kube-system/kube-proxy',
    '+++ b/apps/v1.DaemonSet/kube-system/kube-proxy',
    '@@ -0,0 +1,2 @@',
    '+kind: DaemonSet',
    '',
    ' < dry run, change skipped',
  ].join('\n')

  it('lists every processed manifest: a change is a whole-object replacement', () => {
    expect(parseUpgradeK8sDryRun(out)).toEqual([
      {action: 'replaced', kind: 'ConfigMap', namespace: 'kube-system', name: 'cilium-config'},
      {action: 'unchanged', kind: 'ClusterRole', namespace: '', name: 'system:coredns'},
      {action: 'replaced', kind: 'DaemonSet', namespace: 'kube-system', name: 'kube-proxy'},
    ])
  })

  it('names the protected object the legacy sync would replace', () => {
    const protectedSet = [{kind: 'ConfigMap', namespace: 'kube-system', name: 'cilium-config', owner: 'the Cilium release kube-system/cilium'}]
    expect(protectedChanges(parseUpgradeK8sDryRun(out), protectedSet).map((c) => `${c.action} ${c.subject}`)).toEqual([
      'replaced ConfigMap/kube-system/cilium-config',
    ])
  })
})

describe("talosctl upgrade-k8s's dry run that cannot be read is refused, never read as no changes", () => {
  const refused = (out: string) => refusal(() => parseUpgradeK8sDryRun(out))

  it('no manifest sync in the output', () => {
    const e = refused('automatically detected the lowest Kubernetes version 1.35.0\nsomething else\n')
    expect(e.exitCode).toBe(1)
    expect(e.message).toMatch(/no manifest sync/)
  })

  it('a result line of neither format', () => {
    expect(refused('updating manifests (dry run)\n < Pruned ConfigMap/kube-system/a\n < Deleted ConfigMap/kube-system/b\n').message).toMatch(
      /"< Deleted ConfigMap\/kube-system\/b" is no result line/,
    )
    expect(refused('updating manifests\n > processing manifest v1.ConfigMap/kube-system/a\n < applied somehow\n').message).toMatch(/applied somehow/)
  })

  it('a legacy manifest with no verdict, or a path that names no object', () => {
    expect(refused('updating manifests\n > processing manifest v1.ConfigMap/kube-system/a\n').message).toMatch(/v1\.ConfigMap\/kube-system\/a/)
    expect(refused('updating manifests\n > processing manifest nonsense\n < no changes\n').message).toMatch(/nonsense/)
  })

  it('an empty sync is read as no objects', () => {
    expect(parseUpgradeK8sDryRun('updating manifests (dry run)\n')).toEqual([])
    expect(parseUpgradeK8sDryRun('updating manifests\n')).toEqual([])
  })
})
