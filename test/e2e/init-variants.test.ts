// ichor init on an older Talos contract (v1.12: legacy cluster.inlineManifests, create-only
// manifests, no inventory) with kube-proxy kept, and a live --dry-run that only probes; with
// the Kokumi 0.17 manifest FIXTURE (Order CRD with spec.promotion.mode) instead of the real 0.14.0.
// Harness as in init.test.ts (real apiserver, helm, registry, talosctl; simulated nodes).
import {existsSync, readFileSync} from 'node:fs'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {connectKube} from '../../src/lib/kube/client.js'
import {getObject, type KubeObject} from '../../src/lib/kube/objects.js'
import {CONTROL_PLANE, WORKER, runIchor, startHarnessCluster, type HarnessCluster, jsonEvents} from '../harness/cluster.js'
import {canonicalDump, nodeConfig} from '../harness/dump.js'

describe('ichor init on Talos v1.12 with kube-proxy kept, Kokumi 0.17 fixture', () => {
  let h: HarnessCluster
  beforeAll(async () => {
    h = await startHarnessCluster({talosVersion: 'v1.12.6', kokumi: 'fixture-0.17'})
  }, 600_000)
  afterAll(async () => h?.stop())

  it('a live --dry-run on fresh nodes only probes: everything would run, nothing is touched', async () => {
    const r = await runIchor([...h.initArgs, '--kube-proxy', 'kube-proxy', '--dry-run', '--json'], h.env)
    const tasks = jsonEvents(r).filter((e) => e.event === 'task' && e.title)
    expect(r.code, r.stderr).toBe(0)
    expect(tasks.filter((t) => t.status === 'would-run').map((t) => t.id)).toEqual(
      expect.arrayContaining(['talos-secrets', 'apply-configs', 'bootstrap-etcd', 'adopt-cilium', 'orders']),
    )
    expect(tasks.filter((t) => t.status === 'done')).toEqual([])
    expect(existsSync(join(h.nodes.stateDir, 'bootstrapped'))).toBe(false)
    expect(existsSync(join(h.stateDir, 'secrets.yaml'))).toBe(false)
  })

  it('converges with the legacy inline-manifest form, removes the entry, and a rerun changes nothing', async () => {
    const first = await runIchor([...h.initArgs, '--kube-proxy', 'kube-proxy', '--json'], h.env)
    expect(first.code, `${first.stderr}\n${first.stdout.slice(-2000)}`).toBe(0)
    const config = nodeConfig(h, CONTROL_PLANE)
    expect(config).not.toMatch(/inlineManifests:\s*\n\s*- name: cilium/)
    expect(config).not.toMatch(/KubeInlineManifestConfig|KubeProxyConfig/)
    expect(config).toMatch(/cni:\s*\n\s*name: none/)
    const kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
    const cm = await getObject<KubeObject & {data: Record<string, string>}>(kube, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      name: 'cilium-config',
      namespace: 'kube-system',
    })
    expect(cm?.data['kube-proxy-replacement']).toBe('false')
    const dump = await canonicalDump(kube, h)
    // The 0.17 fixture's Order API: promotion.mode, no autoDeploy.
    expect(dump.orders).toEqual([
      expect.objectContaining({promotion: {mode: 'Automatic'}, source: expect.objectContaining({version: expect.stringMatching(/^10\.1\.1-/)})}),
      expect.objectContaining({promotion: {mode: 'Automatic'}, source: expect.objectContaining({version: expect.stringMatching(/^0\.17\.0-/)})}),
    ])
    expect(dump.release).toMatchObject({revision: 1, status: 'deployed'})
    expect(dump.inventoryKeys).toEqual([])
    const again = await runIchor([...h.initArgs, '--kube-proxy', 'kube-proxy', '--json'], h.env)
    expect(jsonEvents(again).find((e) => e.event === 'end')).toMatchObject({ok: true, changed: false})
    expect(await canonicalDump(kube, h)).toEqual(dump)
    expect(readFileSync(join(h.stateDir, 'secrets.yaml'), 'utf8')).toMatch(/cluster:/)
  }, 600_000)

  // Issue 22 point 4: below v1.14 Talos reboots for a change outside CanApplyImmediate's fields
  // (machine.env here); the simulator follows v1.12.6 v1alpha1_runtime.go.
  it('a changed worker patch Talos must reboot for: the dry run says so; refused without --allow-reboot (exit 2, nothing changed); applied with it, the worker back', async () => {
    const patch = ['--config-patch-worker', 'machine: {env: {GRPC_GO_LOG_SEVERITY_LEVEL: error}}']
    const before = nodeConfig(h, WORKER)
    const kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
    const spec = async () =>
      (
        await getObject<KubeObject & {spec: {talos: Record<string, unknown>}}>(kube, {
          apiVersion: 'ichor.maesh.dev/v1alpha1',
          kind: 'IchorInstallation',
          name: 'ichor',
        })
      )?.spec.talos
    const stored = await spec()
    const dry = await runIchor([...h.initArgs, '--kube-proxy', 'kube-proxy', ...patch, '--dry-run'], h.env)
    expect(dry.code, dry.stderr).toBe(0)
    expect(`${dry.stdout}${dry.stderr}`).toContain(`${WORKER}: needs a reboot`)
    expect(`${dry.stdout}${dry.stderr}`).toContain(`${CONTROL_PLANE}: unchanged`)
    const refused = await runIchor([...h.initArgs, '--kube-proxy', 'kube-proxy', ...patch], h.env)
    expect(refused.code, refused.stderr).toBe(2)
    expect(`${refused.stdout}${refused.stderr}`).toContain(`the changed machine config needs a reboot of ${WORKER}; nothing was changed`)
    expect(refused.stderr).toContain('rerun with --allow-reboot')
    expect(nodeConfig(h, WORKER)).toBe(before)
    expect(await spec()).toEqual(stored)
    const applied = await runIchor([...h.initArgs, '--kube-proxy', 'kube-proxy', ...patch, '--allow-reboot', '--json'], h.env)
    expect(applied.code, applied.stderr.slice(-3000)).toBe(0)
    expect(nodeConfig(h, WORKER)).toContain('GRPC_GO_LOG_SEVERITY_LEVEL: error')
    expect(await spec()).toMatchObject({machineConfig: {workerPatches: [{source: 'inline'}]}})
    const again = await runIchor([...h.initArgs, '--kube-proxy', 'kube-proxy', '--json'], h.env)
    expect(
      jsonEvents(again).find((e) => e.event === 'end'),
      again.stderr.slice(-2000),
    ).toMatchObject({ok: true, changed: false})
  }, 600_000)
})
