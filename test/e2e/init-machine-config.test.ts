// ichor init with the operator's machine-config inputs (issue 22): install disk, installer
// image, a control-plane patch, a worker patch and a per-node hostname, on one harness cluster
// (real apiserver, helm, registry, talosctl gen/validate/machineconfig patch; SIMULATED Talos
// nodes whose `get disks` lists /dev/sda and /dev/nvme0n1). Refusals come first: each must leave
// every node in maintenance mode. Then changes on the running cluster (issue 22 point 4): a
// changed patch or installer image is applied to the running nodes (Talos v1.14 applies every
// change without a reboot), and a rerun changing the worker patch killed at every step boundary
// converges.
import {existsSync, readFileSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {connectKube} from '../../src/lib/kube/client.js'
import {getObject, type KubeObject} from '../../src/lib/kube/objects.js'
import {CONTROL_PLANE, WORKER, runIchor, startHarnessCluster, jsonEvents, type HarnessCluster} from '../harness/cluster.js'
import {canonicalDump, nodeConfig} from '../harness/dump.js'
import {killBeforeTask, taskIds} from '../harness/kill.js'
import {inlineManifestForms} from '../../src/lib/talos/handover.js'

const IMAGE = 'factory.talos.dev/metal-installer/613e1592b2da41ae5e265e8789429f22e121aab91cb4deb6bc3c0b6262961245:v1.14.1'
const IMAGE2 = 'factory.talos.dev/metal-installer/376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba:v1.14.1'
const inlineManifest = (name: string, manifest: string) =>
  `apiVersion: v1alpha1\nkind: KubeInlineManifestConfig\nname: ${name}\nmanifest: |\n${manifest.replace(/^(?=.)/gm, '  ')}`
/** The simulated nodes' NVMe disk as its udev by-id link (test/sim/talosctl-simulator.mjs disksOf). */
const NVME_BY_ID = '/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_deadbeef1'
const unattended = (match: string) => `apiVersion: v1alpha1\nkind: UnattendedInstallConfig\nprovisioning:\n  diskSelector:\n    match: '${match}'\n`
const failure = (r: {stdout: string; stderr: string}) => `${r.stderr.slice(-4000)}\n${r.stdout.slice(-2000)}`

describe('ichor init with an install disk, an installer image, role patches and a per-node hostname', () => {
  let h: HarnessCluster
  let files: {cp: string; worker: string; host: string; cni: string; bad: string; cp2: string; worker2: string; gw: string; ichors: string; flannel: string}
  const untouched = () =>
    [CONTROL_PLANE, WORKER].every(
      (ip) =>
        !existsSync(join(h.nodes.stateDir, `node-${ip}.json`)) ||
        JSON.parse(readFileSync(join(h.nodes.stateDir, `node-${ip}.json`), 'utf8')).mode === 'maintenance',
    )
  beforeAll(async () => {
    h = await startHarnessCluster()
    const write = (name: string, text: string) => {
      const path = join(h.nodes.workDir, name)
      writeFileSync(path, text)
      return path
    }
    files = {
      cp: write('cp.yaml', 'machine:\n  sysctls:\n    vm.nr_hugepages: "64"\n'),
      cp2: write('cp2.yaml', 'machine:\n  sysctls:\n    vm.nr_hugepages: "128"\n'),
      worker: write('worker.yaml', 'apiVersion: v1alpha1\nkind: KubeNodeConfig\nlabels:\n  tier: storage\n'),
      worker2: write('worker2.yaml', 'apiVersion: v1alpha1\nkind: KubeNodeConfig\nlabels:\n  tier: fast\n'),
      host: write('w1.yaml', 'apiVersion: v1alpha1\nkind: HostnameConfig\nhostname: w1\nauto: off\n'),
      cni: write('cni.yaml', 'cluster:\n  network:\n    cni:\n      name: flannel\n'),
      bad: write('bad.yaml', 'machine:\n  bogusField: 1\n'),
      // The operator's own bootstrap manifest (issue 38 point 7), ichor's name, and a second CNI.
      gw: write('gw.yaml', inlineManifest('gateway-api-crds', 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: gateway-system\n')),
      ichors: write('ichors.yaml', inlineManifest('cilium', 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: mine\n')),
      flannel: write(
        'flannel.yaml',
        inlineManifest(
          'my-cni',
          'apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: kube-flannel-ds\n  namespace: kube-flannel\nspec:\n  template:\n    spec:\n      containers:\n        - name: install-cni\n          volumeMounts: [{name: cni, mountPath: /etc/cni/net.d}]\n      volumes:\n        - name: cni\n          hostPath:\n            path: /etc/cni/net.d\n',
        ),
      ),
    }
  }, 600_000)
  afterAll(async () => h?.stop())

  const machineArgs = () => [
    '--install-disk',
    NVME_BY_ID,
    '--install-image',
    IMAGE,
    '--config-patch-control-plane',
    `@${files.cp}`,
    '--config-patch-control-plane',
    `@${files.gw}`,
    '--config-patch-worker',
    `@${files.worker}`,
    '--node-patch',
    `${WORKER}=@${files.host}`,
  ]

  it('refuses an owned-field patch, an invalid patch and a disk the node does not have with exit 2, before any node is touched', async () => {
    const owned = await runIchor([...h.initArgs, ...machineArgs(), '--config-patch', `@${files.cni}`], h.env)
    expect(owned.code, owned.stderr).toBe(2)
    expect(owned.stderr).toContain(`--config-patch: ${files.cni}: cluster.network.cni.name is set by ichor (ichor sets the CNI to none`)
    const ichors = await runIchor([...h.initArgs, ...machineArgs(), '--config-patch-control-plane', `@${files.ichors}`], h.env)
    expect(ichors.code, ichors.stderr).toBe(2)
    expect(ichors.stderr).toContain(`--config-patch-control-plane: ${files.ichors}: KubeInlineManifestConfig cilium: the entry named cilium is ichor's`)
    const cni = await runIchor([...h.initArgs, ...machineArgs(), '--config-patch', `@${files.flannel}`], h.env)
    expect(cni.code, cni.stderr).toBe(2)
    expect(cni.stderr).toContain(
      `--config-patch: ${files.flannel}: KubeInlineManifestConfig my-cni: a second CNI: DaemonSet kube-flannel/kube-flannel-ds mounts the node's /etc/cni/net.d`,
    )
    const invalid = await runIchor([...h.initArgs, ...machineArgs(), '--config-patch-worker', `@${files.bad}`], h.env)
    expect(invalid.code, invalid.stderr).toBe(2)
    expect(`${invalid.stdout}${invalid.stderr}`).toMatch(new RegExp(`--config-patch-worker ${files.bad}: Talos refuses the patch: .*bogusField`))
    // The dry run reads the disks of the machines in maintenance mode (a real run does the same in the same step).
    const dry = await runIchor([...h.initArgs, '--dry-run', '--install-disk', '/dev/vdb'], h.env)
    expect(dry.code, dry.stderr).toBe(2)
    expect(`${dry.stdout}${dry.stderr}`).toContain(`/dev/vdb (from --install-disk) is not a disk of ${CONTROL_PLANE}; its disks: /dev/sda, /dev/nvme0n1`)
    expect(`${dry.stdout}${dry.stderr}`).toContain(`/dev/vdb (from --install-disk) is not a disk of ${WORKER}`)
    expect(dry.stderr).toContain(`Talos will be installed onto /dev/vdb of ${WORKER} (--install-disk); its contents are erased`)
    // Issue 38 point 5: the disk of the FINAL config, matched on the node's disks as Talos matches it.
    // On v1.14 gen config writes an UnattendedInstallConfig; machine.install beside it is refused by name.
    const legacy = await runIchor([...h.initArgs, '--dry-run', '--config-patch', 'machine:\n  install:\n    disk: /dev/nvme0n1\n'], h.env)
    expect(legacy.code, legacy.stderr).toBe(2)
    expect(`${legacy.stdout}${legacy.stderr}`).toContain(
      '--config-patch inline: machine.install is not used with the UnattendedInstallConfig that talosctl gen config writes for Talos v1.14+',
    )
    const none = await runIchor([...h.initArgs, '--dry-run', '--node-patch', `${WORKER}=${unattended('disk.transport == "mmc"')}`], h.env)
    expect(none.code, none.stderr).toBe(2)
    expect(`${none.stdout}${none.stderr}`).toContain(
      `the selector disk.transport == "mmc" (from --node-patch ${WORKER} inline) matches no disk of ${WORKER}; its disks: /dev/sda (512110190592 bytes, sata, model "QEMU HARDDISK", /dev/disk/by-id/ata-QEMU_HARDDISK_QM00001), /dev/nvme0n1 (512110190592 bytes, nvme, model "QEMU NVMe Ctrl", /dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_deadbeef1)`,
    )
    // A /dev/disk/by-id link is a disk of the node; a selector that matches names the disk it picks.
    const byId = NVME_BY_ID
    const picks = await runIchor(
      [...h.initArgs, '--dry-run', '--install-disk', byId, '--node-patch', `${WORKER}=${unattended('disk.transport == "nvme"')}`],
      h.env,
    )
    expect(picks.code, failure(picks)).toBe(0)
    expect(picks.stderr).toContain(`Talos will be installed onto ${byId} of ${CONTROL_PLANE} (--install-disk)`)
    expect(picks.stderr).toContain(
      `the selector disk.transport == "nvme" (from --node-patch ${WORKER} inline) selects /dev/nvme0n1 of ${WORKER}; its contents are erased`,
    )
    expect(untouched()).toBe(true)
  }, 300_000)

  it("converges; the nodes' configs carry them; a rerun without the flags changes nothing; a changed control-plane patch and installer image are applied to the running nodes without a reboot", async () => {
    const first = await runIchor([...h.initArgs, ...machineArgs(), '--json'], h.env)
    expect(first.code, `${first.stderr.slice(-3000)}`).toBe(0)
    const cp = nodeConfig(h, CONTROL_PLANE)
    const w = nodeConfig(h, WORKER)
    for (const config of [cp, w]) {
      // A /dev/disk/by-id link (issue 38 point 5): selected among the disk's symlinks, and installed onto.
      expect(config).toContain(`match: '"${NVME_BY_ID}" in disk.symlinks'`)
      expect(config).toContain(IMAGE)
    }
    expect(cp).toContain('vm.nr_hugepages: "64"')
    expect(w).not.toContain('vm.nr_hugepages')
    expect(w).toMatch(/tier: storage/)
    expect(w).toMatch(/kind: HostnameConfig\s*\n(.*\n)*?hostname: w1/)
    expect(cp).not.toMatch(/hostname: w1/)
    // The hand-over took ichor's entry only: the operator's stays in the config, its Namespace in
    // the cluster and in Talos's inventory (Talos keeps applying it; ichor leaves it alone).
    expect(inlineManifestForms(cp)).toEqual([])
    expect(inlineManifestForms(cp, 'gateway-api-crds')).toEqual(['document'])
    expect(inlineManifestForms(w, 'gateway-api-crds')).toEqual([])

    const kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
    expect(await getObject(kube, {apiVersion: 'v1', kind: 'Namespace', name: 'gateway-system'})).toBeDefined()
    const inventory = await getObject<KubeObject & {data?: Record<string, string>}>(kube, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      name: 'talos-bootstrap-manifests-inventory',
      namespace: 'kube-system',
    })
    expect(Object.keys(inventory?.data ?? {}).filter((k) => /gateway-system/.test(k))).toEqual(['_gateway-system__Namespace'])
    const spec = async () =>
      (
        await getObject<KubeObject & {spec: {talos: {machineConfig?: Record<string, unknown>}}}>(kube, {
          apiVersion: 'ichor.maesh.dev/v1alpha1',
          kind: 'IchorInstallation',
          name: 'ichor',
        })
      )?.spec.talos.machineConfig
    expect(await spec()).toMatchObject({
      installDisk: NVME_BY_ID,
      installImage: IMAGE,
      controlPlanePatches: [
        {source: files.cp, yaml: readFileSync(files.cp, 'utf8')},
        {source: files.gw, yaml: readFileSync(files.gw, 'utf8')},
      ],
      workerPatches: [{source: files.worker}],
      nodePatches: [{node: WORKER, source: files.host}],
    })
    const dump = await canonicalDump(kube, h)

    const again = await runIchor([...h.initArgs, '--json'], h.env)
    expect(again.code, again.stderr.slice(-2000)).toBe(0)
    expect(jsonEvents(again).find((e) => e.event === 'end')).toMatchObject({ok: true, changed: false})
    expect(await canonicalDump(kube, h)).toEqual(dump)
    expect(nodeConfig(h, WORKER)).toBe(w)

    // The dry run names what each node gets and shows the diff of its running config; nothing changes.
    const dry = await runIchor(
      [...h.initArgs, '--dry-run', '--config-patch-control-plane', `@${files.cp2}`, '--config-patch-control-plane', `@${files.gw}`],
      h.env,
    )
    expect(dry.code, failure(dry)).toBe(0)
    const said = `${dry.stdout}${dry.stderr}`
    expect(said).toContain(`${CONTROL_PLANE}: applied without a reboot`)
    expect(said).toContain(`${WORKER}: unchanged`)
    expect(said).toMatch(/^-\s+vm\.nr_hugepages: "64"$/m)
    expect(said).toMatch(/^\+\s+vm\.nr_hugepages: "128"$/m)
    expect(nodeConfig(h, CONTROL_PLANE)).toBe(cp)

    const changed = await runIchor(
      [...h.initArgs, '--config-patch-control-plane', `@${files.cp2}`, '--config-patch-control-plane', `@${files.gw}`, '--json'],
      h.env,
    )
    expect(changed.code, failure(changed)).toBe(0)
    const cp2 = nodeConfig(h, CONTROL_PLANE)
    expect(cp2).toContain('vm.nr_hugepages: "128"')
    expect(cp2).not.toContain('vm.nr_hugepages: "64"')
    // Only the operator's change: what ichor changed since (the Cilium hand-over) stays as it is.
    expect(inlineManifestForms(cp2)).toEqual([])
    expect(inlineManifestForms(cp2, 'gateway-api-crds')).toEqual(['document'])
    expect(nodeConfig(h, WORKER)).toBe(w)
    expect(await spec()).toMatchObject({controlPlanePatches: [{source: files.cp2, yaml: readFileSync(files.cp2, 'utf8')}, {source: files.gw}]})

    // An installer image is used by the next install or upgrade: Talos v1.14 takes it without a reboot.
    const image = await runIchor([...h.initArgs, '--install-image', IMAGE2, '--json'], h.env)
    expect(image.code, failure(image)).toBe(0)
    for (const ip of [CONTROL_PLANE, WORKER]) {
      expect(nodeConfig(h, ip), ip).toContain(IMAGE2)
      expect(nodeConfig(h, ip), ip).not.toContain(IMAGE)
    }
    expect(await spec()).toMatchObject({installImage: IMAGE2})
    const still = await runIchor([...h.initArgs, '--json'], h.env)
    expect(
      jsonEvents(still).find((e) => e.event === 'end'),
      failure(still),
    ).toMatchObject({ok: true, changed: false})
  }, 600_000)

  it('a rerun that changes the worker patch, killed at every step boundary, converges: the worker carries the patch and the spec stores it', async () => {
    const args = [...h.initArgs, '--config-patch-worker', `@${files.worker2}`, '--json']
    const plan = await runIchor([...h.initArgs, '--dry-run', '--json'], h.env)
    const ids = taskIds(plan)
    const log: string[] = []
    for (let k = 0; k < ids.length; k++) {
      const run = await runIchor(args, h.env, {killOn: killBeforeTask(k)})
      log.push(`kill before ${ids[k]}: ${run.signal ?? `exit ${run.code}`}`)
      expect(run.code === 0 || run.signal === 'SIGKILL', `${ids[k]}: ${failure(run)}`).toBe(true)
    }
    const last = await runIchor(args, h.env)
    expect(last.code, `${log.join('\n')}\n${failure(last)}`).toBe(0)
    const w = nodeConfig(h, WORKER)
    expect(w).toMatch(/tier: fast/)
    expect(w).not.toMatch(/tier: storage/)
    expect(w).toMatch(/hostname: w1/)
    const kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
    const cr = await getObject<KubeObject & {spec: {talos: {machineConfig?: Record<string, unknown>}}}>(kube, {
      apiVersion: 'ichor.maesh.dev/v1alpha1',
      kind: 'IchorInstallation',
      name: 'ichor',
    })
    expect(cr?.spec.talos.machineConfig).toMatchObject({workerPatches: [{source: files.worker2, yaml: readFileSync(files.worker2, 'utf8')}]})
    const again = await runIchor(args, h.env)
    expect(
      jsonEvents(again).find((e) => e.event === 'end'),
      failure(again),
    ).toMatchObject({ok: true, changed: false})
  }, 1_200_000)
})
