// The product's talosctl wrapper against the Talos node simulator (no apiserver needed:
// nothing here reaches bootstrap).
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {
  applyConfig,
  findTalosctl,
  genConfig,
  genSecrets,
  getMachineConfig,
  isReachable,
  patchMachineConfig,
  TalosctlError,
} from '../../src/lib/talos/talosctl.js'
import {startSimulatedNodes, type SimulatedNodes} from '../sim/simulated-nodes.js'
import {CONTROL_PLANE_IP, WORKER_IP, inlineManifestsPatch} from '../sim/talos-fixtures.js'

describe('talosctl wrapper on simulated nodes', () => {
  let sim: SimulatedNodes
  let configs: Awaited<ReturnType<typeof genConfig>>
  beforeAll(async () => {
    sim = startSimulatedNodes([
      {ip: CONTROL_PLANE_IP, role: 'controlplane', talosVersion: 'v1.14.1'},
      {ip: WORKER_IP, role: 'worker', talosVersion: 'v1.14.1'},
    ])
    const secrets = join(sim.workDir, 'secrets.yaml')
    await genSecrets(secrets)
    configs = await genConfig({
      clusterName: 'w',
      endpoint: `https://${CONTROL_PLANE_IP}:6443`,
      secretsPath: secrets,
      talosVersion: 'v1.14.1',
      kubernetesVersion: '1.36.3',
      controlPlanePatch: inlineManifestsPatch('v1.14.1', [{name: 'cilium', contents: 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n'}]),
      outDir: join(sim.workDir, 'configs'),
    })
  })
  afterAll(() => sim.cleanup())

  it('never overwrites a Talos secrets bundle', async () => {
    await expect(genSecrets(join(sim.workDir, 'secrets.yaml'))).rejects.toThrow(/refusing to overwrite/)
  })

  it('tells maintenance, configured and unreachable nodes apart', async () => {
    expect(await isReachable(CONTROL_PLANE_IP)).toEqual({node: CONTROL_PLANE_IP, state: 'maintenance'})
    const unknown = await isReachable('127.0.0.99')
    expect(unknown.state).toBe('unreachable')
    expect(unknown.message).toMatch(/connection refused/)
    await applyConfig({node: CONTROL_PLANE_IP, file: configs.controlPlane, insecure: true})
    expect((await isReachable(CONTROL_PLANE_IP)).state).toBe('configured')
    expect(await isReachable(CONTROL_PLANE_IP, {talosconfig: configs.talosconfig})).toEqual({node: CONTROL_PLANE_IP, state: 'configured', ours: true})
  })

  // Issue 12 point 11: a configured node speaks mutual TLS with its own bundle only (apid).
  it('a configured node refuses the talosconfig of another secrets bundle: configured, not ours', async () => {
    const secrets = join(sim.workDir, 'other-secrets.yaml')
    await genSecrets(secrets)
    const other = await genConfig({
      clusterName: 'w',
      endpoint: `https://${CONTROL_PLANE_IP}:6443`,
      secretsPath: secrets,
      talosVersion: 'v1.14.1',
      kubernetesVersion: '1.36.3',
      outDir: join(sim.workDir, 'other'),
    })
    const r = await isReachable(CONTROL_PLANE_IP, {talosconfig: other.talosconfig})
    expect(r).toMatchObject({node: CONTROL_PLANE_IP, state: 'configured', ours: false})
    expect(r.message).toMatch(/x509: certificate signed by unknown authority/)
    await expect(getMachineConfig({node: CONTROL_PLANE_IP, talosconfig: other.talosconfig})).rejects.toThrow(/unknown authority/)
  })

  it('names the node and carries talosctl message on failure', async () => {
    const error = await applyConfig({node: WORKER_IP, file: configs.controlPlane, insecure: true}).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(TalosctlError)
    expect((error as TalosctlError).message).toMatch(new RegExp(`on node ${WORKER_IP.replaceAll('.', '\\.')} failed: .*worker`))
  })

  it('reads and patches the machine config, $patch: delete included', async () => {
    expect(await getMachineConfig({node: CONTROL_PLANE_IP, talosconfig: configs.talosconfig})).toContain('kind: KubeInlineManifestConfig')
    await patchMachineConfig({
      node: CONTROL_PLANE_IP,
      talosconfig: configs.talosconfig,
      mode: 'no-reboot',
      patch: 'apiVersion: v1alpha1\nkind: KubeInlineManifestConfig\nname: cilium\n$patch: delete\n---\nmachine:\n  network:\n    hostname: cp-1\n',
    })
    const config = await getMachineConfig({node: CONTROL_PLANE_IP, talosconfig: configs.talosconfig})
    expect(config).not.toContain('KubeInlineManifestConfig')
    expect(config).toContain('hostname: cp-1')
  })

  it('fails with a clear message when talosctl is missing', async () => {
    const saved = process.env.ICHOR_TALOSCTL
    process.env.ICHOR_TALOSCTL = join(sim.workDir, 'no-such-talosctl')
    try {
      // Found missing on disk, without a spawn (issue 11).
      await expect(findTalosctl()).rejects.toThrow(/^talosctl not found: ICHOR_TALOSCTL=\S*no-such-talosctl \(\S*no-such-talosctl does not exist\)$/)
    } finally {
      process.env.ICHOR_TALOSCTL = saved
    }
  })
})
