// The chart schema check compiles only what a call carries (issue 25): a cold
// `cni values validate` spent most of its own CPU time in ajv compiling whole top-level
// sub-schemas of Cilium's values.schema.json (all of `hubble` for `hubble.relay.enabled`).
// Against the real Cilium 1.18.0 chart.
import {describe, expect, it} from 'vitest'
import {readChartArchive} from '../../src/lib/chart/archive.js'
import {compiledSchemaPaths, validateAgainstSchema} from '../../src/lib/values/schema.js'
import {UPSTREAM} from '../support/upstream.js'

describe('the chart schema, compiled per key a call carries', () => {
  const chart = readChartArchive(UPSTREAM.ciliumChart)

  it('Given hubble.relay.enabled, When it is checked, Then only that leaf of the schema is compiled, not all of hubble', () => {
    expect(validateAgainstSchema(chart, {hubble: {relay: {enabled: true}}})).toEqual([])
    expect(compiledSchemaPaths(chart)).toEqual(['hubble.relay.enabled'])
  })

  it('reports the same issues as a check of the whole sub-schema: a wrong leaf, and a scalar where the chart has a map', () => {
    expect(validateAgainstSchema(chart, {hubble: {relay: {enabled: 'yes', replicas: 'two'}}, debug: true})).toEqual([
      {path: 'hubble.relay.enabled', message: 'must be boolean (got string "yes") (chart schema)'},
      {path: 'hubble.relay.replicas', message: 'must be integer (got string "two") (chart schema)'},
      {path: 'debug', message: 'must be object (got boolean true) (chart schema)'},
    ])
  })
})
