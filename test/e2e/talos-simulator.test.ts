// The Talos node simulator applies inline manifests the way each Talos version does
// (src/lib/talos/INVENTORY.md). Real: kube-apiserver + etcd. Simulated: the Talos nodes.
import {existsSync, readFileSync, writeFileSync} from 'node:fs'
import {connect} from 'node:net'
import {join} from 'node:path'
import {CoreV1Api, type KubeConfig} from '@kubernetes/client-node'
import {parse} from 'yaml'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {startApiProxy, type ApiProxy} from '../harness/api-proxy.js'
import {startControlPlane, type ControlPlane} from '../harness/apiserver.js'
import {loadKubeConfig} from '../harness/kube.js'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {waitForApiServer} from '../../src/lib/kube/wait.js'
import {parseUpgradeK8sDryRun} from '../../src/lib/kubernetes/policy.js'
import {handOverCiliumFromTalos} from '../../src/lib/talos/handover.js'
import {OWNING_INVENTORY_ANNOTATION, TALOS_INVENTORY} from '../../src/lib/talos/inventory.js'
import {applyConfig, getMachineConfig} from '../../src/lib/talos/talosctl.js'
import {startSimulatedNodes, type SimulatedNodes} from '../sim/simulated-nodes.js'
import {CONTROL_PLANE_IP, bootstrapSimulatedCluster, inlineManifestsPatch, type BootstrappedCluster} from '../sim/talos-fixtures.js'

const configMap = (name: string, value: string) => `apiVersion: v1
kind: ConfigMap
metadata:
  name: ${name}
  namespace: kube-system
data:
  value: "${value}"
`

interface Env {
  cp: ControlPlane
  sim: SimulatedNodes
  cluster: BootstrappedCluster
  kc: KubeConfig
  /** src/lib/kube's connection, which the hand-over takes. */
  kube: Kube
}

async function setUp(talosVersion: string, contents: string): Promise<Env> {
  const cp = await startControlPlane()
  const sim = startSimulatedNodes([{ip: CONTROL_PLANE_IP, role: 'controlplane', talosVersion}], {kubeconfigPath: cp.kubeconfigPath})
  const cluster = await bootstrapSimulatedCluster(sim, {talosVersion, manifests: [{name: 'app', contents}]})
  return {cp, sim, cluster, kc: loadKubeConfig(cluster.kubeconfigPath), kube: await connectKube({kubeconfig: cluster.kubeconfigPath})}
}

/** "Edit all control plane machine configurations": the inline manifest replaced by `contents`. */
async function changeInlineManifest(env: Env, talosVersion: string, contents: string): Promise<void> {
  const dropOld =
    talosVersion >= 'v1.14'
      ? `apiVersion: v1alpha1\nkind: KubeInlineManifestConfig\nname: app\n$patch: delete\n`
      : `cluster:\n  inlineManifests:\n    - name: app\n      $patch: delete\n`
  let r = await patchNode(env, dropOld)
  expect(r.exitCode, r.stderr).toBe(0)
  const file = join(env.sim.workDir, 'new-manifest.yaml')
  writeFileSync(file, inlineManifestsPatch(talosVersion, [{name: 'app', contents}]))
  r = await patchNode(env, `@${file}`)
  expect(r.exitCode, r.stderr).toBe(0)
  // The manifest runs the changes started end in the background, on their own timer.
  await env.sim.manifestRunsDone()
  expect(await manifestsApplied(env)).toEqual(['99-app'])
}

/** `talosctl patch machineconfig --mode no-reboot` on the control plane ("@FILE" or the patch itself). */
function patchNode(env: Env, patch: string) {
  return env.sim.run(['patch', 'machineconfig', '--nodes', CONTROL_PLANE_IP, '--talosconfig', env.cluster.talosconfig, '--mode', 'no-reboot', '--patch', patch])
}

/** `talosctl get manifeststatus`: the manifest ids of the control plane's last finished run. */
async function manifestsApplied(env: Env): Promise<string[]> {
  const r = await env.sim.run(['get', 'manifeststatus', '--output', 'yaml', '--nodes', CONTROL_PLANE_IP, '--talosconfig', env.cluster.talosconfig])
  expect(r.exitCode, r.stderr).toBe(0)
  return (parse(r.stdout) as {spec?: {manifestsApplied?: string[]}} | null)?.spec?.manifestsApplied ?? []
}

async function upgradeK8s(env: Env, extra: string[] = []): Promise<void> {
  const r = await env.sim.run(['upgrade-k8s', '--to', '1.36.3', '--nodes', CONTROL_PLANE_IP, '--talosconfig', env.cluster.talosconfig, ...extra])
  expect(r.exitCode, r.stderr).toBe(0)
}

async function readValue(kc: KubeConfig, name: string): Promise<string | undefined> {
  try {
    const cm = await kc.makeApiClient(CoreV1Api).readNamespacedConfigMap({name, namespace: 'kube-system'})
    return cm.data?.value
  } catch (error) {
    if ((error as {code?: number}).code === 404) return undefined
    throw error
  }
}

async function inventory(kc: KubeConfig): Promise<string[] | undefined> {
  try {
    const cm = await kc.makeApiClient(CoreV1Api).readNamespacedConfigMap(TALOS_INVENTORY)
    return Object.keys(cm.data ?? {}).sort()
  } catch (error) {
    if ((error as {code?: number}).code === 404) return undefined
    throw error
  }
}

describe('Talos node simulator, Talos v1.12 (before the inventory): create-only', () => {
  const V = 'v1.12.11'
  let env: Env
  beforeAll(async () => {
    env = await setUp(V, configMap('one', '1') + '---\n' + configMap('two', '1'))
  })
  afterAll(async () => {
    env?.sim.cleanup()
    await env?.cp.stop()
  })

  it('creates the objects with field manager talos, no inventory, no annotation', async () => {
    expect(await readValue(env.kc, 'one')).toBe('1')
    expect(await inventory(env.kc)).toBeUndefined()
    const cm = await env.kc.makeApiClient(CoreV1Api).readNamespacedConfigMap({name: 'one', namespace: 'kube-system'})
    expect(cm.metadata?.annotations?.[OWNING_INVENTORY_ANNOTATION]).toBeUndefined()
    expect(cm.metadata?.managedFields?.map((f) => f.manager)).toEqual(['talos'])
  })

  it('a changed inline manifest does not update the object on the node', async () => {
    await changeInlineManifest(env, V, configMap('one', '2'))
    expect(await getMachineConfig({node: CONTROL_PLANE_IP, talosconfig: env.cluster.talosconfig})).toContain('"2"')
    expect(await readValue(env.kc, 'one')).toBe('1')
  })

  it('upgrade-k8s --dry-run prints the legacy SyncWithLog lines, changes nothing, and ichor reads the replacement', async () => {
    // talosctl v1.14.1 talos_managed.go syncManifests -> go-kubernetes v0.2.41 manifests.SyncWithLog.
    const r = await env.sim.run(['upgrade-k8s', '--to', '1.36.3', '--dry-run', '--nodes', CONTROL_PLANE_IP, '--talosconfig', env.cluster.talosconfig])
    expect(r.exitCode, r.stderr).toBe(0)
    const sync = r.stdout.slice(r.stdout.indexOf('\nupdating manifests\n'))
    expect(sync).toMatch(
      / > processing manifest v1\.ConfigMap\/kube-system\/one\n--- a\/v1\.ConfigMap\/kube-system\/one\n[^]*?\+ {2}value: "2"\n(?:[^]*?\n)?\n < dry run, change skipped$/m,
    )
    expect(r.stdout).not.toContain('updating manifests (dry run)')
    expect(r.stdout).not.toMatch(/^ < (Pruned|created|configured|unchanged) /m)
    expect(await readValue(env.kc, 'one')).toBe('1')
    expect(parseUpgradeK8sDryRun(r.stdout)).toContainEqual({action: 'replaced', kind: 'ConfigMap', namespace: 'kube-system', name: 'one'})
  })

  it('upgrade-k8s (legacy sync) updates changed objects but never prunes', async () => {
    await upgradeK8s(env)
    expect(await readValue(env.kc, 'one')).toBe('2')
    expect(await readValue(env.kc, 'two')).toBe('1')
  })

  it('the hand-over has no inventory step on such a cluster', async () => {
    const result = await handOverCiliumFromTalos(env.kube, {talosconfig: env.cluster.talosconfig, controlPlanes: [CONTROL_PLANE_IP], name: 'app'})
    expect(result).toEqual({patchedNodes: [CONTROL_PLANE_IP], inventory: {inventoryExists: false, removedEntries: []}, talosFieldsToHelm: []})
    expect(await manifestsApplied(env)).toEqual([])
  })
})

describe('Talos node simulator, Talos v1.13 (inventory): create-only on the node, upgrade-k8s re-applies and prunes', () => {
  const V = 'v1.13.0'
  let env: Env
  beforeAll(async () => {
    env = await setUp(V, configMap('one', '1') + '---\n' + configMap('two', '1'))
  })
  afterAll(async () => {
    env?.sim.cleanup()
    await env?.cp.stop()
  })

  it('records each object in the inventory and annotates it', async () => {
    expect(await inventory(env.kc)).toEqual(['kube-system_one__ConfigMap', 'kube-system_two__ConfigMap'])
    const cm = await env.kc.makeApiClient(CoreV1Api).readNamespacedConfigMap({name: 'one', namespace: 'kube-system'})
    expect(cm.metadata?.annotations?.[OWNING_INVENTORY_ANNOTATION]).toBe('talos-bootstrap-manifests-inventory')
    expect(cm.metadata?.managedFields?.find((f) => f.manager === 'talos')?.operation).toBe('Apply')
  })

  it('a changed inline manifest without "two" changes nothing until upgrade-k8s', async () => {
    await changeInlineManifest(env, V, configMap('one', '2'))
    expect(await readValue(env.kc, 'one')).toBe('1')
    expect(await readValue(env.kc, 'two')).toBe('1')
  })

  it('upgrade-k8s --manifests-no-prune re-applies but keeps the removed object', async () => {
    await upgradeK8s(env, ['--manifests-no-prune'])
    expect(await readValue(env.kc, 'one')).toBe('2')
    expect(await readValue(env.kc, 'two')).toBe('1')
    expect(await inventory(env.kc)).toEqual(['kube-system_one__ConfigMap', 'kube-system_two__ConfigMap'])
  })

  it('upgrade-k8s prunes the object no longer in the inline manifests', async () => {
    await upgradeK8s(env)
    expect(await readValue(env.kc, 'two')).toBeUndefined()
    expect(await readValue(env.kc, 'one')).toBe('2')
    expect(await inventory(env.kc)).toEqual(['kube-system_one__ConfigMap'])
  })

  it('an object already there before bootstrap-time apply is backfilled into the inventory, not touched', async () => {
    const core = env.kc.makeApiClient(CoreV1Api)
    await core.createNamespacedConfigMap({namespace: 'kube-system', body: {metadata: {name: 'three', namespace: 'kube-system'}, data: {value: 'mine'}}})
    await changeInlineManifest(env, V, configMap('one', '2') + '---\n' + configMap('three', 'talos'))
    expect(await readValue(env.kc, 'three')).toBe('mine')
    expect(await inventory(env.kc)).toEqual(['kube-system_one__ConfigMap', 'kube-system_three__ConfigMap'])
  })

  it('a config change starts a manifest run that writes back the inventory copy it read: an edit made before it finished is lost', async () => {
    // go-kubernetes v0.2.41 configmap inventory Write: an Update without resourceVersion.
    const drop = `cluster:\n  inlineManifests:\n    - name: app\n      $patch: delete\n`
    const dropped = await patchNode(env, drop)
    expect(dropped.exitCode, dropped.stderr).toBe(0)
    await env.sim.manifestRunsDone()
    expect(await manifestsApplied(env)).toEqual([])
    const before = await inventory(env.kc)
    const file = join(env.sim.workDir, 'with-four.yaml')
    writeFileSync(
      file,
      inlineManifestsPatch(V, [{name: 'app', contents: configMap('one', '2') + '---\n' + configMap('three', 'talos') + '---\n' + configMap('four', '1')}]),
    )
    const r = await patchNode(env, `@${file}`)
    expect(r.exitCode, r.stderr).toBe(0)
    expect(await readValue(env.kc, 'four')).toBe('1') // the objects are applied at once
    // Someone edits the inventory while the run is still going ...
    const core = env.kc.makeApiClient(CoreV1Api)
    await core.replaceNamespacedConfigMap({...TALOS_INVENTORY, body: {metadata: {...TALOS_INVENTORY}, data: {'kube-system_four__ConfigMap': ''}}})
    // ... and the run's write, when it ends, restores its own copy.
    await env.sim.manifestRunsDone()
    expect(await manifestsApplied(env)).toEqual(['99-app'])
    expect(await inventory(env.kc)).toEqual([...before!, 'kube-system_four__ConfigMap'].sort())
  })

  it('apply-config with --insecure is refused once the node is configured', async () => {
    await expect(applyConfig({node: CONTROL_PLANE_IP, file: env.cluster.controlPlaneConfig, insecure: true})).rejects.toThrow(
      /127\.0\.0\.11.*certificate required/,
    )
  })
})

describe('Talos node simulator, Talos v1.14: a manifest run ends on its own timer, not at the next talosctl command', () => {
  const V = 'v1.14.1'
  let env: Env
  beforeAll(async () => {
    env = await setUp(V, configMap('one', '1'))
  })
  afterAll(async () => {
    env?.sim.cleanup()
    await env?.cp.stop()
  })

  it('the node answers while the run is going (status of the previous run), and the run writes back the inventory copy it read with no talosctl command after it', async () => {
    const before = await inventory(env.kc)
    expect(before).toEqual(['kube-system_one__ConfigMap'])
    const drop = `apiVersion: v1alpha1\nkind: KubeInlineManifestConfig\nname: app\n$patch: delete\n`
    const r = await patchNode(env, drop)
    expect(r.exitCode, r.stderr).toBe(0)
    // manifest_apply.go (v1.14.1) sets ManifestStatus only after the run: the next command still sees the last one.
    expect(await manifestsApplied(env)).toEqual(['99-app'])
    // An edit made while the run holds its copy ...
    await env.kc.makeApiClient(CoreV1Api).replaceNamespacedConfigMap({...TALOS_INVENTORY, body: {metadata: {...TALOS_INVENTORY}, data: {}}})
    expect(await inventory(env.kc)).toEqual([])
    // ... is overwritten by the run on its own, through the API server only (no talosctl call here).
    await expect.poll(() => inventory(env.kc), {timeout: 15_000, interval: 100}).toEqual(before)
    expect(await manifestsApplied(env)).toEqual([])
  })

  it('a run whose inventory write fails is run again from a fresh read, as Talos restarts a failed controller', async () => {
    const drop = `apiVersion: v1alpha1\nkind: KubeInlineManifestConfig\nname: app\n$patch: delete\n`
    const dropped = await patchNode(env, drop)
    expect(dropped.exitCode, dropped.stderr).toBe(0)
    await env.sim.manifestRunsDone()
    expect(await manifestsApplied(env)).toEqual([])
    const file = join(env.sim.workDir, 'app-back.yaml')
    writeFileSync(file, inlineManifestsPatch(V, [{name: 'app', contents: configMap('one', '1')}]))
    process.env.TALOS_SIM_MANIFEST_RUN_MS = '3000' // time to break the run's write before it comes
    try {
      const r = await patchNode(env, `@${file}`)
      expect(r.exitCode, r.stderr).toBe(0)
    } finally {
      delete process.env.TALOS_SIM_MANIFEST_RUN_MS
    }
    // go-kubernetes' inventory Write is an Update: on a deleted ConfigMap it fails (404).
    await env.kc.makeApiClient(CoreV1Api).deleteNamespacedConfigMap(TALOS_INVENTORY)
    const log = join(env.sim.stateDir, `manifest-runner-${CONTROL_PLANE_IP}.log`)
    await expect.poll(() => existsSync(log) && readFileSync(log, 'utf8'), {timeout: 15_000, interval: 100}).toMatch(/404|not found/i)
    // The next run reads afresh (creating the inventory), applies and records its status.
    await expect.poll(() => manifestsApplied(env), {timeout: 15_000, interval: 200}).toEqual(['99-app'])
    await expect.poll(() => inventory(env.kc), {timeout: 5000, interval: 100}).toEqual(['kube-system_one__ConfigMap'])
  })
})

describe('the API server through the harness proxy: refused until `talosctl bootstrap`, as on Talos', () => {
  let cp: ControlPlane
  let sim: SimulatedNodes
  let proxy: ApiProxy
  const saved = process.env.TALOS_SIM_CLIENT_KUBECONFIG
  beforeAll(async () => {
    cp = await startControlPlane()
    sim = startSimulatedNodes([{ip: CONTROL_PLANE_IP, role: 'controlplane', talosVersion: 'v1.14.1'}], {kubeconfigPath: cp.kubeconfigPath})
    proxy = await startApiProxy({kubeconfigPath: cp.kubeconfigPath, simState: sim.stateDir, outDir: sim.workDir, delayMs: 6000})
    process.env.TALOS_SIM_CLIENT_KUBECONFIG = proxy.kubeconfigPath
  })
  afterAll(async () => {
    if (saved === undefined) delete process.env.TALOS_SIM_CLIENT_KUBECONFIG
    else process.env.TALOS_SIM_CLIENT_KUBECONFIG = saved
    await proxy?.stop()
    sim?.cleanup()
    await cp?.stop()
  })

  it("refuses before bootstrap; the kubeconfig talosctl hands out names the proxy, and ichor's API-server wait sees it refused, then ready", async () => {
    const refused = await new Promise<string>((resolve) => {
      const s = connect(Number(new URL(proxy.server).port), '127.0.0.1')
      s.on('connect', () => (s.destroy(), resolve('connected')))
      s.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message))
    })
    expect(refused).toBe('ECONNREFUSED')
    const cluster = await bootstrapSimulatedCluster(sim, {talosVersion: 'v1.14.1', manifests: [{name: 'app', contents: configMap('one', '1')}]})
    expect((parse(readFileSync(cluster.kubeconfigPath, 'utf8')) as {clusters: Array<{cluster: {server: string}}>}).clusters[0]!.cluster.server).toBe(
      proxy.server,
    )
    const states: string[] = []
    await waitForApiServer(await connectKube({kubeconfig: cluster.kubeconfigPath, probe: false}), {
      timeoutMs: 30_000,
      intervalMs: 200,
      onProgress: (s) => states.push(s),
    })
    expect(states[0]).toMatch(/ECONNREFUSED|refused|reach/i)
    expect(states.at(-1)).toBe('readyz answered 200')
  })
})

describe('a background manifest run never outlives its test', () => {
  let env: Env
  beforeAll(async () => {
    env = await setUp('v1.14.1', configMap('one', '1'))
  })
  afterAll(async () => {
    env?.sim.cleanup()
    await env?.cp.stop()
  })

  it('it survives the talosctl call that started it, and cleanup() kills it', async () => {
    // A run long enough to still be going when cleanup() comes.
    process.env.TALOS_SIM_MANIFEST_RUN_MS = '60000'
    try {
      const drop = `apiVersion: v1alpha1\nkind: KubeInlineManifestConfig\nname: app\n$patch: delete\n`
      const r = await patchNode(env, drop)
      expect(r.exitCode, r.stderr).toBe(0)
    } finally {
      delete process.env.TALOS_SIM_MANIFEST_RUN_MS
    }
    const pid = Number(readFileSync(join(env.sim.stateDir, `manifest-runner-${CONTROL_PLANE_IP}.pid`), 'utf8'))
    const alive = () => existsSync(`/proc/${pid}`)
    expect(alive()).toBe(true)
    expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')).toContain(env.sim.stateDir)
    env.sim.cleanup()
    await expect.poll(alive, {timeout: 5000, interval: 50}).toBe(false)
  })
})
