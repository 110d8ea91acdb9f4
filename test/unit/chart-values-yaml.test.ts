// The chart's values.yaml is parsed once per process (issue 25): the chart defaults of the
// effective values and the known-keys tree of the unknown-key check both read it, and a cold
// `cni values validate` parsed Cilium's 160 KB values.yaml twice. Against the real Cilium 1.18.0 chart.
import jsyaml from 'js-yaml'
import {describe, expect, it, vi} from 'vitest'
import {readChartArchive} from '../../src/lib/chart/archive.js'
import {chartDefaultValues} from '../../src/lib/cilium/effective.js'
import {knownKeys} from '../../src/lib/values/known-keys.js'
import {UPSTREAM} from '../support/upstream.js'

describe("the chart's values.yaml", () => {
  it('Given the chart defaults and the known keys, When both are read, Then values.yaml is parsed once', () => {
    const load = vi.spyOn(jsyaml, 'load')
    const chart = readChartArchive(UPSTREAM.ciliumChart)
    const defaults = chartDefaultValues(chart)
    const keys = knownKeys(chart)
    expect(Object.keys(defaults)).toContain('hubble')
    expect(keys.children.get('hubble')?.children.has('relay')).toBe(true)
    expect(load.mock.calls.filter(([text]) => text === chart.files.get('values.yaml')!.toString('utf8'))).toHaveLength(1)
  })
})
