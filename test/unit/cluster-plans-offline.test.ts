// The plans whose actions run helm or talosctl (`cni values set`, `cni upgrade`, `cni kube-proxy
// replace|restore`, `kubernetes upgrade`), run on planFixture (test/support/plan-fixture.ts) as
// far as they go without those binaries: the consent rule, and the refusals their read-only
// prepare (or first probe) makes before anything changes. Their steps' actions, and a kill at
// every boundary, need helm, talosctl and the Talos nodes: they run on the harness
// (test/e2e/cni-values.test.ts, cni-upgrade.test.ts, cni-kube-proxy.test.ts, kubernetes-upgrade.test.ts).
import {describe, expect, it} from 'vitest'
import {reportOf} from '../../src/lib/cli/error-report.js'
import type {KubeObject} from '../../src/lib/kube/objects.js'
import {runCniKubeProxy} from '../../src/lib/plans/cni-kube-proxy.js'
import {runCniUpgrade} from '../../src/lib/plans/cni-upgrade.js'
import {runCniValuesSet} from '../../src/lib/plans/cni-values-set.js'
import {runKubernetesUpgrade} from '../../src/lib/plans/kubernetes-upgrade.js'
import {installationCrd} from '../../src/lib/state/installation.js'
import {planFixture, withoutLease, type FixtureRunOptions} from '../support/plan-fixture.js'
import {ichorInstallation} from '../support/stack-cluster.js'

const PLANS: [string, (o: FixtureRunOptions) => Promise<unknown>][] = [
  ['cni values set', (o) => runCniValuesSet({...o, input: {kind: 'edit', files: [], sets: ['hubble.enabled=true'], replace: false}})],
  ['cni upgrade', (o) => runCniUpgrade({...o, to: '1.19.6'})],
  ['cni kube-proxy replace', (o) => runCniKubeProxy({...o, target: 'replaced'})],
  ['cni kube-proxy restore', (o) => runCniKubeProxy({...o, target: 'kube-proxy'})],
  ['kubernetes upgrade', (o) => runKubernetesUpgrade({...o, to: '1.35.0', allowUntested: false})],
]

async function failure(p: Promise<unknown>) {
  return reportOf(
    await p.then(
      () => expect.unreachable('ran'),
      (e: unknown) => e,
    ),
  )
}

const ichorSystem: KubeObject = {apiVersion: 'v1', kind: 'Namespace', metadata: {name: 'ichor-system'}}

describe.each(PLANS)('%s', (_command, run) => {
  it('without a terminal and without --yes: refused (exit 2, naming --yes) before any request', async () => {
    const f = await planFixture([installationCrd(), ichorInstallation()])
    expect(await failure(run(f.options({yes: false})))).toMatchObject({exitCode: 2, message: expect.stringMatching(/--yes/)})
    expect(f.requests).toEqual([])
  })

  it('on a cluster ichor did not set up (no IchorInstallation): refused, naming ichor init, and nothing changed', async () => {
    const f = await planFixture([ichorSystem])
    expect(await failure(run(f.options()))).toMatchObject({
      message: expect.stringMatching(
        /kubeconfig context "fixture" \(http:\/\/127\.0\.0\.1:\d+\) has no IchorInstallation "ichor": this cluster was not set up by ichor init$/,
      ),
      hint: 'run `ichor init` first, or point --kubeconfig/--context at the cluster ichor set up',
    })
    expect(withoutLease(f.writes())).toEqual([])
    expect(f.get('coordination.k8s.io/v1', 'Lease', 'ichor-lock', 'ichor-system')?.spec ?? {}).not.toHaveProperty('holderIdentity')
  })
})

describe('kubernetes upgrade', () => {
  it('with Cilium never adopted into a Helm release: exit 2 before talosctl is run or the Lease taken', async () => {
    const f = await planFixture([ichorSystem, installationCrd(), ichorInstallation()])
    expect(await failure(runKubernetesUpgrade({...f.options(), to: '1.35.0', allowUntested: false, talosconfig: '/nonexistent/talosconfig'}))).toMatchObject({
      exitCode: 2,
      message: expect.stringMatching(/no Helm release kube-system\/cilium/),
    })
    expect(f.writes()).toEqual([])
  })
})
