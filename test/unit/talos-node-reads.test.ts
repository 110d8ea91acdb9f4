// Issue 25: a run reads each node's machine config once and shares it between its steps, drops
// it on every write to that node, and never runs more than TALOSCTL_PARALLELISM talosctl
// processes at once. talosctl here is a small shell stand-in that logs each call (no node).
import {mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, afterEach, beforeAll, describe, expect, it} from 'vitest'
import {TalosNodeReads} from '../../src/lib/talos/node-reads.js'
import {getMachineConfig, patchMachineConfig, TALOSCTL_PARALLELISM} from '../../src/lib/talos/talosctl.js'

let root: string
const saved = process.env.ICHOR_TALOSCTL
const calls = () => readFileSync(join(root, 'calls'), 'utf8').trim().split('\n').filter(Boolean)

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'ichor-node-reads-'))
  mkdirSync(join(root, 'running'))
  // `get machineconfig` answers the node's generation (bumped by `patch`); every call is logged,
  // and how many calls run at once is recorded while each sleeps a little.
  writeFileSync(
    join(root, 'talosctl'),
    `#!/bin/sh
R='${root}'
node=""; prev=""
for a in "$@"; do [ "$prev" = "--nodes" ] && node="$a"; prev="$a"; done
echo "$1 $2 $node" >> "$R/calls"
mkdir "$R/running/$$"; ls "$R/running" | wc -l >> "$R/at-once"
sleep 0.2
rmdir "$R/running/$$"
gen=$(cat "$R/gen-$node" 2>/dev/null || echo 1)
case "$1" in
  get) printf 'metadata:\\n  id: v1alpha1\\nspec: "machine:\\\\n  generation: %s\\\\n"\\n' "$gen" ;;
  patch) echo $((gen + 1)) > "$R/gen-$node" ;;
esac
`,
    {mode: 0o755},
  )
  writeFileSync(join(root, 'talosconfig'), 'context: x\n')
  process.env.ICHOR_TALOSCTL = join(root, 'talosctl')
})
afterEach(() => writeFileSync(join(root, 'calls'), ''))
afterAll(() => {
  if (saved === undefined) delete process.env.ICHOR_TALOSCTL
  else process.env.ICHOR_TALOSCTL = saved
  rmSync(root, {recursive: true, force: true})
})

describe('the run-wide reads of the Talos nodes', () => {
  it('Given a node read once, Then later reads and the reachability check reuse it: one talosctl call', async () => {
    const reads = new TalosNodeReads()
    const talosconfig = join(root, 'talosconfig')
    const [a, b] = await Promise.all([reads.machineConfig('10.0.0.1', talosconfig), reads.machineConfig('10.0.0.1', talosconfig)])
    expect(a).toBe(b)
    expect(await reads.reachable('10.0.0.1', {talosconfig})).toEqual({node: '10.0.0.1', state: 'configured', ours: true})
    expect(calls()).toEqual(['get machineconfig 10.0.0.1'])
  })

  it('Given a write to the node, Then the next read asks the node again and sees the change; other nodes keep theirs', async () => {
    const reads = new TalosNodeReads()
    const talosconfig = join(root, 'talosconfig')
    const before = await reads.machineConfig('10.0.0.2', talosconfig)
    await reads.machineConfig('10.0.0.3', talosconfig)
    await reads.write('10.0.0.2', () => patchMachineConfig({node: '10.0.0.2', talosconfig, patch: 'machine: {}\n', mode: 'no-reboot'}))
    const after = await reads.machineConfig('10.0.0.2', talosconfig)
    await reads.machineConfig('10.0.0.3', talosconfig)
    expect(before).toMatch(/generation: 1/)
    expect(after).toMatch(/generation: 2/)
    expect(calls()).toEqual(['get machineconfig 10.0.0.2', 'get machineconfig 10.0.0.3', 'patch machineconfig 10.0.0.2', 'get machineconfig 10.0.0.2'])
  })

  it(`Given reads of 20 nodes at once, Then at most ${TALOSCTL_PARALLELISM} talosctl processes run at the same time`, async () => {
    writeFileSync(join(root, 'at-once'), '')
    const talosconfig = join(root, 'talosconfig')
    const nodes = Array.from({length: 20}, (_, i) => `10.0.1.${i + 1}`)
    await Promise.all(nodes.map((node) => getMachineConfig({node, talosconfig})))
    expect(calls()).toHaveLength(20)
    const peak = Math.max(...readFileSync(join(root, 'at-once'), 'utf8').trim().split('\n').map(Number))
    expect(TALOSCTL_PARALLELISM).toBe(8)
    expect(peak).toBeLessThanOrEqual(8)
    expect(peak).toBeGreaterThan(1) // still in parallel
  }, 30_000)
})
