// The offline parts of the Cilium day-2 commands: duration flags, KEY=VALUE arguments,
// how a change builds the new user layer, and the upgrade verdict of `cni status`.
import {mkdtempSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {describe, expect, it} from 'vitest'
import {newUserLayer} from '../../src/lib/values/layer.js'
import {ciliumUpgradeFailure} from '../../src/lib/cilium/tasks.js'
import {HelmReleaseError} from '../../src/lib/helm/release.js'
import {pinnedAssets} from '../../src/lib/assets/lock.js'
import {chartUpgrade} from '../../src/lib/cilium/status.js'
import {valuesInputFrom} from '../../src/lib/cli/values-args.js'

describe('KEY=VALUE arguments', () => {
  it('are checked in helm --set syntax before anything runs', () => {
    expect(valuesInputFrom(['a.b=1'], {})).toEqual({kind: 'edit', files: [], sets: [{flag: 'set', text: 'a.b=1'}], replace: false})
    expect(() => valuesInputFrom(['hubble.relay.enabled'], {})).toThrowError(
      expect.objectContaining({exitCode: 2, message: expect.stringMatching(/argument "hubble\.relay\.enabled": expected KEY=VALUE/)}),
    )
  })
})

describe('newUserLayer', () => {
  const stored = {hubble: {relay: {enabled: true}}, operator: {replicas: 1}}
  it('merges KEY=VALUE onto the stored layer without changing it', () => {
    const next = newUserLayer(stored, {kind: 'edit', files: [], sets: ['hubble.ui.enabled=true'], replace: false})
    expect(next).toEqual({hubble: {relay: {enabled: true}, ui: {enabled: true}}, operator: {replicas: 1}})
    expect(stored).toEqual({hubble: {relay: {enabled: true}}, operator: {replicas: 1}})
  })
  it('with --replace, files then arguments are the whole layer', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'ichor-unit-')), 'v.yaml')
    writeFileSync(file, 'bandwidthManager:\n  enabled: true\n')
    expect(newUserLayer(stored, {kind: 'edit', files: [file], sets: ['operator.replicas=2'], replace: true})).toEqual({
      bandwidthManager: {enabled: true},
      operator: {replicas: 2},
    })
  })
  it('makes the change from the files and flags alone, then merges it as helm upgrade --reuse-values does', () => {
    const layer = {tolerations: [{key: 'a'}, {key: 'b'}], hubble: true}
    expect(newUserLayer(layer, {kind: 'edit', files: [], sets: ['tolerations[1].operator=Exists', 'hubble.relay.enabled=true'], replace: false})).toEqual({
      tolerations: [null, {operator: 'Exists'}],
      hubble: {relay: {enabled: true}},
    })
  })
  it('with no input, is the stored layer (a reapply)', () => {
    expect(newUserLayer(stored, {kind: 'edit', files: [], sets: [], replace: false})).toEqual(stored)
  })
})

describe('chartUpgrade: one minor at a time, never down', () => {
  it('judges the installed chart against the pin', () => {
    const pin = pinnedAssets().cilium.version
    const [major, minor] = pin.split('.').map(Number) as [number, number]
    expect(chartUpgrade(pin).upgrade).toBe('up-to-date')
    expect(chartUpgrade(`${major}.${minor - 1}.4`)).toMatchObject({upgrade: 'available', detail: `ichor cni upgrade --to ${pin}`})
    expect(chartUpgrade(`${major}.${minor - 2}.9`).upgrade).toBe('too-far')
    expect(chartUpgrade(`${major}.${minor + 1}.0`).upgrade).toBe('installed-is-newer')
  })
})

// Issue 21 point 1: a failed helm step reports helm's own error; pods are blamed only when
// they are not ready, and "the previous values" only when helm says it rolled back.
describe('ciliumUpgradeFailure', () => {
  const ready = {desired: 2, ready: 2, rolledOut: true, state: '2/2 ready'}
  const refusedByHelm = new HelmReleaseError(
    'upgrade',
    'cilium',
    'UPGRADE FAILED: an error occurred while rolling back the release. original upgrade error: forceConflicts enabled when serverSideApply disabled',
    {rolledBack: false},
  )

  it("a helm refusal with every pod ready: helm's words, the real release status, no pod blamed", () => {
    const e = ciliumUpgradeFailure(refusedByHelm, {
      after: {revision: 3, status: 'failed'},
      daemonSet: ready,
      operator: {...ready, desired: 1, ready: 1, state: '1/1 ready'},
    })
    expect(e.message).toContain('forceConflicts enabled when serverSideApply disabled')
    expect(e.message).toMatch(/revision 3 is failed/)
    expect(e.message).not.toMatch(/previous values/)
    expect(e.hint).not.toMatch(/pods are not ready|get pods/)
    expect(e.hint).toMatch(/helm history cilium -n kube-system/)
  })

  it('a rollout that did not become ready and was rolled back: names the workload and the pods', () => {
    const rolled = new HelmReleaseError(
      'upgrade',
      'cilium',
      'UPGRADE FAILED: release cilium failed, and has been rolled back due to rollback-on-failure being set: context deadline exceeded',
      {rolledBack: true},
    )
    const e = ciliumUpgradeFailure(rolled, {
      after: {revision: 4, status: 'deployed'},
      daemonSet: {desired: 2, ready: 1, rolledOut: false, state: '1/2 ready'},
      operator: ready,
    })
    expect(e.message).toMatch(/rolled back to revision 4 \(deployed\) with the previous values/)
    expect(e.message).toMatch(/cilium DaemonSet 1\/2 ready/)
    expect(e.hint).toMatch(/kubectl -n kube-system get pods -l k8s-app=cilium/)
  })
})

describe('ciliumUpgradeFailure after a rollback that made the pods ready again', () => {
  it("still points at the pods when helm's wait timed out", () => {
    const ready = {desired: 2, ready: 2, rolledOut: true, state: '2/2 ready'}
    const e = ciliumUpgradeFailure(
      new HelmReleaseError(
        'upgrade',
        'cilium',
        'UPGRADE FAILED: release cilium failed, and has been rolled back due to atomic being set: timed out waiting for the condition',
        {rolledBack: true},
      ),
      {after: {revision: 6, status: 'deployed'}, daemonSet: ready, operator: ready},
    )
    expect(e.hint).toMatch(/get pods -l k8s-app=cilium/)
  })
})
