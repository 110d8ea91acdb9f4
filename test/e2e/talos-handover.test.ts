// The Cilium hand-over survives `talosctl upgrade-k8s` (issue 4, product item 2), Talos's
// background manifest runs (issue 12, point 1) and Talos's field manager (issue 12, point 2).
// Real: kube-apiserver + etcd (harness), helm. Simulated: the Talos nodes
// (test/sim/talosctl-simulator.mjs, applying inline manifests as each Talos version does).
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {CoreV1Api, type KubeConfig, type KubernetesObject} from '@kubernetes/client-node'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {startControlPlane, type ControlPlane} from '../harness/apiserver.js'
import {loadKubeConfig} from '../harness/kube.js'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {
  controlPlaneHasInlineManifest,
  handOverCiliumFromTalos,
  removeInlineManifestFromControlPlanes,
  talosHandoverPending,
} from '../../src/lib/talos/handover.js'
import {helmInstall, helmUpgrade} from '../../src/lib/helm/release.js'
import {handOverObjectFields} from '../../src/lib/talos/field-manager.js'
import {testHelmPath} from '../harness/helm.js'
import {fieldPaths} from '../support/managed-fields.js'
import {OWNING_INVENTORY_ANNOTATION, TALOS_INVENTORY, isCiliumInTalosInventory, removeCiliumFromTalosInventory} from '../../src/lib/talos/inventory.js'
import {applyConfig, bootstrap, getMachineConfig} from '../../src/lib/talos/talosctl.js'
import {startSimulatedNodes, type SimulatedNodes} from '../sim/simulated-nodes.js'
import {
  CILIUM_INLINE_MANIFEST,
  CILIUM_LIKE_REFS,
  CONTROL_PLANE_IP,
  OTHER_INLINE_MANIFEST,
  SECOND_CONTROL_PLANE_IP,
  WORKER_IP,
  bootstrapSimulatedCluster,
  helm,
  readObjects,
  writeCiliumLikeChart,
  type BootstrappedCluster,
} from '../sim/talos-fixtures.js'

const TALOS = 'v1.14.1'

interface Env {
  cp: ControlPlane
  sim: SimulatedNodes
  cluster: BootstrappedCluster
  kc: KubeConfig
  /** src/lib/kube's connection, which the hand-over takes. */
  kube: Kube
  chartDir: string
}

/** A bootstrapped cluster; a second control plane joins after the bootstrap, as `talosctl apply-config` adds one. */
async function setUp(opts: {talosVersion?: string; secondControlPlane?: boolean} = {}): Promise<Env> {
  const talosVersion = opts.talosVersion ?? TALOS
  const cp = await startControlPlane()
  const sim = startSimulatedNodes(
    [
      {ip: CONTROL_PLANE_IP, role: 'controlplane', talosVersion},
      ...(opts.secondControlPlane ? [{ip: SECOND_CONTROL_PLANE_IP, role: 'controlplane' as const, talosVersion}] : []),
      {ip: WORKER_IP, role: 'worker', talosVersion},
    ],
    {kubeconfigPath: cp.kubeconfigPath},
  )
  const cluster = await bootstrapSimulatedCluster(sim, {
    talosVersion,
    withWorker: true,
    manifests: [
      {name: 'cilium', contents: CILIUM_INLINE_MANIFEST},
      {name: 'site', contents: OTHER_INLINE_MANIFEST},
    ],
  })
  if (opts.secondControlPlane) {
    await applyConfig({node: SECOND_CONTROL_PLANE_IP, file: cluster.controlPlaneConfig, insecure: true})
    // Its first manifest run (started by the join) ends before the tests begin.
    await sim.manifestRunsDone()
  }
  const chartDir = writeCiliumLikeChart(mkdtempSync(join(tmpdir(), 'ichor-cilium-chart-')))
  return {cp, sim, cluster, kc: loadKubeConfig(cluster.kubeconfigPath), kube: await connectKube({kubeconfig: cluster.kubeconfigPath}), chartDir}
}

async function tearDown(env: Env | undefined): Promise<void> {
  env?.sim.cleanup()
  if (env) rmSync(env.chartDir, {recursive: true, force: true})
  await env?.cp.stop()
}

async function inventoryKeys(kc: KubeConfig): Promise<string[]> {
  const cm = await kc.makeApiClient(CoreV1Api).readNamespacedConfigMap(TALOS_INVENTORY)
  return Object.keys(cm.data ?? {}).sort()
}

async function upgradeK8s(env: Env, extra: string[] = []): Promise<void> {
  const r = await env.sim.run([
    'upgrade-k8s',
    '--to',
    '1.36.3',
    '--nodes',
    CONTROL_PLANE_IP,
    '--endpoints',
    CONTROL_PLANE_IP,
    '--talosconfig',
    env.cluster.talosconfig,
    ...extra,
  ])
  expect(r.exitCode, r.stderr).toBe(0)
}

/** identity and content of each object: uid + resourceVersion change on any write or re-creation. */
function fingerprint(objs: Array<KubernetesObject | undefined>) {
  return objs.map((o) => (o ? {kind: o.kind, name: o.metadata?.name, uid: o.metadata?.uid, rv: o.metadata?.resourceVersion} : undefined))
}

const CILIUM_KEYS = [
  '_cilium_rbac.authorization.k8s.io_ClusterRole',
  '_cilium_rbac.authorization.k8s.io_ClusterRoleBinding',
  'kube-system_cilium-config__ConfigMap',
  'kube-system_cilium__ServiceAccount',
  'kube-system_cilium__config-reader_rbac.authorization.k8s.io_Role',
  'kube-system_cilium_apps_DaemonSet',
]

describe('Cilium hand-over on Talos 1.14 (simulated nodes, real apiserver and helm)', () => {
  let env: Env
  beforeAll(async () => {
    env = await setUp()
  })
  afterAll(() => tearDown(env))

  it('bootstrap applied both inline manifests through server-side apply and recorded them in the inventory', async () => {
    expect(await inventoryKeys(env.kc)).toEqual([...CILIUM_KEYS, 'kube-system_site-settings__ConfigMap'].sort())
    for (const obj of await readObjects(env.kc, CILIUM_LIKE_REFS)) {
      expect(obj?.metadata?.annotations?.[OWNING_INVENTORY_ANNOTATION]).toBe(TALOS_INVENTORY.name)
      expect(obj?.metadata?.managedFields?.map((f) => f.manager)).toContain('talos')
    }
    // A second bootstrap is what Talos answers with AlreadyExists: success for ichor.
    expect(await bootstrap({node: CONTROL_PLANE_IP, talosconfig: env.cluster.talosconfig})).toEqual({alreadyBootstrapped: true})
  })

  it('helm adopts the bootstrapped objects with --take-ownership without changing their content', async () => {
    const before = await readObjects(env.kc, CILIUM_LIKE_REFS)
    await helm(['install', 'cilium', env.chartDir, '--namespace', 'kube-system', '--take-ownership'], env.cp.kubeconfigPath)
    const status = JSON.parse(await helm(['status', 'cilium', '--namespace', 'kube-system', '--output', 'json'], env.cp.kubeconfigPath)) as {
      info: {status: string}
      version: number
    }
    expect(status).toMatchObject({info: {status: 'deployed'}, version: 1})
    const after = await readObjects(env.kc, CILIUM_LIKE_REFS)
    const content = (o: KubernetesObject | undefined) => {
      const {metadata, ...rest} = (o ?? {}) as KubernetesObject & Record<string, unknown>
      return {...rest, labels: metadata?.labels, annotations: metadata?.annotations}
    }
    expect(after.map(content)).toEqual(before.map(content))
  })

  it('the probes report the hand-over pending, then done after it ran; a second run changes nothing', async () => {
    const access = {talosconfig: env.cluster.talosconfig, controlPlanes: [CONTROL_PLANE_IP]}
    expect(await talosHandoverPending(env.kube, access)).toMatchObject({
      inlineManifestOn: [CONTROL_PLANE_IP],
      manifestRunOn: [CONTROL_PLANE_IP],
      inInventory: true,
    })

    const result = await handOverCiliumFromTalos(env.kube, access)
    expect(result.patchedNodes).toEqual([CONTROL_PLANE_IP])
    expect(result.inventory.removedEntries.sort()).toEqual(CILIUM_KEYS)

    expect(await talosHandoverPending(env.kube, access)).toEqual({inlineManifestOn: [], manifestRunOn: [], inInventory: false, managedByTalos: []})
    expect(await controlPlaneHasInlineManifest({node: CONTROL_PLANE_IP, talosconfig: env.cluster.talosconfig, name: 'site'})).toBe(true)
    expect(await getMachineConfig({node: CONTROL_PLANE_IP, talosconfig: env.cluster.talosconfig})).not.toContain('cilium-config')
    // Talos keeps its own entries; Cilium's objects no longer claim to be Talos's.
    expect(await inventoryKeys(env.kc)).toEqual(['kube-system_site-settings__ConfigMap'])
    for (const obj of await readObjects(env.kc, CILIUM_LIKE_REFS)) {
      expect(obj?.metadata?.annotations?.[OWNING_INVENTORY_ANNOTATION]).toBeUndefined()
      expect(obj?.metadata?.managedFields?.map((f) => f.manager)).not.toContain('talos')
    }

    const again = await handOverCiliumFromTalos(env.kube, access)
    expect(again).toEqual({patchedNodes: [], inventory: {inventoryExists: true, removedEntries: []}, talosFieldsToHelm: []})
  })

  it('talosctl upgrade-k8s with prune leaves every Cilium object exactly as it was', async () => {
    const before = fingerprint(await readObjects(env.kc, CILIUM_LIKE_REFS))
    expect(before.every(Boolean)).toBe(true)
    await upgradeK8s(env)
    expect(fingerprint(await readObjects(env.kc, CILIUM_LIKE_REFS))).toEqual(before)
    expect(await isCiliumInTalosInventory(env.kube)).toBe(false)
    expect(await inventoryKeys(env.kc)).toEqual(['kube-system_site-settings__ConfigMap'])
    const status = JSON.parse(await helm(['status', 'cilium', '--namespace', 'kube-system', '--output', 'json'], env.cp.kubeconfigPath)) as {version: number}
    expect(status.version).toBe(1)
  })

  it('Helm then owns the values alone: a server-side helm upgrade changes them without a conflict, and upgrade-k8s keeps them', async () => {
    await helm(['upgrade', 'cilium', env.chartDir, '--namespace', 'kube-system', '--set', 'tunnelProtocol=geneve'], env.cp.kubeconfigPath)
    await upgradeK8s(env)
    const cm = await env.kc.makeApiClient(CoreV1Api).readNamespacedConfigMap({name: 'cilium-config', namespace: 'kube-system'})
    expect(cm.data?.['tunnel-protocol']).toBe('geneve')
  })
})

describe('the same sequence without the inventory step (control: proves the test above can fail)', () => {
  let env: Env
  beforeAll(async () => {
    env = await setUp()
    await helm(['install', 'cilium', env.chartDir, '--namespace', 'kube-system', '--take-ownership'], env.cp.kubeconfigPath)
  })
  afterAll(() => tearDown(env))

  it('keeping the inline entry: upgrade-k8s rolls a Helm values change back to the bootstrap render', async () => {
    // Talos still co-owns the fields it applied: Helm 4's server-side upgrade conflicts unless forced.
    await expect(
      helm(['upgrade', 'cilium', env.chartDir, '--namespace', 'kube-system', '--set', 'tunnelProtocol=geneve'], env.cp.kubeconfigPath),
    ).rejects.toThrow(/conflict/i)
    await helm(['upgrade', 'cilium', env.chartDir, '--namespace', 'kube-system', '--set', 'tunnelProtocol=geneve', '--force-conflicts'], env.cp.kubeconfigPath)
    const core = env.kc.makeApiClient(CoreV1Api)
    const changed = await core.readNamespacedConfigMap({name: 'cilium-config', namespace: 'kube-system'})
    expect(changed.data?.['tunnel-protocol']).toBe('geneve')
    await upgradeK8s(env)
    const cm = await core.readNamespacedConfigMap({name: 'cilium-config', namespace: 'kube-system'})
    expect(cm.data?.['tunnel-protocol']).toBe('vxlan')
  })

  it('removing only the inline entry: upgrade-k8s prunes every Cilium object', async () => {
    const access = {talosconfig: env.cluster.talosconfig, controlPlanes: [CONTROL_PLANE_IP]}
    expect(await removeInlineManifestFromControlPlanes(access)).toEqual([CONTROL_PLANE_IP])
    await env.sim.manifestRunsDone()
    expect(await isCiliumInTalosInventory(env.kube)).toBe(true)
    await upgradeK8s(env)
    expect(await readObjects(env.kc, CILIUM_LIKE_REFS)).toEqual(CILIUM_LIKE_REFS.map(() => undefined))
    // ... while --manifests-no-prune would have kept them: nothing left to show, the CNI is gone.
    expect(await inventoryKeys(env.kc)).toEqual(['kube-system_site-settings__ConfigMap'])
  })
})

describe('the same removal without waiting for the manifest run (control: the race the hand-over waits out is real on the harness)', () => {
  let env: Env
  beforeAll(async () => {
    env = await setUp()
    await helm(['install', 'cilium', env.chartDir, '--namespace', 'kube-system', '--take-ownership'], env.cp.kubeconfigPath)
  })
  afterAll(() => tearDown(env))

  it("an inventory edit right after the entry's removal is undone by the run the removal started, with no talosctl call after it", async () => {
    const access = {talosconfig: env.cluster.talosconfig, controlPlanes: [CONTROL_PLANE_IP]}
    expect(await removeInlineManifestFromControlPlanes(access)).toEqual([CONTROL_PLANE_IP])
    expect((await removeCiliumFromTalosInventory(env.kube)).removedEntries.sort()).toEqual(CILIUM_KEYS)
    expect(await isCiliumInTalosInventory(env.kube)).toBe(false)
    // go-kubernetes v0.2.41 configmap inventory Write: the run's copy, read before the edit, comes back.
    await expect.poll(() => isCiliumInTalosInventory(env.kube), {timeout: 15_000, interval: 100}).toBe(true)
    expect(await inventoryKeys(env.kc)).toEqual([...CILIUM_KEYS, 'kube-system_site-settings__ConfigMap'].sort())
  })
})

/** Flags of a talosctl call against one simulated node. */
const nodeArgs = (env: Env, node: string) => ['--nodes', node, '--endpoints', node, '--talosconfig', env.cluster.talosconfig]

describe('the hand-over while Talos is still running its manifest runs (two control planes, Talos 1.14)', () => {
  let env: Env
  beforeAll(async () => {
    env = await setUp({secondControlPlane: true})
    await helm(['install', 'cilium', env.chartDir, '--namespace', 'kube-system', '--take-ownership'], env.cp.kubeconfigPath)
  })
  afterAll(() => tearDown(env))

  it("waits until no control plane's manifest run lists cilium before editing the inventory, so no run writes Cilium back", async () => {
    const progress: string[] = []
    const access = {talosconfig: env.cluster.talosconfig, controlPlanes: [CONTROL_PLANE_IP, SECOND_CONTROL_PLANE_IP], settleMs: 100}
    const result = await handOverCiliumFromTalos(env.kube, {...access, progress: (m) => progress.push(m)})
    expect(result.patchedNodes).toEqual([CONTROL_PLANE_IP, SECOND_CONTROL_PLANE_IP])
    expect(result.inventory.removedEntries).toEqual(CILIUM_KEYS)
    // The wait loop really ran: the runs the removal started were still going when ichor first asked.
    expect(progress).toContainEqual(expect.stringMatching(/^waiting for Talos's manifest run on /))
    // The hand-over returned only after every run the removal started had written.
    const status = await env.sim.run(['get', 'manifeststatus', '--output', 'yaml', ...nodeArgs(env, SECOND_CONTROL_PLANE_IP)])
    expect(status.exitCode, status.stderr).toBe(0)
    expect(status.stdout).toContain('99-site')
    expect(status.stdout).not.toContain('99-cilium')
    expect(await inventoryKeys(env.kc)).toEqual(['kube-system_site-settings__ConfigMap'])
    expect(await talosHandoverPending(env.kube, access)).toEqual({inlineManifestOn: [], manifestRunOn: [], inInventory: false, managedByTalos: []})
  })

  it('a late Talos write that brings Cilium back is what the probe reports, and the next run removes it again', async () => {
    const access = {talosconfig: env.cluster.talosconfig, controlPlanes: [CONTROL_PLANE_IP, SECOND_CONTROL_PLANE_IP], settleMs: 100}
    // What a run that read the inventory before the edit writes: the whole old list, unconditionally.
    const core = env.kc.makeApiClient(CoreV1Api)
    await core.replaceNamespacedConfigMap({
      ...TALOS_INVENTORY,
      body: {metadata: {...TALOS_INVENTORY}, data: Object.fromEntries([...CILIUM_KEYS, 'kube-system_site-settings__ConfigMap'].map((k) => [k, '']))},
    })
    expect(await talosHandoverPending(env.kube, access)).toMatchObject({inInventory: true})
    const again = await handOverCiliumFromTalos(env.kube, access)
    expect(again.inventory.removedEntries).toEqual(CILIUM_KEYS)
    expect(await inventoryKeys(env.kc)).toEqual(['kube-system_site-settings__ConfigMap'])
  })
})

describe('Talos 1.12 (no inventory): the hand-over strips the field manager talos, so a values change can drop a field', () => {
  let env: Env
  const release = () => ({release: 'cilium', namespace: 'kube-system', chartPath: env.chartDir, kubeconfig: env.cp.kubeconfigPath, wait: false})
  const kubeProxyReplacementKey = async () =>
    (await env.kc.makeApiClient(CoreV1Api).readNamespacedConfigMap({name: 'cilium-config', namespace: 'kube-system'})).data?.['kube-proxy-replacement']
  beforeAll(async () => {
    env = await setUp({talosVersion: 'v1.12.11'})
    // Adopted as ichor adopts: Helm 4 server-side, --take-ownership --force-conflicts.
    await helmInstall({...release(), values: {}, takeOwnership: true})
  })
  afterAll(() => tearDown(env))

  it('before the hand-over, talos keeps a field a server-side upgrade no longer renders (the defect)', async () => {
    expect(await inventoryKeys(env.kc).catch(() => 'none')).toBe('none')
    for (const obj of await readObjects(env.kc, CILIUM_LIKE_REFS)) expect(obj?.metadata?.managedFields?.map((f) => f.manager)).toContain('talos')
    await helmUpgrade({...release(), values: {kubeProxyReplacement: false}, rollbackOnFailure: false})
    expect(await kubeProxyReplacementKey()).toBe('true')
    await helmUpgrade({...release(), values: {}, rollbackOnFailure: false})
  })

  it('after the hand-over no object of the release lists talos, and the same values change removes the field', async () => {
    const access = {talosconfig: env.cluster.talosconfig, controlPlanes: [CONTROL_PLANE_IP], settleMs: 100}
    expect((await talosHandoverPending(env.kube, access)).managedByTalos).toHaveLength(CILIUM_LIKE_REFS.length)
    const result = await handOverCiliumFromTalos(env.kube, access)
    expect(result.patchedNodes).toEqual([CONTROL_PLANE_IP])
    expect(result.inventory).toEqual({inventoryExists: false, removedEntries: []})
    expect(result.talosFieldsToHelm).toHaveLength(CILIUM_LIKE_REFS.length)
    for (const obj of await readObjects(env.kc, CILIUM_LIKE_REFS)) expect(obj?.metadata?.managedFields?.map((f) => f.manager)).not.toContain('talos')
    expect(await talosHandoverPending(env.kube, access)).toEqual({inlineManifestOn: [], manifestRunOn: [], inInventory: false, managedByTalos: []})

    await helmUpgrade({...release(), values: {kubeProxyReplacement: false}, rollbackOnFailure: false})
    expect(await kubeProxyReplacementKey()).toBeUndefined()
    const cm = await env.kc.makeApiClient(CoreV1Api).readNamespacedConfigMap({name: 'cilium-config', namespace: 'kube-system'})
    expect(cm.data?.['tunnel-protocol']).toBe('vxlan')
  })
})

// Issue 38 point 4: Helm 3's adoption of objects identical to the bootstrap's patches nothing, so
// the fields Talos applied must reach Helm's manager, or Helm 4's first server-side upgrade keeps
// what its render dropped. The hand-over patches each object once; a run stopped between two
// objects (here: only the DaemonSet handed over) is finished by the next run.
describe('Talos 1.14, adopted by Helm 3: the hand-over gives the fields of talos to "helm", also when a stopped run is run again', () => {
  let env: Env
  const release = () => ({release: 'cilium', namespace: 'kube-system', chartPath: env.chartDir, kubeconfig: env.cp.kubeconfigPath, wait: false})
  const withHelm = async <T>(major: 3 | 4, fn: () => Promise<T>): Promise<T> => {
    const before = process.env.ICHOR_HELM
    process.env.ICHOR_HELM = testHelmPath(major)
    try {
      return await fn()
    } finally {
      process.env.ICHOR_HELM = before
    }
  }
  const refs = CILIUM_LIKE_REFS.map((r) => ({
    apiVersion: r.apiVersion,
    kind: r.kind,
    name: r.metadata.name,
    namespace: 'namespace' in r.metadata ? r.metadata.namespace : undefined,
  }))
  const entries = async () => (await readObjects(env.kc, CILIUM_LIKE_REFS)).map((o) => o?.metadata?.managedFields ?? [])
  const kubeProxyReplacementKey = async () =>
    (await env.kc.makeApiClient(CoreV1Api).readNamespacedConfigMap({name: 'cilium-config', namespace: 'kube-system'})).data?.['kube-proxy-replacement']
  beforeAll(async () => {
    env = await setUp()
    await withHelm(3, () => helmInstall({...release(), values: {}, takeOwnership: true}))
  })
  afterAll(() => tearDown(env))

  it('every field talos owned is in the Apply entry of "helm" once; a Helm 4 upgrade then drops a field, and a Helm 3 upgrade puts it back', async () => {
    const talosPaths = (await entries()).map((list) => [...fieldPaths(list.find((f) => f.manager === 'talos')?.fieldsV1 as never)].sort())
    for (const paths of talosPaths) expect(paths.length).toBeGreaterThan(0)
    expect(
      await handOverObjectFields(
        env.kube,
        refs.find((r) => r.kind === 'DaemonSet')!,
      ),
    ).toBe(true)

    const access = {talosconfig: env.cluster.talosconfig, controlPlanes: [CONTROL_PLANE_IP], settleMs: 100}
    await handOverCiliumFromTalos(env.kube, access)
    expect(await talosHandoverPending(env.kube, access)).toMatchObject({inInventory: false, managedByTalos: []})
    // The inventory's annotation is gone from the objects, so from helm's set; everything else talos owned is helm's.
    const annotation = `/f:metadata/f:annotations/f:${OWNING_INVENTORY_ANNOTATION}`
    const helmApply = (await entries()).map((list) => list.filter((f) => f.manager === 'helm' && f.operation === 'Apply'))
    expect.soft(helmApply.map((list) => list.length)).toEqual(refs.map(() => 1))
    expect
      .soft(helmApply.map((list) => [...fieldPaths(list[0]?.fieldsV1 as never)].sort()))
      .toEqual(talosPaths.map((paths) => paths.filter((p) => p !== annotation)))

    await withHelm(4, () => helmUpgrade({...release(), values: {kubeProxyReplacement: false}, rollbackOnFailure: false}))
    expect(await kubeProxyReplacementKey()).toBeUndefined()
    await withHelm(3, () => helmUpgrade({...release(), values: {}, rollbackOnFailure: false}))
    expect(await kubeProxyReplacementKey()).toBe('true')
  })
})
