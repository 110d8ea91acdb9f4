import {describe, expect, it} from 'vitest'
import {pinnedAssets} from '../../src/lib/assets/lock.js'
import {compareVersions, describeAsset, resolveAsset} from '../../src/lib/assets/resolve.js'
import {UPSTREAM} from '../support/upstream.js'

describe('asset resolution', () => {
  it('finds the pinned Cilium chart in the mirror and says it matches the pin', () => {
    const a = resolveAsset('cilium', {mirror: UPSTREAM.dir})
    // The newest chart in the mirror is the pin (the mirror also holds older ones).
    expect(a.version).toBe(pinnedAssets().cilium.version)
    expect(a.path).toBe(UPSTREAM.pinnedCiliumChart)
    expect(a.matchesPin).toBe(true)
    expect(describeAsset(a)).toContain(`matches the pin ${pinnedAssets().cilium.version}`)
  })

  it('falls back to the newest Argo CD chart in the mirror and says it is not the pin', () => {
    const a = resolveAsset('argocd', {mirror: UPSTREAM.dir})
    expect(a.version).toBe('10.1.1')
    expect(a.matchesPin).toBe(false)
    expect(describeAsset(a)).toMatch(/does NOT match the pin 10\.11\.6/)
  })

  it('reads the Kokumi version from the image tag of an explicit manifest', () => {
    const a = resolveAsset('kokumi', {override: UPSTREAM.kokumiManifest})
    expect(a.version).toBe('0.14.0')
    expect(a.origin).toBe('flag')
    expect(a.matchesPin).toBe(false)
  })

  it('refuses a chart of the wrong name given for cilium', () => {
    expect(() => resolveAsset('cilium', {override: UPSTREAM.argocdChart})).toThrow(/is the chart "argo-cd", expected "cilium"/)
  })

  it('refuses a missing override file naming the flag', () => {
    expect(() => resolveAsset('argocd', {override: '/nonexistent/argo.tgz'})).toThrow(/--argocd-chart: no such file/)
  })

  it('orders versions numerically', () => {
    expect(compareVersions('1.20.0', '1.9.9')).toBeGreaterThan(0)
    expect(compareVersions('1.18.0-rc1', '1.18.0')).toBeLessThan(0)
  })
})
