// The registry tunnel is closed by the step right after publishing (issue 13, point 2): the
// Orders, the policies and the long wait on Argo CD run with no tunnel open.
import {describe, expect, it} from 'vitest'
import type {InitInputs} from '../../src/lib/init/inputs.js'
import {initPlanSteps} from '../../src/lib/plans/init.js'
import {localState} from '../../src/lib/state/local.js'

const inputs = {clusterName: 'homelab', controlPlanes: ['192.0.2.10'], workers: []} as unknown as InitInputs
const generated = {kokumiAdminPassword: 'x', argocdRedisPassword: 'x'} as never
const userValues = {cilium: {}, argocd: {}, kokumi: {}}

describe('init closes the registry tunnel as soon as publishing ends', () => {
  it('the step after publish-bundles closes it', () => {
    const ids = initPlanSteps({inputs, state: localState('homelab', '/nonexistent'), generated, userValues, allowReboot: false, timeoutMs: 1}).map((s) => s.id)
    expect(ids[ids.indexOf('publish-bundles') + 1]).toBe('close-registry-tunnel')
    expect(ids.indexOf('close-registry-tunnel')).toBeLessThan(ids.indexOf('wait-applications'))
  })
})
