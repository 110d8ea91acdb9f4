// Issue 25: a run reads each node's machine config once and shares it between its steps, drops
// it on every write to that node, and never runs more than TALOSCTL_PARALLELISM talosctl
// processes at once. talosctl here is a small shell stand-in that logs each call (no node).
import {mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, afterEach, beforeAll, describe, expect, it} from 'vitest'
import {TalosNodeReads} from '../../src/lib/talos/node-reads.js'
import {TalosAccess} from '../../src/lib/talos/access.js'
import type {Installation} from '../../src/lib/state/installation.js'
import {ichorInstallation} from '../support/stack-cluster.js'
import {getMachineConfig, patchMachineConfig, TALOSCTL_PARALLELISM} from '../../src/lib/talos/talosctl.js'

let root: string
const saved = process.env.ICHOR_TALOSCTL
const calls = () => readFileSync(join(root, 'calls'), 'utf8').trim().split('\n').filter(Boolean)

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'ichor-node-reads-'))
  mkdirSync(join(root, 'running'))
  // `get machineconfig` answers the node's generation (bumped by `patch`); every call is logged,
  // and how many calls run at once is recorded while each sleeps a little.
  // Several nodes (`--nodes a,b`) are answered as talosctl v1.14.1 does (see
  // talos-simulator-several-nodes.test.ts): a document per node starting with `node:`, a node
  // listed in "$R/down" skipped with its error on stderr, exit 1 (the first one: its error alone).
  writeFileSync(
    join(root, 'talosctl'),
    `#!/bin/sh
R='${root}'
nodes=""; prev=""
for a in "$@"; do [ "$prev" = "--nodes" ] && nodes="$a"; prev="$a"; done
echo "$1 $2 $nodes" >> "$R/calls"
mkdir "$R/running/$$"; ls "$R/running" | wc -l >> "$R/at-once"
sleep 0.2
rmdir "$R/running/$$"
status=0; sep=""
for node in $(echo "$nodes" | tr ',' ' '); do
  gen=$(cat "$R/gen-$node" 2>/dev/null || echo 1)
  case "$1" in
    get)
      if grep -qx "$node" "$R/down" 2>/dev/null && [ -z "$sep" ] && [ $status = 0 ]; then echo "rpc error: connection refused" >&2; exit 1; fi
      if grep -qx "$node" "$R/down" 2>/dev/null; then echo "error listing resources on node $node: connection refused" >&2; status=1; continue; fi
      [ -n "$sep" ] && printf -- '---\\n'
      printf 'node: %s\\nmetadata:\\n  id: v1alpha1\\nspec: "machine:\\\\n  generation: %s\\\\n  node: %s\\\\n"\\n' "$node" "$gen" "$node"; sep=1 ;;
    patch) echo $((gen + 1)) > "$R/gen-$node" ;;
  esac
done
exit $status
`,
    {mode: 0o755},
  )
  writeFileSync(join(root, 'talosconfig'), 'context: x\n')
  process.env.ICHOR_TALOSCTL = join(root, 'talosctl')
})
afterEach(() => {
  writeFileSync(join(root, 'calls'), '')
  writeFileSync(join(root, 'down'), '')
})
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

  it('Given reads of several nodes in one turn, Then one talosctl call asks them all, and each gets its own config', async () => {
    const reads = new TalosNodeReads()
    const talosconfig = join(root, 'talosconfig')
    const nodes = ['10.0.2.1', '10.0.2.2', '10.0.2.3']
    const configs = await Promise.all(nodes.map((node) => reads.machineConfig(node, talosconfig)))
    expect(configs.map((c) => /node: (\S+)/.exec(c)?.[1])).toEqual(nodes)
    expect(calls()).toEqual(['get machineconfig 10.0.2.1,10.0.2.2,10.0.2.3'])
    // Read once: the reachability checks reuse them.
    for (const node of nodes) expect(await reads.reachable(node, {talosconfig})).toMatchObject({state: 'configured'})
    expect(calls()).toHaveLength(1)
  })

  it('Given one node of the batch down, Then that read fails with its own error, the others are served, and the next read asks that node again', async () => {
    writeFileSync(join(root, 'down'), '10.0.3.2\n')
    const reads = new TalosNodeReads()
    const talosconfig = join(root, 'talosconfig')
    const outcomes = await Promise.allSettled(['10.0.3.1', '10.0.3.2', '10.0.3.3'].map((node) => reads.machineConfig(node, talosconfig)))
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled'])
    expect(String((outcomes[1] as PromiseRejectedResult).reason)).toMatch(/talosctl get machineconfig on node 10\.0\.3\.2 failed: connection refused/)
    writeFileSync(join(root, 'down'), '')
    expect(await reads.machineConfig('10.0.3.2', talosconfig)).toMatch(/node: 10\.0\.3\.2/)
    expect(calls()).toEqual(['get machineconfig 10.0.3.1,10.0.3.2,10.0.3.3', 'get machineconfig 10.0.3.2'])
  })

  it('Given the first node of the batch down (talosctl then answers nothing), Then it fails and the others are asked alone', async () => {
    writeFileSync(join(root, 'down'), '10.0.4.1\n')
    const reads = new TalosNodeReads()
    const talosconfig = join(root, 'talosconfig')
    const outcomes = await Promise.allSettled(['10.0.4.1', '10.0.4.2'].map((node) => reads.machineConfig(node, talosconfig)))
    expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'fulfilled'])
    expect(calls()).toEqual(['get machineconfig 10.0.4.1,10.0.4.2', 'get machineconfig 10.0.4.2'])
  })
})

// A plan's ctx.talos (src/lib/talos/access.ts): the talosconfig found once, then the same shared reads.
describe('TalosAccess over the run-wide reads', () => {
  const access = () =>
    new TalosAccess(() => Promise.reject(new Error('no cluster in this test')), {
      talosconfig: join(root, 'talosconfig'),
      installationRead: Promise.resolve(ichorInstallation() as unknown as Installation),
    })

  it('Given the configs of three nodes asked at once, Then one talosctl call; a write to two of them asks those two again, together', async () => {
    const talos = access()
    const nodes = ['10.0.4.1', '10.0.4.2', '10.0.4.3']
    await Promise.all(nodes.map((n) => talos.machineConfig(n)))
    await Promise.all(nodes.map((n) => talos.machineConfig(n)))
    await talos.writeAll(nodes.slice(0, 2), async () => {
      for (const node of nodes.slice(0, 2)) await patchMachineConfig({node, talosconfig: await talos.talosconfig(), patch: 'machine: {}\n', mode: 'no-reboot'})
    })
    const after = await Promise.all(nodes.map((n) => talos.machineConfig(n)))
    expect(after.map((c) => /generation: (\d+)/.exec(c)?.[1])).toEqual(['2', '2', '1'])
    expect(calls()).toEqual([
      'get machineconfig 10.0.4.1,10.0.4.2,10.0.4.3',
      'patch machineconfig 10.0.4.1',
      'patch machineconfig 10.0.4.2',
      'get machineconfig 10.0.4.1,10.0.4.2',
    ])
  })

  it('Given a cluster without an IchorInstallation, Then reading a node is the one refusal, and talosctl never runs', async () => {
    const talos = new TalosAccess(() => Promise.resolve({context: 'c', server: 'https://x'} as never), {
      talosconfig: join(root, 'talosconfig'),
      installationRead: Promise.resolve(undefined),
      missingInstallationExit: 2,
    })
    await expect(talos.machineConfig('10.0.4.9')).rejects.toMatchObject({exitCode: 2, message: expect.stringContaining('not set up by ichor init')})
    expect(calls()).toEqual([])
  })
})
