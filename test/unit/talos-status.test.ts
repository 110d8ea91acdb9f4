// `ichor talos status`'s report from what the nodes answered (talosStatusOf): versions per
// node, a node that does not answer is an error (exit 1), a version the nodes run that the
// IchorInstallation does not record is a warning naming what to do. The reads themselves
// (one talosctl call each) are tested on the simulator (talos-simulator-several-nodes) and on
// the harness (e2e/converged).
import {describe, expect, it} from 'vitest'
import {kubeletVersionOfConfig, talosStatusOf} from '../../src/lib/talos/status.js'
import {formatTalosStatus} from '../../src/lib/talos/status-text.js'
import {TalosctlError} from '../../src/lib/talos/talosctl.js'
import type {Installation} from '../../src/lib/state/installation.js'

const [CP1, CP2, W1] = ['10.5.0.2', '10.5.0.3', '10.5.0.4']
const cr = {
  spec: {
    talos: {
      clusterName: 'homelab',
      endpoint: 'https://10.5.0.2:6443',
      talosVersion: 'v1.14.1',
      kubernetesVersion: '1.33.0',
      controlPlanes: [CP1, CP2],
      workers: [W1],
    },
  },
} as unknown as Pick<Installation, 'spec'>
const cpConfig = (k: string) => `version: v1alpha1\nmachine:\n  type: controlplane\ncluster:\n  apiServer:\n    image: registry.k8s.io/kube-apiserver:v${k}\n`
const workerConfig = (k: string) => `version: v1alpha1\nmachine:\n  type: worker\n  kubelet:\n    image: ghcr.io/siderolabs/kubelet:v${k}\n`
const down = (node: string) => new TalosctlError(node, 'talosctl version', 'rpc error: code = Unavailable desc = connection refused')

describe('talosStatusOf', () => {
  it('every node at the recorded versions: healthy, no problem, the versions per node', () => {
    const r = talosStatusOf(
      cr,
      new Map([CP1, CP2, W1].map((n) => [n, 'v1.14.1'])),
      new Map([
        [CP1, cpConfig('1.33.0')],
        [CP2, cpConfig('1.33.0')],
        [W1, workerConfig('1.33.0')],
      ]),
    )
    expect(r.healthy).toBe(true)
    expect(r.problems).toEqual([])
    expect(r.nodes).toEqual([
      {node: CP1, role: 'controlplane', talosVersion: 'v1.14.1', kubernetesVersion: '1.33.0'},
      {node: CP2, role: 'controlplane', talosVersion: 'v1.14.1', kubernetesVersion: '1.33.0'},
      {node: W1, role: 'worker', talosVersion: 'v1.14.1', kubernetesVersion: '1.33.0'},
    ])
    expect(formatTalosStatus(r)).toMatch(
      /all answer; recorded Talos v1\.14\.1, Kubernetes 1\.33\.0\n\nNODE +ROLE +TALOS +KUBERNETES\n10\.5\.0\.2 +controlplane +v1\.14\.1 +1\.33\.0/,
    )
  })

  it('a node that does not answer (or is not in the answer at all) is an error naming it; the others are still shown', () => {
    const r = talosStatusOf(
      cr,
      new Map<string, string | TalosctlError>([
        [CP1, 'v1.14.1'],
        [CP2, down(CP2)],
      ]),
      new Map<string, string | TalosctlError>([
        [CP1, cpConfig('1.33.0')],
        [CP2, down(CP2)],
        [W1, workerConfig('1.33.0')],
      ]),
    )
    expect(r.healthy).toBe(false)
    expect(r.problems.map((p) => [p.severity, p.what])).toEqual([
      ['error', `controlplane ${CP2} does not answer: rpc error: code = Unavailable desc = connection refused`],
      ['error', `worker ${W1} does not answer: no answer in time`],
    ])
    expect(r.nodes[0]).toEqual({node: CP1, role: 'controlplane', talosVersion: 'v1.14.1', kubernetesVersion: '1.33.0'})
    expect(formatTalosStatus(r)).toContain('NOT ANSWERING')
  })

  it('nodes upgraded with talosctl alone: a warning per version they run, naming them and what ichor records; still healthy', () => {
    const r = talosStatusOf(
      cr,
      new Map([
        [CP1, 'v1.14.2'],
        [CP2, 'v1.14.2'],
        [W1, 'v1.14.1'],
      ]),
      new Map([
        [CP1, cpConfig('1.33.1')],
        [CP2, cpConfig('1.33.0')],
        [W1, workerConfig('1.33.0')],
      ]),
    )
    expect(r.healthy).toBe(true)
    expect(r.problems.map((p) => [p.severity, p.what])).toEqual([
      ['warning', `${CP1}, ${CP2} run Talos v1.14.2; the IchorInstallation records v1.14.1 (changed outside ichor)`],
      ['warning', `${CP1} runs Kubernetes 1.33.1; the IchorInstallation records 1.33.0 (changed outside ichor)`],
    ])
    expect(r.problems[1]!.fix).toBe('ichor kubernetes upgrade --to 1.33.1 records it (talosctl upgrade-k8s alone does not)')
  })

  it("a worker's Kubernetes version is its kubelet image's tag: v1.14's KubeletConfig document, or v1alpha1's machine.kubelet", () => {
    // As talosctl v1.14.1 gen config writes a worker: the kubelet in a document of its own.
    const v114 = 'version: v1alpha1\nmachine:\n  type: worker\n---\napiVersion: v1alpha1\nkind: KubeletConfig\nimage: ghcr.io/siderolabs/kubelet:v1.37.0\n'
    expect(kubeletVersionOfConfig(v114)).toBe('1.37.0')
    expect(kubeletVersionOfConfig(`${workerConfig('1.34.2')}---\napiVersion: v1alpha1\nkind: HostnameConfig\nhostname: w1\n`)).toBe('1.34.2')
    expect(kubeletVersionOfConfig('version: v1alpha1\nmachine:\n  type: worker\n')).toBeUndefined()
  })
})
