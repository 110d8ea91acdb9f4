// `ichor talos upgrade`'s rules (src/lib/talos-upgrade/policy.ts), the installer image it takes
// from a node's machine config, and the reading of `talosctl etcd status`.
import {describe, expect, it} from 'vitest'
import {IchorError} from '../../src/lib/errors/errors.js'
import {kubernetesRangeOfTalos, newestTalosPatch} from '../../src/lib/compatibility/queries.js'
import {checkTalosUpgrade, retagImage} from '../../src/lib/talos-upgrade/policy.js'
import {installImageOfConfig} from '../../src/lib/talos/machine-config.js'
import {parseEtcdStatusTable} from '../../src/lib/talos/talosctl.js'
import {parseTalosVersion, SUPPORTED_TALOS} from '../../src/lib/talos/versions.js'

function refusal(fn: () => unknown): IchorError {
  try {
    fn()
  } catch (error) {
    expect(error).toBeInstanceOf(IchorError)
    return error as IchorError
  }
  throw new Error('expected a refusal')
}

const nodes = (...versions: string[]) => versions.map((version, i) => ({node: `10.5.0.${i + 2}`, version}))

describe('checkTalosUpgrade', () => {
  it('a newer patch of the same minor: every node behind, in the order given', () => {
    expect(checkTalosUpgrade({to: '1.14.1', nodes: nodes('v1.14.0', 'v1.14.0'), kubernetesVersion: '1.37.0'})).toEqual({
      to: 'v1.14.1',
      behind: ['10.5.0.2', '10.5.0.3'],
      atTarget: [],
    })
  })

  it('nodes already at the target are not upgraded again (upgraded by hand, or by a run that was stopped)', () => {
    expect(checkTalosUpgrade({to: 'v1.14.1', nodes: nodes('v1.14.1', 'v1.14.0'), kubernetesVersion: '1.37.0'})).toMatchObject({
      behind: ['10.5.0.3'],
      atTarget: ['10.5.0.2'],
    })
  })

  it('the next minor from the newest patch ichor knows of the current one', () => {
    expect(checkTalosUpgrade({to: 'v1.14.1', nodes: nodes(newestTalosPatch('1.13')!), kubernetesVersion: '1.36.2'}).behind).toEqual(['10.5.0.2'])
  })

  it('a downgrade is refused naming the node and talosctl rollback (exit 2)', () => {
    const e = refusal(() => checkTalosUpgrade({to: 'v1.14.0', nodes: nodes('v1.14.0', 'v1.14.1'), kubernetesVersion: '1.37.0'}))
    expect(e.exitCode).toBe(2)
    expect(e.message).toBe('--to: v1.14.0 is older than the v1.14.1 node 10.5.0.3 runs: ichor never downgrades Talos')
    expect(e.hint).toMatch(/talosctl rollback -n 10\.5\.0\.3/)
  })

  it('a step over a minor is refused, naming the upgrade that comes first', () => {
    const e = refusal(() => checkTalosUpgrade({to: 'v1.14.1', nodes: nodes('v1.12.11'), kubernetesVersion: '1.33.0'}))
    expect(e.exitCode).toBe(2)
    expect(e.message).toMatch(/node 10\.5\.0\.2 runs v1\.12\.11; v1\.14\.1 skips a minor: Talos upgrades one minor at a time/)
    expect(e.hint).toBe('ichor talos upgrade --to v1.13.9 first')
    // From an older v1.12 patch, the newest v1.12 patch comes first.
    expect(refusal(() => checkTalosUpgrade({to: 'v1.14.1', nodes: nodes('v1.12.3'), kubernetesVersion: '1.33.0'})).hint).toBe(
      'ichor talos upgrade --to v1.12.11 first',
    )
  })

  it('a minor left before its newest patch is refused, naming that patch', () => {
    const e = refusal(() => checkTalosUpgrade({to: 'v1.14.1', nodes: nodes('v1.13.4'), kubernetesVersion: '1.36.0'}))
    expect(e.message).toMatch(/node 10\.5\.0\.2 runs v1\.13\.4; a minor is left from its newest patch \(v1\.13\.9\)/)
    expect(e.hint).toBe('ichor talos upgrade --to v1.13.9 first, then --to v1.14.1')
  })

  it("a target whose Talos does not run the cluster's Kubernetes names the ichor kubernetes upgrade that comes first", () => {
    const e = refusal(() => checkTalosUpgrade({to: 'v1.14.1', nodes: nodes('v1.13.9'), kubernetesVersion: '1.31.4'}))
    expect(e.exitCode).toBe(2)
    expect(e.message).toBe('--to: Talos v1.14.1 runs Kubernetes 1.32.0 to 1.37.x; the cluster runs 1.31.4')
    expect(e.hint).toMatch(/^upgrade Kubernetes first: ichor kubernetes upgrade --to 1\.32\.N/)
  })

  it('a version that is not one, or a minor ichor does not support, names --to', () => {
    expect(refusal(() => checkTalosUpgrade({to: '1.14', nodes: nodes('v1.14.0'), kubernetesVersion: '1.37.0'})).message).toMatch(
      /^--to: "1\.14" is not a Talos release version/,
    )
    expect(refusal(() => checkTalosUpgrade({to: 'v1.15.0', nodes: nodes('v1.14.1'), kubernetesVersion: '1.37.0'})).message).toMatch(
      /^--to: v1\.15\.0 is not supported/,
    )
  })

  it('every supported minor has a newest patch and a Kubernetes range', () => {
    const newest = parseTalosVersion(`${SUPPORTED_TALOS.newestMinor}.0`)
    for (let minor = parseTalosVersion(SUPPORTED_TALOS.oldest).minor; minor <= newest.minor; minor++) {
      expect(newestTalosPatch(`1.${minor}`), `1.${minor}`).toMatch(new RegExp(`^v1\\.${minor}\\.\\d+$`))
      expect(kubernetesRangeOfTalos(`1.${minor}`), `1.${minor}`).toBeDefined()
    }
  })
})

describe('the installer image of a node', () => {
  it("Talos v1.14's UnattendedInstallConfig, else v1alpha1's machine.install.image", () => {
    const v114 = `version: v1alpha1\nmachine:\n  type: worker\n---\napiVersion: v1alpha1\nkind: UnattendedInstallConfig\ninstaller:\n  image: factory.talos.dev/metal-installer/abc:v1.14.0\n`
    expect(installImageOfConfig(v114)).toBe('factory.talos.dev/metal-installer/abc:v1.14.0')
    expect(installImageOfConfig(`version: v1alpha1\nmachine:\n  install:\n    image: ghcr.io/siderolabs/installer:v1.13.9\n`)).toBe(
      'ghcr.io/siderolabs/installer:v1.13.9',
    )
    expect(installImageOfConfig(`version: v1alpha1\nmachine:\n  type: worker\n`)).toBeUndefined()
  })

  it('keeps the repository (a schematic keeps its extensions), takes the new tag, drops a digest', () => {
    expect(retagImage('factory.talos.dev/metal-installer/abc:v1.14.0', 'v1.14.1')).toBe('factory.talos.dev/metal-installer/abc:v1.14.1')
    expect(retagImage('registry.lan:5000/installer:v1.13.9@sha256:00ff', 'v1.14.1')).toBe('registry.lan:5000/installer:v1.14.1')
    expect(retagImage('registry.lan:5000/installer', 'v1.14.1')).toBe('registry.lan:5000/installer:v1.14.1')
  })
})

describe('talosctl etcd status', () => {
  it("reads talosctl v1.14's table: each node's member, whether it is a learner, its errors", () => {
    const out = [
      'NODE       MEMBER             DB SIZE   IN USE            LEADER             RAFT INDEX   RAFT TERM   RAFT APPLIED INDEX   LEARNER   PROTOCOL   STORAGE   ERRORS',
      '10.5.0.2   0000000a05000002   4.2 MB    3.1 MB (73.81%)   0000000a05000002   4711         2           4711                 false     3.6.0      3.6.0',
      '10.5.0.3   0000000a05000003   4.2 MB    3.1 MB (73.81%)   0000000a05000002   4711         2           4711                 true      3.6.0      3.6.0     etcdserver: no space',
    ].join('\n')
    expect(parseEtcdStatusTable(out)).toEqual([
      {node: '10.5.0.2', member: '0000000a05000002', learner: false, errors: ''},
      {node: '10.5.0.3', member: '0000000a05000003', learner: true, errors: 'etcdserver: no space'},
    ])
    expect(parseEtcdStatusTable('')).toEqual([])
  })
})
