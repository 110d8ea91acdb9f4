import {describe, expect, it} from 'vitest'
import {checkInitInputs, initInputWarnings} from '../../src/lib/init/inputs.js'

const nodes = (n: number) => Array.from({length: n}, (_, i) => `192.0.2.${i + 1}`)
const inputsWith = (controlPlanes: number) =>
  checkInitInputs({clusterName: 'c', endpoint: 'https://192.0.2.100:6443', controlPlanes: nodes(controlPlanes), workers: []}, {requireNodes: true})

describe('initInputWarnings: an even number of control planes', () => {
  it.each([2, 4])('warns about %i control planes (etcd tolerates no more failures than with one fewer)', (n) => {
    const warnings = initInputWarnings(inputsWith(n))
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toContain(`${n} control planes`)
    expect(warnings[0]).toContain(`${n - 1}`)
    expect(warnings[0]).toContain('--control-plane')
  })

  it.each([1, 3, 5])('says nothing about %i control planes', (n) => {
    expect(initInputWarnings(inputsWith(n))).toEqual([])
  })
})
