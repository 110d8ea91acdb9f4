// The upgrade planner over the compatibility data as shipped: from a combination, the hops the
// upgrade commands would take, in order, each allowed by the rules those commands check.
import {describe, expect, it} from 'vitest'
import {checkKubernetesUpgrade} from '../../src/lib/kubernetes/policy.js'
import {judgeCiliumUpgrade} from '../../src/lib/cilium/versions.js'
import {checkTalosUpgrade} from '../../src/lib/talos-upgrade/policy.js'
import {defaultTarget, latestTarget, planUpgrade, type Versions} from '../../src/lib/upgrade-path/planner.js'

const v = (talos: string, kubernetes: string, cilium: string): Versions => ({talos, kubernetes, cilium})

/** Talos v1.13 + Cilium 1.18.0 + Kubernetes 1.32 to the default set, which is the newest the data allows too. */
const FROM_V113 = [
  'ichor talos upgrade --to v1.13.9',
  'ichor talos upgrade --to v1.14.1',
  'ichor cni upgrade --to 1.18.12',
  'ichor cni upgrade --to 1.19.6',
  'ichor kubernetes upgrade --to 1.33.6',
  'ichor cni upgrade --to 1.20.0',
  'ichor kubernetes upgrade --to 1.34.1',
  'ichor kubernetes upgrade --to 1.35.4',
  'ichor kubernetes upgrade --to 1.36.3',
]

const CASES: {name: string; from: Versions; to: 'default' | 'latest'; commands: string[]}[] = [
  {
    name: 'Talos v1.13 + Cilium 1.18.0 + Kubernetes 1.32, to the newest the data allows',
    from: v('v1.13.0', '1.32.0', '1.18.0'),
    to: 'latest',
    commands: FROM_V113,
  },
  {
    name: 'Talos v1.13 + Cilium 1.18.0 + Kubernetes 1.32, to the default set (the newest the data allows too)',
    from: v('v1.13.0', '1.32.0', '1.18.0'),
    to: 'default',
    commands: FROM_V113,
  },
  {name: 'the default set, to itself: nothing', from: defaultTarget(), to: 'default', commands: []},
  {name: 'the default set, to the newest: nothing (the default is the newest)', from: defaultTarget(), to: 'latest', commands: []},
  {
    name: "a cluster init made with --cilium-chart 1.18.0 (Kubernetes 1.33, that chart's default), to the default set",
    from: v('v1.14.1', '1.33.6', '1.18.0'),
    to: 'default',
    commands: [
      'ichor cni upgrade --to 1.18.12',
      'ichor cni upgrade --to 1.19.6',
      'ichor cni upgrade --to 1.20.0',
      'ichor kubernetes upgrade --to 1.34.1',
      'ichor kubernetes upgrade --to 1.35.4',
      'ichor kubernetes upgrade --to 1.36.3',
    ],
  },
  {
    name: 'Kubernetes ahead of the default (Talos v1.14 default 1.37 with Cilium 1.18): Cilium climbs, nothing goes down',
    from: v('v1.14.1', '1.37.0', '1.18.0'),
    to: 'default',
    commands: ['ichor cni upgrade --to 1.18.12', 'ichor cni upgrade --to 1.19.6', 'ichor cni upgrade --to 1.20.0'],
  },
  {
    name: 'Kubernetes 1.35 on Cilium 1.19: Cilium 1.20 comes before Kubernetes 1.36',
    from: v('v1.14.1', '1.35.4', '1.19.6'),
    to: 'latest',
    commands: ['ichor cni upgrade --to 1.20.0', 'ichor kubernetes upgrade --to 1.36.3'],
  },
  {
    name: 'Talos v1.10 with Kubernetes 1.29: Kubernetes climbs inside each Talos minor before the next Talos minor needs it',
    from: v('v1.10.9', '1.29.7', '1.18.12'),
    to: 'default',
    commands: [
      'ichor talos upgrade --to v1.11.6',
      'ichor kubernetes upgrade --to 1.30.5',
      'ichor talos upgrade --to v1.12.11',
      'ichor kubernetes upgrade --to 1.31.4',
      'ichor talos upgrade --to v1.13.9',
      'ichor kubernetes upgrade --to 1.32.4',
      'ichor talos upgrade --to v1.14.1',
      'ichor cni upgrade --to 1.19.6',
      'ichor kubernetes upgrade --to 1.33.6',
      'ichor cni upgrade --to 1.20.0',
      'ichor kubernetes upgrade --to 1.34.1',
      'ichor kubernetes upgrade --to 1.35.4',
      'ichor kubernetes upgrade --to 1.36.3',
    ],
  },
]

describe('ichor upgrade plan: the planner', () => {
  it.each(CASES)('$name', ({from, to, commands}) => {
    const plan = planUpgrade(from, to === 'latest' ? latestTarget() : defaultTarget())
    expect(plan.blocked).toBeUndefined()
    expect(plan.hops.map((h) => h.command)).toEqual(commands)
    for (const h of plan.hops) expect(h.source, h.command).not.toBe('')
  })

  it('every hop is one the upgrade command itself accepts, in the state the hops before it leave', () => {
    for (const {from, to} of CASES) {
      const plan = planUpgrade(from, to === 'latest' ? latestTarget() : defaultTarget())
      let s = {...from}
      for (const h of plan.hops) {
        if (h.component === 'talos')
          expect(() => checkTalosUpgrade({to: h.to, nodes: [{node: 'n', version: s.talos}], kubernetesVersion: s.kubernetes})).not.toThrow()
        if (h.component === 'cilium') expect(judgeCiliumUpgrade(s.cilium, h.to).kind, h.command).not.toBe('refused')
        if (h.component === 'kubernetes')
          expect(() =>
            checkKubernetesUpgrade({from: s.kubernetes, to: h.to, talosVersion: s.talos, ciliumVersion: s.cilium, allowUntested: false}),
          ).not.toThrow()
        s = {...s, [h.component]: h.to}
      }
    }
  })

  it('says why a hop comes first, naming what waits for it', () => {
    const plan = planUpgrade(v('v1.14.1', '1.35.4', '1.19.6'), latestTarget())
    expect(plan.hops[0]!.why).toMatch(/^Kubernetes 1\.36 needs Cilium 1\.20 first: Cilium 1\.19 is tested on Kubernetes 1\.32 to 1\.35/)
    expect(plan.hops[0]!.source).toMatch(/compatibility\.rst/)
    const talos = planUpgrade(v('v1.13.0', '1.32.0', '1.18.0'), defaultTarget())
    expect(talos.hops[0]!.why).toMatch(/newest v1\.13 patch: a Talos minor is left from it/)
  })

  it('a target the rules cannot reach stops with the reason, keeping the hops that are right', () => {
    // Cilium 1.18 is tested up to Kubernetes 1.33 and the target keeps it there: Kubernetes 1.34 waits for a Cilium that never comes.
    const plan = planUpgrade(v('v1.14.1', '1.33.6', '1.18.12'), v('v1.14.1', '1.36.3', '1.18.12'))
    expect(plan.hops).toEqual([])
    expect(plan.blocked).toMatch(/Kubernetes 1\.33 cannot move on: Cilium 1\.18 is tested on Kubernetes 1\.30 to 1\.33/)
  })
})
