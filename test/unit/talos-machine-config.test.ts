// The operator's part of the Talos machine configs (issue 22): install disk, installer image,
// config patches per cluster, role and node; owned fields refused; stored settings kept on a
// rerun; the configs rendered and validated by the real talosctl v1.14.1 before any node.
import {execFileSync} from 'node:child_process'
import {mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {parseAllDocuments} from 'yaml'
import {IchorError, ValidationError, type Issue} from '../../src/lib/errors/errors.js'
import {installDiskLines} from '../../src/lib/init/inputs.js'
import {keepStoredMachineConfig} from '../../src/lib/init/stored-settings.js'
import {checkInitInputs, type InitFlags} from '../../src/lib/init/inputs.js'
import type {InitRender} from '../../src/lib/init/render.js'
import {prepareStateDir, localState} from '../../src/lib/state/local.js'
import type {MachineConfigInputs} from '../../src/lib/state/installation-types.js'
import {MAX_PATCH_FILE_BYTES, ownedFieldIssues, readMachineConfigFlags} from '../../src/lib/talos/machine-config.js'
import {renderTalosPatches} from '../../src/lib/talos/patches.js'
import {machineConfigsTask} from '../../src/lib/talos/tasks.js'
import {rebaseConfig} from '../../src/lib/talos/apply-config.js'
import {inlineManifestRemovalPatch, withoutInlineManifest} from '../../src/lib/talos/handover.js'
import {realTalosctlPath} from '../harness/talosctl.js'

let dir: string
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'ichor-mc-'))
})
afterAll(() => rmSync(dir, {recursive: true, force: true}))

const file = (name: string, text: string) => {
  const path = join(dir, name)
  writeFileSync(path, text)
  return path
}
const nodes = {controlPlanes: ['192.0.2.10'], workers: ['192.0.2.11']}
const owned = (yaml: string, noWorker = false) => ownedFieldIssues({source: 'p.yaml', yaml}, '--config-patch', {noWorker}).map((i) => i.message)

describe('init machine-config flags', () => {
  it("Given @FILE and inline YAML patches per role and a node patch, Then each is read with its source, in talosctl's order", () => {
    const cp = file('cp.yaml', 'machine:\n  sysctls:\n    vm.nr_hugepages: "128"\n')
    const issues: Issue[] = []
    const m = readMachineConfigFlags(
      {
        installDisk: '/dev/nvme0n1',
        installImage: 'factory.talos.dev/metal-installer/abc:v1.14.1',
        configPatch: ['machine:\n  install:\n    wipe: false'],
        configPatchControlPlane: [`@${cp}`],
        nodePatch: ['192.0.2.11=apiVersion: v1alpha1\nkind: HostnameConfig\nhostname: w1\nauto: off'],
      },
      nodes,
      issues,
    )
    expect(issues).toEqual([])
    expect(m.installDisk).toBe('/dev/nvme0n1')
    expect(m.patches).toEqual([{source: 'inline', yaml: 'machine:\n  install:\n    wipe: false\n'}])
    expect(m.controlPlanePatches[0]!.source).toBe(cp)
    expect(m.nodePatches).toEqual([{node: '192.0.2.11', source: 'inline', yaml: 'apiVersion: v1alpha1\nkind: HostnameConfig\nhostname: w1\nauto: off\n'}])
  })

  it('Given a missing file, a non-YAML patch, a node patch for an unknown node and a disk that is not a path, Then each is an issue naming its flag', () => {
    const issues: Issue[] = []
    readMachineConfigFlags(
      {installDisk: 'nvme0n1', configPatchWorker: ['@/nonexistent/w.yaml'], configPatch: ['a: [b'], nodePatch: ['192.0.2.99=@/x.yaml', 'nonsense']},
      nodes,
      issues,
    )
    expect(issues.map((i) => i.path)).toEqual([
      '--install-disk',
      '--config-patch',
      '--config-patch-worker',
      '--node-patch',
      '--node-patch 192.0.2.99',
      '--node-patch',
    ])
    expect(issues[0]!.message).toMatch(/not a device path \(e\.g\. \/dev\/sda, \/dev\/nvme0n1\)/)
    expect(issues[2]!.message).toBe('/nonexistent/w.yaml: cannot read the patch: no such file')
  })

  it('Given patches over what ichor owns (CNI, kube-proxy, inline manifests, KubePrism, endpoint, secrets), Then each is refused with its path and reason', () => {
    expect(owned('cluster:\n  network:\n    cni:\n      name: flannel\n')).toEqual([
      'p.yaml: cluster.network.cni.name is set by ichor (ichor sets the CNI to none: Cilium is installed by ichor)',
    ])
    expect(owned('cluster:\n  proxy:\n    disabled: false\n')[0]).toMatch(/cluster\.proxy\.disabled is set by ichor \(kube-proxy is ichor's/)
    expect(owned('cluster:\n  inlineManifests:\n    - name: cilium\n      contents: x\n')[0]).toMatch(
      /cluster\.inlineManifests cilium: the entry named cilium is ichor's/,
    )
    expect(owned('apiVersion: v1alpha1\nkind: KubePrismConfig\nport: 7446\n')[0]).toMatch(/kind KubePrismConfig is set by ichor \(KubePrism on 7445/)
    expect(owned('apiVersion: v1alpha1\nkind: KubeProxyConfig\nenabled: true\n')[0]).toMatch(/kind KubeProxyConfig is set by ichor/)
    expect(owned('apiVersion: v1alpha1\nkind: KubeInlineManifestConfig\nname: cilium\nmanifest: ""\n')[0]).toMatch(/inline manifest/)
    expect(owned('- op: replace\n  path: /cluster/controlPlane/endpoint\n  value: https://x:6443\n')[0]).toMatch(
      /cluster\.controlPlane\.endpoint is set by ichor \(the endpoint is --endpoint\)/,
    )
    expect(owned('cluster:\n  secretboxEncryptionSecret: abc\n')[0]).toMatch(/secrets bundle/)
    expect(owned('machine:\n  features:\n    kubePrism:\n      enabled: false\n')[0]).toMatch(/machine\.features\.kubePrism\.enabled/)
    expect(owned('cluster:\n  allowSchedulingOnControlPlanes: false\n', true)[0]).toMatch(/without workers/)
    // a delete of a parent takes the owned field with it
    expect(owned('cluster:\n  network:\n    $patch: delete\n')[0]).toMatch(/cluster\.network\.cni is set by ichor/)
    // what is the operator's: disks, images, hostnames, addresses, sysctls, extensions
    expect(
      owned('machine:\n  install:\n    disk: /dev/nvme0n1\n  network:\n    interfaces:\n      - interface: eth0\n        addresses: [192.0.2.11/24]\n'),
    ).toEqual([])
    expect(owned('apiVersion: v1alpha1\nkind: HostnameConfig\nhostname: cp-1\nauto: off\n')).toEqual([])
    expect(owned('cluster:\n  allowSchedulingOnControlPlanes: true\n')).toEqual([])
    expect(owned('cluster: {}\n')).toEqual([])
  })

  it('Given v1.14 documents (issue 38 point 6), Then KubeEtcdEncryptionConfig is refused as cluster.secretboxEncryptionSecret is, and KubeExternalManifestConfig is accepted as cluster.extraManifests is', () => {
    const encryption =
      'apiVersion: v1alpha1\nkind: KubeEtcdEncryptionConfig\nconfig:\n  resources:\n    - resources: [secrets]\n      providers:\n        - secretbox:\n            keys: [{name: key2, secret: c2VjcmV0}]\n'
    expect(owned(encryption)).toEqual([
      "p.yaml: kind KubeEtcdEncryptionConfig is set by ichor (the cluster secrets come from ichor's Talos secrets bundle (never regenerated))",
    ])
    expect(owned('apiVersion: v1alpha1\nkind: KubeEtcdEncryptionConfig\n$patch: delete\n')).toHaveLength(1)
    expect(owned('cluster:\n  aescbcEncryptionSecret: abc\n')[0]).toMatch(/secrets bundle/)
    // The operator's own manifests fetched by Talos: the same answer in both forms.
    const external =
      'apiVersion: v1alpha1\nkind: KubeExternalManifestConfig\nname: gateway-api\nurl: https://example.com/standard-install.yaml\nheaders:\n  X-Token: t\n'
    expect(owned(external)).toEqual([])
    expect(owned('cluster:\n  extraManifests: [https://example.com/standard-install.yaml]\n  extraManifestHeaders:\n    X-Token: t\n')).toEqual([])
  })

  it("Given the operator's own inline manifests (issue 38 point 7), Then any entry not named cilium is accepted in both forms, and ichor's entry, an index into the list and a second CNI are refused", () => {
    const bootstrap = [
      'apiVersion: v1',
      'kind: Namespace',
      'metadata:',
      '  name: gateway-system',
      '---',
      'apiVersion: apiextensions.k8s.io/v1',
      'kind: CustomResourceDefinition',
      'metadata:',
      '  name: gateways.gateway.networking.k8s.io',
      'spec:',
      '  group: gateway.networking.k8s.io',
      '',
    ].join('\n')
    const indent = (text: string, n: number) =>
      text
        .split('\n')
        .map((l) => (l ? ' '.repeat(n) + l : l))
        .join('\n')
    const doc = (name: string, manifest: string) => `apiVersion: v1alpha1\nkind: KubeInlineManifestConfig\nname: ${name}\nmanifest: |\n${indent(manifest, 2)}`
    const legacy = (name: string, manifest: string) => `cluster:\n  inlineManifests:\n    - name: ${name}\n      contents: |\n${indent(manifest, 8)}`
    // Talos v1.14 document form and the legacy list (below v1.14; v1.14 reads both, config/container K8sInlineManifestConfigs)
    expect(owned(doc('gateway-api-crds', bootstrap))).toEqual([])
    expect(owned(legacy('gateway-api-crds', bootstrap))).toEqual([])
    // the operator removing an entry of its own, in either form
    expect(owned('apiVersion: v1alpha1\nkind: KubeInlineManifestConfig\nname: gateway-api-crds\n$patch: delete\n')).toEqual([])
    expect(owned('cluster:\n  inlineManifests:\n    - name: gateway-api-crds\n      $patch: delete\n')).toEqual([])
    expect(owned('cluster:\n  inlineManifests: []\n')).toEqual([])
    // ichor's entry, whatever the operator puts in it or takes out
    const ichors =
      /the entry named cilium is ichor's: the inline manifest ichor bootstraps Cilium with before handing it to Helm \(accepted: an entry of another name\)/
    expect(owned(doc('cilium', bootstrap))).toEqual([expect.stringMatching(new RegExp(`^p\\.yaml: KubeInlineManifestConfig cilium: ${ichors.source}`))])
    expect(owned(legacy('cilium', bootstrap))).toEqual([expect.stringMatching(new RegExp(`^p\\.yaml: cluster\\.inlineManifests cilium: ${ichors.source}`))])
    expect(owned('apiVersion: v1alpha1\nkind: KubeInlineManifestConfig\nname: cilium\n$patch: delete\n')[0]).toMatch(ichors)
    expect(owned('cluster:\n  inlineManifests:\n    - name: cilium\n      $patch: delete\n')[0]).toMatch(ichors)
    // a delete of the whole list, or an entry chosen by anything but its name, may take ichor's
    expect(owned('cluster:\n  inlineManifests:\n    $patch: delete\n')[0]).toMatch(/cluster\.inlineManifests is set by ichor/)
    expect(owned('cluster:\n  inlineManifests:\n    - contents: x\n      $patch: delete\n')[0]).toMatch(/entry 1 has no name/)
    expect(owned('cluster:\n  inlineManifests:\n    - contents: x\n      name: gateway-api-crds\n      $patch: delete\n')[0]).toMatch(
      /cluster\.inlineManifests entry 1 is picked for \$patch: delete by its contents, not its name/,
    )
    expect(owned('apiVersion: v1alpha1\nkind: KubeInlineManifestConfig\nmanifest: x\n')[0]).toMatch(/KubeInlineManifestConfig has no name/)
    // JSON 6902 addresses entries by index, and the index of ichor's entry depends on the order talosctl merges patches in
    for (const path of ['/cluster/inlineManifests/0', '/cluster/inlineManifests/-', '/cluster/inlineManifests']) {
      const issues = owned(`- op: add\n  path: ${path}\n  value: {name: gateway-api-crds, contents: x}\n`)
      expect(issues, path).toHaveLength(1)
      expect(issues[0]).toMatch(
        /cluster\.inlineManifests.* by index .*accepted: a KubeInlineManifestConfig document or a cluster\.inlineManifests entry with its name/,
      )
    }
    // a JSON 6902 move takes its `from` away: ichor's entry moved out is ichor's entry removed
    expect(owned('- op: move\n  from: /cluster/inlineManifests/0\n  path: /machine/nodeLabels/x\n')[0]).toMatch(/cluster\.inlineManifests\.0 .* by index/)
    expect(owned('- op: move\n  from: /cluster/network/cni\n  path: /machine/nodeLabels/x\n')[0]).toMatch(/cluster\.network\.cni is set by ichor/)
    expect(owned('- op: copy\n  from: /cluster/network/cni/name\n  path: /machine/nodeLabels/x\n')).toEqual([])
    // a second CNI: a pod that can write into the node's CNI folders, named with the object and the folder
    const flannel = [
      'apiVersion: apps/v1',
      'kind: DaemonSet',
      'metadata:',
      '  name: kube-flannel-ds',
      '  namespace: kube-flannel',
      'spec:',
      '  template:',
      '    spec:',
      '      initContainers: [{name: install-cni, image: flannel, volumeMounts: [{name: cni, mountPath: /etc/cni/net.d}]}]',
      '      containers: [{name: kube-flannel, image: flannel}]',
      '      volumes:',
      '        - name: cni',
      '          hostPath:',
      '            path: /etc/cni/net.d/',
      '',
    ].join('\n')
    const cni = /a second CNI: DaemonSet kube-flannel\/kube-flannel-ds mounts the node's \/etc\/cni\/net\.d/
    expect(owned(doc('my-cni', `${bootstrap}---\n${flannel}`))).toEqual([expect.stringMatching(cni)])
    expect(owned(doc('my-cni', flannel))[0]).toMatch(/^p\.yaml: KubeInlineManifestConfig my-cni: .*Cilium is the cluster's CNI/)
    expect(owned(legacy('my-cni', flannel))[0]).toMatch(/^p\.yaml: cluster\.inlineManifests my-cni: /)
    expect(owned(legacy('my-cni', flannel))[0]).toMatch(cni)
    const binInCronJob =
      'apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: cni-installer}\nspec:\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          containers: [{name: c, volumeMounts: [{name: b, mountPath: /host/opt/cni}]}]\n          volumes: [{name: b, hostPath: {path: /opt/cni}}]\n'
    expect(owned(doc('x', binInCronJob))[0]).toMatch(/CronJob cni-installer mounts the node's \/opt\/cni/)
    // a pod that reads other host folders is not a CNI, nor one that only reads the CNI folders or the whole host (node-exporter)
    const logs = flannel.replace('/etc/cni/net.d/', '/var/log')
    expect(owned(doc('log-agent', logs))).toEqual([])
    expect(owned(doc('cni-reader', flannel.replace('mountPath: /etc/cni/net.d}', 'mountPath: /etc/cni/net.d, readOnly: true}')))).toEqual([])
    expect(owned(doc('cni-unmounted', flannel.replace(/ *initContainers.*\n/, '')))).toEqual([])
    const nodeExporter =
      'apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: node-exporter, namespace: monitoring}\nspec:\n  template:\n    spec:\n      containers: [{name: e, volumeMounts: [{name: root, mountPath: /host, readOnly: true}]}]\n      volumes: [{name: root, hostPath: {path: /}}]\n'
    expect(owned(doc('node-exporter', nodeExporter))).toEqual([])
    expect(owned(doc('node-writer', nodeExporter.replace(', readOnly: true', '')))[0]).toMatch(/DaemonSet monitoring\/node-exporter mounts the node's \/,/)
    // contents that are not YAML cannot be judged
    expect(owned(doc('broken', 'a: [\n'))[0]).toMatch(/KubeInlineManifestConfig broken: the manifest is not YAML/)
    // aliases that expand too much: refused by name, not a stack trace
    const laughs = [
      'a: &a [x, x, x, x, x, x, x, x, x, x]',
      'b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]',
      'c: [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]',
    ].join('\n')
    expect(owned(doc('laughs', laughs))[0]).toMatch(/KubeInlineManifestConfig laughs: the manifest is not YAML ichor can check \(its aliases expand too much\)/)
  })

  it('Given an owned-field patch on init, Then init refuses it with exit 2 before anything else runs', () => {
    const p = file('bad-cni.yaml', 'cluster:\n  network:\n    cni:\n      name: custom\n')
    const flags: InitFlags = {clusterName: 'c', endpoint: 'https://192.0.2.10:6443', ...nodes, machineConfig: {configPatchControlPlane: [`@${p}`]}}
    let error: unknown
    try {
      checkInitInputs(flags, {requireNodes: true})
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(ValidationError)
    expect((error as ValidationError).exitCode).toBe(2)
    expect((error as ValidationError).message).toContain(`--config-patch-control-plane: ${p}: cluster.network.cni.name is set by ichor`)
  })
})

describe('keepStoredMachineConfig (a rerun)', () => {
  const stored: Partial<MachineConfigInputs> = {installDisk: '/dev/nvme0n1', controlPlanePatches: [{source: '/home/a/cp.yaml', yaml: 'x: 1\n'}]}
  const none: MachineConfigInputs = {patches: [], controlPlanePatches: [], workerPatches: [], nodePatches: []}
  it('Given no machine-config flag, Then the stored ones are kept', () => {
    expect(keepStoredMachineConfig({}, none, stored)).toEqual({
      ...none,
      installDisk: '/dev/nvme0n1',
      installImage: undefined,
      controlPlanePatches: stored.controlPlanePatches,
    })
  })
  it('Given a different disk and patch, Then they replace the stored ones (the plan applies them to the running nodes)', () => {
    const kept = keepStoredMachineConfig(
      {installDisk: '/dev/sda', configPatchControlPlane: ['x: 2']},
      {...none, installDisk: '/dev/sda', controlPlanePatches: [{source: 'inline', yaml: 'x: 2\n'}]},
      stored,
    )
    expect(kept).toMatchObject({installDisk: '/dev/sda', controlPlanePatches: [{source: 'inline', yaml: 'x: 2\n'}]})
  })
})

describe('keepStoredMachineConfig: node patches, one node at a time', () => {
  const none: MachineConfigInputs = {patches: [], controlPlanePatches: [], workerPatches: [], nodePatches: []}
  const host = (node: string, name: string) => ({
    node,
    source: `${name}.yaml`,
    yaml: `apiVersion: v1alpha1\nkind: HostnameConfig\nhostname: ${name}\nauto: off\n`,
  })
  const stored: Partial<MachineConfigInputs> = {nodePatches: [host('192.0.2.11', 'w1')]}
  it('Given a node added later with its own --node-patch, Then its patch is taken and the stored ones of the other nodes are kept', () => {
    const kept = keepStoredMachineConfig({nodePatch: ['192.0.2.12=@w2.yaml']}, {...none, nodePatches: [host('192.0.2.12', 'w2')]}, stored)
    expect(kept.nodePatches).toEqual([host('192.0.2.11', 'w1'), host('192.0.2.12', 'w2')])
  })
  it("Given a different --node-patch for a node the cluster has, Then it replaces that node's stored one only", () => {
    const kept = keepStoredMachineConfig(
      {nodePatch: ['192.0.2.11=@w9.yaml']},
      {...none, nodePatches: [host('192.0.2.11', 'w9')]},
      {nodePatches: [host('192.0.2.11', 'w1'), host('192.0.2.13', 'w3')]},
    )
    expect(kept.nodePatches).toEqual([host('192.0.2.13', 'w3'), host('192.0.2.11', 'w9')])
  })
})

describe("rebaseConfig: the operator's change laid over the running config", () => {
  const before =
    'version: v1alpha1\nmachine:\n  type: worker\n  sysctls:\n    a: "1"\n  install:\n    image: old\ncluster:\n  inlineManifests:\n    - name: cilium\n      contents: x\n---\napiVersion: v1alpha1\nkind: KubeNodeConfig\nlabels:\n  tier: storage\n'
  // What ichor changed since (the hand-over removed the inline manifest; an upgrade moved the kubelet).
  const running =
    'version: v1alpha1\nmachine:\n  type: worker\n  sysctls:\n    a: "1"\n  install:\n    image: old\n  kubelet:\n    image: kubelet:v2\ncluster: {}\n---\napiVersion: v1alpha1\nkind: KubeNodeConfig\nlabels:\n  tier: storage\n'
  it('Given a changed sysctl, image and label, Then only those change and the later changes stay', () => {
    const after = before.replace('a: "1"', 'b: "2"').replace('image: old', 'image: new').replace('tier: storage', 'tier: fast')
    const out = rebaseConfig(running, before, after)!
    const docs = parseAllDocuments(out).map((d) => d.toJS())
    expect(docs[0]).toEqual({
      version: 'v1alpha1',
      machine: {type: 'worker', sysctls: {b: '2'}, install: {image: 'new'}, kubelet: {image: 'kubelet:v2'}},
      cluster: {},
    })
    expect(docs[1]).toEqual({apiVersion: 'v1alpha1', kind: 'KubeNodeConfig', labels: {tier: 'fast'}})
    // Applied: the same change is no change any more.
    expect(rebaseConfig(out, before, after)).toBeUndefined()
  })
  it('Given a document the new inputs drop or add, Then it goes or comes; the same inputs change nothing', () => {
    const after = before.replace(/---\n[^]*$/, '---\napiVersion: v1alpha1\nkind: HostnameConfig\nhostname: w1\n')
    const docs = parseAllDocuments(rebaseConfig(running, before, after)!).map((d) => d.toJS() as {kind?: string})
    expect(docs.map((d) => d.kind)).toEqual([undefined, 'HostnameConfig'])
    expect(rebaseConfig(running, before, before)).toBeUndefined()
  })
})

describe('the install disk each node is told about', () => {
  it("Given --install-disk and one node whose own patch selects another disk, Then each node's line names its disk and where it comes from", () => {
    const inputs = checkInitInputs(
      {
        clusterName: 'c',
        endpoint: 'https://192.0.2.10:6443',
        controlPlanes: ['192.0.2.10'],
        workers: ['192.0.2.11'],
        machineConfig: {
          installDisk: '/dev/nvme0n1',
          nodePatch: ['192.0.2.11=apiVersion: v1alpha1\nkind: UnattendedInstallConfig\nprovisioning:\n  diskSelector:\n    match: disk.dev_path == "/dev/sdb"'],
        },
      },
      {requireNodes: true},
    )
    expect(installDiskLines(inputs)).toEqual([
      'Talos will be installed onto /dev/nvme0n1 of 192.0.2.10 (--install-disk); its contents are erased (a node already configured keeps its installation)',
      'Talos will be installed onto /dev/sdb of 192.0.2.11 (--node-patch 192.0.2.11 inline); its contents are erased (a node already configured keeps its installation)',
    ])
  })
})

describe('machine configs rendered with the real talosctl v1.14.1', () => {
  const run = async (machineConfig: MachineConfigInputs, existing?: ReturnType<typeof localState>, talosVersion?: string) => {
    process.env.ICHOR_TALOSCTL = realTalosctlPath()
    const state = existing ?? localState('c', mkdtempSync(join(dir, 'state-')))
    if (!existing) {
      prepareStateDir(state)
      execFileSync(realTalosctlPath(), ['gen', 'secrets', '--output-file', state.secrets], {stdio: 'ignore'})
    }
    const inputs = checkInitInputs({clusterName: 'c', endpoint: 'https://192.0.2.10:6443', ...nodes, talosVersion}, {requireNodes: true})
    const talos = renderTalosPatches({
      talosVersion: inputs.talosVersion,
      kubeProxy: 'replaced',
      ciliumManifest: 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: kube-system\n',
    })
    const task = machineConfigsTask({state, inputs: {...inputs, machineConfig}, render: async () => ({talos}) as InitRender})
    await task.run(() => undefined)
    return state
  }

  it('Given an install disk, an installer image, a control-plane and a worker patch, Then the generated configs carry them and pass talosctl validate', async () => {
    const image = 'factory.talos.dev/metal-installer/613e1592b2da41ae5e265e8789429f22e121aab91cb4deb6bc3c0b6262961245:v1.14.1'
    const state = await run({
      installDisk: '/dev/nvme0n1',
      installImage: image,
      patches: [],
      controlPlanePatches: [{source: 'cp.yaml', yaml: 'machine:\n  sysctls:\n    vm.nr_hugepages: "64"\n'}],
      workerPatches: [{source: 'w.yaml', yaml: 'apiVersion: v1alpha1\nkind: KubeNodeConfig\nlabels:\n  tier: worker\n'}],
      nodePatches: [{node: '192.0.2.11', source: 'w1.yaml', yaml: 'apiVersion: v1alpha1\nkind: HostnameConfig\nhostname: w1\nauto: off\n'}],
    })
    const cp = readFileSync(state.controlPlaneConfig, 'utf8')
    const w = readFileSync(state.workerConfig, 'utf8')
    for (const text of [cp, w]) {
      expect(text).toContain('disk.dev_path == "/dev/nvme0n1"')
      expect(text).toContain(image)
    }
    expect(cp).toContain('vm.nr_hugepages: "64"')
    expect(w).not.toContain('vm.nr_hugepages')
    expect(w).toContain('tier: worker')
    expect(parseAllDocuments(cp).length).toBeGreaterThan(1)
  }, 60_000)

  it.each([
    [
      'v1.14.1',
      'document',
      'apiVersion: v1alpha1\nkind: KubeInlineManifestConfig\nname: gateway-api-crds\nmanifest: |\n  apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: gateway-system\n',
    ],
    [
      'v1.13.0',
      'legacy',
      'cluster:\n  inlineManifests:\n    - name: gateway-api-crds\n      contents: |\n        apiVersion: v1\n        kind: Namespace\n        metadata:\n          name: gateway-system\n',
    ],
  ] as const)(
    "Given Talos %s and the operator's own inline manifest in the %s form (issue 38 point 7), Then the control plane's config carries both entries, and the hand-over's patch takes only ichor's",
    async (talosVersion, form, yaml) => {
      // read as init reads --config-patch-control-plane, so the check of owned fields is on the way
      const issues: Issue[] = []
      const inputs = readMachineConfigFlags({configPatchControlPlane: [yaml]}, nodes, issues)
      expect(issues).toEqual([])
      const state = await run(inputs, undefined, talosVersion)
      const cp = readFileSync(state.controlPlaneConfig, 'utf8')
      const names = (text: string) =>
        parseAllDocuments(text).flatMap((d) => {
          const js = d.toJS() as {kind?: string; name?: string; cluster?: {inlineManifests?: {name: string}[]}} | null
          if (js?.kind === 'KubeInlineManifestConfig') return [`document ${js.name}`]
          return !js?.kind ? (js?.cluster?.inlineManifests ?? []).map((m) => `legacy ${m.name}`) : []
        })
      const kind = form === 'document' ? 'document' : 'legacy'
      expect(names(cp).sort()).toEqual([`${kind} cilium`, `${kind} gateway-api-crds`])
      // The removal as the hand-over sends it to each control plane, applied by talosctl itself.
      const patch = join(dir, `removal-${form}.yaml`)
      writeFileSync(patch, inlineManifestRemovalPatch(cp)!)
      const after = execFileSync(realTalosctlPath(), ['machineconfig', 'patch', state.controlPlaneConfig, '--patch', `@${patch}`], {encoding: 'utf8'})
      expect(names(after)).toEqual([`${kind} gateway-api-crds`])
      expect(after).toContain('name: gateway-system')
      // and the state folder's copy, which a control plane added later is given
      expect(names(withoutInlineManifest(cp)!)).toEqual([`${kind} gateway-api-crds`])
    },
    60_000,
  )

  it('Given a patch Talos refuses (an unknown field), Then exit 2 naming the flag, the file and the field', async () => {
    const error = await run({
      patches: [],
      controlPlanePatches: [{source: 'ok.yaml', yaml: 'machine:\n  sysctls:\n    a.b: "1"\n'}],
      workerPatches: [{source: 'w-bad.yaml', yaml: 'machine:\n  bogusField: 1\n'}],
      nodePatches: [],
    }).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(error).toBeInstanceOf(IchorError)
    expect((error as IchorError).exitCode).toBe(2)
    expect((error as IchorError).message).toMatch(/^--config-patch-worker w-bad\.yaml: Talos refuses the patch: .*bogusField/)
  }, 60_000)

  it('Given configs a cluster was made with, When a later run brings a patch Talos refuses, Then the state folder keeps its configs and their hash', async () => {
    const none: MachineConfigInputs = {patches: [], controlPlanePatches: [], workerPatches: [], nodePatches: []}
    const state = await run({...none, installDisk: '/dev/nvme0n1'})
    const before = [state.controlPlaneConfig, state.workerConfig, state.configsHash].map((f) => readFileSync(f, 'utf8'))
    const error = await run(
      {...none, installDisk: '/dev/nvme0n1', patches: [{source: 'bad.yaml', yaml: 'machine:\n  network:\n    hostname: x\n'}]},
      state,
    ).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect((error as IchorError).exitCode).toBe(2)
    expect([state.controlPlaneConfig, state.workerConfig, state.configsHash].map((f) => readFileSync(f, 'utf8'))).toEqual(before)
  }, 60_000)

  it('Given a node patch that makes the config invalid, Then exit 2 naming that node patch', async () => {
    const error = await run({
      patches: [],
      controlPlanePatches: [],
      workerPatches: [],
      nodePatches: [{node: '192.0.2.10', source: 'cp-host.yaml', yaml: 'machine:\n  network:\n    hostname: cp-1\n'}],
    }).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect((error as IchorError).exitCode).toBe(2)
    expect((error as IchorError).message).toMatch(/^--node-patch 192\.0\.2\.10 cp-host\.yaml: Talos refuses the patch: .*static hostname is already set/)
  }, 60_000)
})

describe('ichor init --dry-run --output-dir with machine-config flags (the real talosctl renders the configs)', () => {
  it("Given an install disk, role patches and a node hostname, Then every node's full config is written with no secret value, and a per-node summary names disk, image, patches and hostname", async () => {
    const {spawnSync} = await import('node:child_process')
    const {PROJECT_ROOT, UPSTREAM} = await import('../support/upstream.js')
    const out = join(dir, 'dry')
    const cp = file('dry-cp.yaml', 'machine:\n  sysctls:\n    vm.nr_hugepages: "64"\n')
    const r = spawnSync(
      process.execPath,
      [
        join(PROJECT_ROOT, 'bin', 'run.js'),
        ...dryRunInit(out, UPSTREAM.dir),
        '--install-disk',
        '/dev/nvme0n1',
        '--config-patch-control-plane',
        `@${cp}`,
        '--node-patch',
        '192.0.2.11=apiVersion: v1alpha1\nkind: HostnameConfig\nhostname: w1\nauto: off',
      ],
      {encoding: 'utf8', env: {...process.env, ICHOR_MIRROR: '', ICHOR_TALOSCTL: realTalosctlPath()}},
    )
    expect(r.status, r.stderr).toBe(0)
    const cpConfig = readFileSync(join(out, 'talos', 'nodes', '192.0.2.10.yaml'), 'utf8')
    const wConfig = readFileSync(join(out, 'talos', 'nodes', '192.0.2.11.yaml'), 'utf8')
    expect(cpConfig).toContain('disk.dev_path == "/dev/nvme0n1"')
    expect(cpConfig).toContain('vm.nr_hugepages: "64"')
    expect(cpConfig).toContain('kind: KubeInlineManifestConfig')
    expect(wConfig).toMatch(/kind: HostnameConfig\n(.*\n)*?hostname: w1/)
    for (const text of [cpConfig, wConfig]) {
      expect(text).not.toMatch(/PRIVATE KEY-----|^\s*token: [a-z0-9]{6}\.[a-z0-9]{16}/m)
      expect(text).toMatch(/token: "?<left out by ichor --dry-run/)
    }
    const summary = readFileSync(join(out, 'talos', 'nodes.txt'), 'utf8')
    expect(summary).toContain('192.0.2.10: control plane\n  install disk: /dev/nvme0n1 (--install-disk); its contents are erased')
    expect(summary).toContain(`patches: --config-patch-control-plane ${cp}`)
    expect(summary).toMatch(/192\.0\.2\.11: worker\n(.*\n)*  hostname: w1/)
  }, 120_000)
})

describe('hostile patch files (issue 38 point 10): refused by size and by aliases before anything is written', () => {
  const init = async (patchFlags: string[]) => {
    const {runCliInProcess} = await import('../support/run-cli-inprocess.js')
    const {UPSTREAM} = await import('../support/upstream.js')
    const out = mkdtempSync(join(dir, 'hostile-'))
    const r = await runCliInProcess([...dryRunInit(join(out, 'dry'), UPSTREAM.dir), ...patchFlags], {
      env: {...process.env, ICHOR_MIRROR: '', ICHOR_TALOSCTL: realTalosctlPath(), ICHOR_STATE_DIR: join(out, 'state')},
    })
    return {...r, written: readdirSync(out)}
  }

  it('Given a --config-patch-worker file over the cap, Then exit 2 naming the flag, the file and the cap, and nothing is written', async () => {
    const text = `machine:\n  sysctls:\n    vm.a: "1"\n${'# padding\n'.repeat(Math.ceil(MAX_PATCH_FILE_BYTES / 10))}`
    const big = file('big-patch.yaml', text)
    const r = await init(['--config-patch-worker', `@${big}`])
    expect(r.code, r.stderr).toBe(2)
    expect(r.stderr).toContain(
      `--config-patch-worker: ${big}: the patch is ${Buffer.byteLength(text)} bytes; at most ${MAX_PATCH_FILE_BYTES} bytes (${MAX_PATCH_FILE_BYTES / 1024} KiB) are read`,
    )
    expect(r.written).toEqual([])
  }, 120_000)

  it('Given a --config-patch whose aliases expand like a billion laughs, Then exit 2 naming the flag and the file, and nothing is written', async () => {
    const levels = ['a: &a [x, x, x, x, x, x, x, x, x, x]']
    for (let i = 1; i < 9; i++)
      levels.push(
        `l${i}: &l${i} [${Array(10)
          .fill(i === 1 ? '*a' : `*l${i - 1}`)
          .join(', ')}]`,
      )
    const bomb = file('bomb.yaml', `machine:\n  sysctls:\n    vm.a: "1"\n${levels.join('\n')}\n`)
    const r = await init(['--config-patch', `@${bomb}`])
    expect(r.code, r.stderr).toBe(2)
    expect(r.stderr).toMatch(new RegExp(`--config-patch: ${bomb}: its aliases \\(\\*name\\) expand too much`))
    expect(r.written).toEqual([])
  }, 120_000)

  it('Given an inline --node-patch with an alias bomb, Then it is an issue naming that flag, as a file is', () => {
    const issues: Issue[] = []
    const levels = ['a: &a [x, x, x, x, x, x, x, x, x, x]', 'b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]', 'c: [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]']
    readMachineConfigFlags({nodePatch: [`192.0.2.11=${levels.join('\n')}`]}, nodes, issues)
    expect(issues).toHaveLength(1)
    expect(issues[0]).toMatchObject({path: '--node-patch 192.0.2.11', message: expect.stringMatching(/^inline: its aliases \(\*name\) expand too much/)})
  })
})

/** `init --dry-run` of a 1+1 homelab from `mirror`, into `out`: the tests add their patch flags. */
function dryRunInit(out: string, mirror: string): string[] {
  return [
    'init',
    '--dry-run',
    '--output-dir',
    out,
    '--cluster-name',
    'homelab',
    '--endpoint',
    'https://192.0.2.10:6443',
    '--control-plane',
    '192.0.2.10',
    '--worker',
    '192.0.2.11',
    '--mirror',
    mirror,
  ]
}
