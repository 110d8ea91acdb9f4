// `cni values diff`: unified diffs from the jsdiff library, the same shape for the effective
// values and the rendered manifest, and colour only where a terminal wants it.
import {describe, expect, it} from 'vitest'
import {stringify} from 'yaml'
import {colourDiff, paintDiff, unifiedDiff} from '../../src/lib/text/diff.js'
import {wantsColour} from '../../src/lib/log/colour.js'
import {effectiveValuesDiff} from '../../src/lib/cilium/diff.js'
import type {ReleaseRecord} from '../../src/lib/helm/release-record.js'

const release = (config: Record<string, unknown>): ReleaseRecord => ({
  secretName: 'sh.helm.release.v1.cilium.v3',
  release: 'cilium',
  namespace: 'kube-system',
  revision: 3,
  status: 'deployed',
  chartName: 'cilium',
  chartVersion: '1.18.0',
  config,
  manifest: '',
})
const lines = (n: number, change?: number) => Array.from({length: n}, (_, i) => `line${i + 1}${i + 1 === change ? ' changed' : ''}`).join('\n') + '\n'

describe('unifiedDiff', () => {
  it('is empty when both sides are equal', () => {
    expect(unifiedDiff('a: 1\n', 'a: 1\n', ['x', 'y'])).toBe('')
  })

  it('prints the labels, one hunk header and three lines of context either side, as `diff -u` does', () => {
    expect(unifiedDiff(lines(20), lines(20, 10), ['before', 'after'])).toBe(
      ['--- before', '+++ after', '@@ -7,7 +7,7 @@', ' line7', ' line8', ' line9', '-line10', '+line10 changed', ' line11', ' line12', ' line13', ''].join(
        '\n',
      ),
    )
  })

  it('against nothing, every line is an addition', () => {
    expect(unifiedDiff('', 'a: 1\nb: 2\n', ['no release', 'proposed'])).toBe('--- no release\n+++ proposed\n@@ -0,0 +1,2 @@\n+a: 1\n+b: 2\n')
  })
})

describe('effectiveValuesDiff', () => {
  it('has the same shape as the manifest diff: sorted YAML through the same unified diff, labelled with the revision', () => {
    const live = {kubeProxyReplacement: true, hubble: {relay: {enabled: false}}}
    const proposed = {hubble: {relay: {enabled: true}}, kubeProxyReplacement: true}
    const diff = effectiveValuesDiff(release(live), proposed)
    expect(diff).toBe(
      unifiedDiff(stringify(live, {sortMapEntries: true}), stringify(proposed, {sortMapEntries: true}), [
        'release cilium revision 3 (effective values)',
        'proposed (effective values)',
      ]),
    )
    expect(diff.split('\n').slice(0, 3)).toEqual(['--- release cilium revision 3 (effective values)', '+++ proposed (effective values)', '@@ -1,4 +1,4 @@'])
    expect(diff).toMatch(/^-\s+enabled: false$/m)
    expect(diff).toMatch(/^\+\s+enabled: true$/m)
  })

  it('is empty when the release already runs the values', () => {
    expect(effectiveValuesDiff(release({a: {b: 1}, c: 2}), {c: 2, a: {b: 1}})).toBe('')
  })
})

describe('colour', () => {
  it('only on a terminal, and not when NO_COLOR is set to a non-empty value', () => {
    expect(wantsColour({isTTY: true}, {})).toBe(true)
    expect(wantsColour({isTTY: true}, {NO_COLOR: ''})).toBe(true)
    expect(wantsColour({isTTY: true}, {NO_COLOR: '1'})).toBe(false)
    expect(wantsColour({isTTY: false}, {})).toBe(false)
    expect(wantsColour({}, {})).toBe(false)
  })

  it('paints removals red, additions green, hunk headers cyan and the labels bold; leaves context alone', () => {
    const diff = unifiedDiff('a: 1\nb: 1\n', 'a: 1\nb: 2\n', ['old', 'new'])
    expect(colourDiff(diff).split('\n')).toEqual([
      '\u001B[1m--- old\u001B[0m',
      '\u001B[1m+++ new\u001B[0m',
      '\u001B[36m@@ -1,2 +1,2 @@\u001B[0m',
      ' a: 1',
      '\u001B[31m-b: 1\u001B[0m',
      '\u001B[32m+b: 2\u001B[0m',
      '',
    ])
    expect(paintDiff(diff, {isTTY: true}, {})).toBe(colourDiff(diff))
    expect(paintDiff(diff, {isTTY: true}, {NO_COLOR: '1'})).toBe(diff)
    expect(paintDiff(diff, {isTTY: false}, {})).toBe(diff)
  })
})
