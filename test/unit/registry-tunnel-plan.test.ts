// The registry tunnel is closed by the step right after publishing (issue 13, point 2): the
// Orders, the policies and the long wait on Argo CD run with no tunnel open.
import {describe, expect, it} from 'vitest'
import {initPlanSteps} from '../../src/lib/plans/init.js'

describe('init closes the registry tunnel as soon as publishing ends', () => {
  it('the step after publish-bundles closes it', () => {
    const ids = initPlanSteps().map((s) => s.id)
    expect(ids[ids.indexOf('publish-bundles') + 1]).toBe('close-registry-tunnel')
    expect(ids.indexOf('close-registry-tunnel')).toBeLessThan(ids.indexOf('wait-applications'))
  })
})
