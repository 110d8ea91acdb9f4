// Issue 21 point 1 as an operator meets it: Cilium adopted by `ichor init` on a laptop with
// Helm 3, its values then changed from a laptop with Helm 4, and back. Real Helm 3.18.0 and
// 4.1.4 (scripts/get-helm.sh) on the harness cluster.
// Issue 38 point 4: Helm 3's adoption of objects identical to the bootstrap's writes no field,
// so once the hand-over takes Talos's field manager off them, the fields Helm 4's server-side
// apply may remove must be owned by "helm"; the first Helm 4 upgrade after that adoption is
// `cni kube-proxy restore`, whose render drops the kube-proxy-replacement settings.
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {parseAllDocuments} from 'yaml'
import {readReleaseRecord} from '../../src/lib/helm/release-record.js'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {runIchor, startHarnessCluster, type HarnessCluster} from '../harness/cluster.js'
import {testHelmPath} from '../harness/helm.js'
import {renderedFieldsNotOwnedBy, workloadEnv} from '../support/managed-fields.js'
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

  /** What the release renders and what the cluster runs agree: cilium-config's keys, every workload's env. */
  const rendersAsLive = async () => {
    const rel = await release()
    const cm = parseAllDocuments(rel.manifest)
      .map((d) => d.toJS() as {kind?: string; metadata?: {name?: string}; data?: Record<string, string>} | null)
      .find((o) => o?.kind === 'ConfigMap' && o.metadata?.name === 'cilium-config')!
    expect(Object.keys(await ciliumConfig()).sort()).toEqual(Object.keys(cm.data ?? {}).sort())
    const env = await workloadEnv(kube, rel.manifest, rel.namespace)
    expect(env.live).toEqual(env.rendered)
    return env.live
  }

  it('adopted with Helm 3: "helm" owns every field it renders; `cni kube-proxy restore` from a Helm 4 laptop leaves no kube-proxy-replacement setting; `replace` from Helm 3 puts them back', async () => {
    const adopted = await release()
    expect(adopted).toMatchObject({revision: 1, status: 'deployed'})
    expect.soft(await renderedFieldsNotOwnedBy(kube, adopted)).toEqual({})
    expect(JSON.stringify(await rendersAsLive())).toMatch(/KUBERNETES_SERVICE_HOST/)

    const restore = await runIchor(['cni', 'kube-proxy', 'restore', '--yes', ...common], withHelm(4))
    expect(restore.code, `${restore.stdout}${restore.stderr}`).toBe(0)
    const restored = await release()
    expect(restored).toMatchObject({revision: 2, status: 'deployed', config: expect.objectContaining({kubeProxyReplacement: false})})
    expect((await ciliumConfig())['kube-proxy-replacement']).toBe('false')
    expect(JSON.stringify(await rendersAsLive())).not.toMatch(/KUBERNETES_SERVICE_HOST/)
    expect(await renderedFieldsNotOwnedBy(kube, restored)).toEqual({})

    // Helm 3's three-way merge over objects whose fields "helm" applied: the settings come back.
    const replace = await runIchor(['cni', 'kube-proxy', 'replace', '--yes', ...common], withHelm(3))
    expect(replace.code, `${replace.stdout}${replace.stderr}`).toBe(0)
    expect(await release()).toMatchObject({revision: 3, status: 'deployed', config: expect.objectContaining({kubeProxyReplacement: true})})
    expect((await ciliumConfig())['kube-proxy-replacement']).toBe('true')
    expect(JSON.stringify(await rendersAsLive())).toMatch(/KUBERNETES_SERVICE_HOST/)
    expect(await renderedFieldsNotOwnedBy(kube, await release())).toEqual({})
  }, 600_000)

  it('adopted with Helm 3, `cni values set` with Helm 4 then with Helm 3 again: each a deployed revision; an init rerun with Helm 3 keeps the release', async () => {
    const base = (await release()).revision
    expect(await release()).toMatchObject({status: 'deployed'})
    const set4 = await runIchor(['cni', 'values', 'set', '--yes', 'debug.enabled=true', ...common], withHelm(4))
    expect(set4.code, `${set4.stdout}${set4.stderr}`).toBe(0)
    expect(await release()).toMatchObject({revision: base + 1, status: 'deployed', config: expect.objectContaining({debug: {enabled: true}})})
    expect((await ciliumConfig()).debug).toBe('true')

    const set3 = await runIchor(['cni', 'values', 'set', '--yes', 'debug.enabled=false', ...common], withHelm(3))
    expect(set3.code, `${set3.stdout}${set3.stderr}`).toBe(0)
    expect(await release()).toMatchObject({revision: base + 2, status: 'deployed'})
    expect((await ciliumConfig()).debug).toBe('false')

    // An init rerun from the Helm 3 laptop keeps the adopted release as it is.
    const rerun = await runIchor(h.initArgs, withHelm(3))
    expect(rerun.code, `${rerun.stdout}${rerun.stderr}`).toBe(0)
    expect(await release()).toMatchObject({revision: base + 2, status: 'deployed'})
  }, 600_000)
})
