// Issue 21 point 1 as an operator meets it: Cilium adopted by `ichor init` on a laptop with
// Helm 3, its values then changed from a laptop with Helm 4, and back. Real Helm 3.18.0 and
// 4.1.4 (scripts/get-helm.sh) on the harness cluster.
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {readReleaseRecord} from '../../src/lib/helm/release-record.js'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {runIchor, startHarnessCluster, type HarnessCluster} from '../harness/cluster.js'
import {testHelmPath} from '../harness/helm.js'
import {UPSTREAM} from '../support/upstream.js'

describe('one cluster, laptops with different helm majors', () => {
  let h: HarnessCluster
  let kube: Kube
  let common: string[]
  const withHelm = (major: 3 | 4) => ({...h.env, ICHOR_HELM: testHelmPath(major)})
  const release = async () => (await readReleaseRecord(kube, 'cilium', 'kube-system'))!
  const ciliumConfig = async () => (await kube.request<{data: Record<string, string>}>('GET', '/api/v1/namespaces/kube-system/configmaps/cilium-config')).data

  beforeAll(async () => {
    h = await startHarnessCluster()
    const init = await runIchor(h.initArgs, withHelm(3))
    if (init.code !== 0) throw new Error(`init with Helm 3 failed: ${init.stderr}`)
    kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
    common = ['--kubeconfig', join(h.stateDir, 'kubeconfig'), '--state-dir', h.stateDir, '--cilium-chart', UPSTREAM.ciliumChart]
  }, 600_000)
  afterAll(async () => h?.stop())

  it('adopted with Helm 3, `cni values set` with Helm 4 then with Helm 3 again: each a deployed revision; an init rerun with Helm 3 keeps the release', async () => {
    expect(await release()).toMatchObject({revision: 1, status: 'deployed'})
    const set4 = await runIchor(['cni', 'values', 'set', '--yes', 'debug.enabled=true', ...common], withHelm(4))
    expect(set4.code, `${set4.stdout}${set4.stderr}`).toBe(0)
    expect(await release()).toMatchObject({revision: 2, status: 'deployed', config: expect.objectContaining({debug: {enabled: true}})})
    expect((await ciliumConfig()).debug).toBe('true')

    const set3 = await runIchor(['cni', 'values', 'set', '--yes', 'debug.enabled=false', ...common], withHelm(3))
    expect(set3.code, `${set3.stdout}${set3.stderr}`).toBe(0)
    expect(await release()).toMatchObject({revision: 3, status: 'deployed'})
    expect((await ciliumConfig()).debug).toBe('false')

    // An init rerun from the Helm 3 laptop keeps the adopted release as it is.
    const rerun = await runIchor(h.initArgs, withHelm(3))
    expect(rerun.code, `${rerun.stdout}${rerun.stderr}`).toBe(0)
    expect(await release()).toMatchObject({revision: 3, status: 'deployed'})
  }, 600_000)
})
