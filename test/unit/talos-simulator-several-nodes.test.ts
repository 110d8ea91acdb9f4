// Issue 31: ichor reads the machine configs of several nodes in one talosctl call (`--nodes
// a,b,c`). The Talos node SIMULATOR answers such a call as talosctl v1.14.1 does
// (cmd/talosctl/cmd/talos/get.go getResources, listResources; output/yaml.go): a document per
// node starting with `node: <ip>`; a node that fails is skipped with "error listing resources
// on node <ip>: ..." on stderr and exit 1; when the first node fails, nothing is printed.
// Control tests: the simulator refused more than one node before. No API server is needed.
import {spawnSync} from 'node:child_process'
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {parseAllDocuments} from 'yaml'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {getMachineConfigs, getTalosVersions, TalosctlError} from '../../src/lib/talos/talosctl.js'
import {SIMULATOR} from '../sim/simulated-nodes.js'

const [A, B, DOWN] = ['127.0.3.1', '127.0.3.2', '127.0.3.3']
let root: string
let talosconfig: string
let env: NodeJS.ProcessEnv
const sim = (args: string[]) => spawnSync(process.execPath, [SIMULATOR, ...args], {encoding: 'utf8', env})
const get = (nodes: string[]) =>
  sim(['get', 'machineconfig', '--output', 'yaml', '--nodes', nodes.join(','), '--endpoints', nodes[0]!, '--talosconfig', talosconfig])
// A node of the bundle whose CA the talosconfig names (the stand-in checks the CA, not real certificates).
const config = (name: string) => `machine:\n  type: worker\n  ca:\n    crt: Y2E=\n  network:\n    hostname: ${name}\n`

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'ichor-sim-several-'))
  // B runs a later patch: `version` must tell the nodes apart.
  writeFileSync(join(root, 'nodes.json'), JSON.stringify([A, B, DOWN].map((ip) => ({ip, role: 'worker', talosVersion: ip === B ? 'v1.14.2' : 'v1.14.1'}))))
  for (const [ip, name] of [
    [A, 'a'],
    [B, 'b'],
  ] as const)
    writeFileSync(join(root, `node-${ip}.json`), JSON.stringify({mode: 'configured', config: config(name), configVersion: 1}))
  talosconfig = join(root, 'talosconfig')
  writeFileSync(talosconfig, 'context: c\ncontexts:\n  c:\n    endpoints: []\n    ca: Y2E=\n    crt: eA==\n    key: eA==\n')
  env = {...process.env, TALOS_SIM_STATE: root}
})
afterAll(() => rmSync(root, {recursive: true, force: true}))

describe('talosctl simulator: get machineconfig on several nodes', () => {
  it('answers one document per node, each starting with its node, --- between them', () => {
    const r = get([A, B])
    expect(r.status, r.stderr).toBe(0)
    expect(r.stdout.startsWith(`node: ${A}\n`)).toBe(true)
    expect(r.stdout).toContain(`---\nnode: ${B}\n`)
    const docs = parseAllDocuments(r.stdout).map((d) => d.toJS() as {node: string; spec: string})
    expect(docs.map((d) => [d.node, /hostname: (\w)/.exec(d.spec)?.[1]])).toEqual([
      [A, 'a'],
      [B, 'b'],
    ])
  })

  it('skips a later node that fails, names it on stderr and exits 1', () => {
    const r = get([A, DOWN, B])
    expect(r.status).toBe(1)
    expect(parseAllDocuments(r.stdout).map((d) => (d.toJS() as {node: string}).node)).toEqual([A, B])
    expect(r.stderr.trim()).toMatch(new RegExp(`^error listing resources on node ${DOWN.replace(/\./g, '\\.')}: rpc error: code = Unavailable`))
  })

  it('prints nothing when the first node fails', () => {
    const r = get([DOWN, A])
    expect(r.status).toBe(1)
    expect(r.stdout).toBe('')
    expect(r.stderr).not.toMatch(/on node/)
  })
})

// Issue 31 (talos status): `version` on several nodes, as talosctl v1.14.1 prints it
// (cmd/talosctl/cmd/talos/version.go): each node asked on its own, a block per node that
// answered, "error getting version from node <ip>: ..." for each that did not, exit 1. Control:
// the simulator refused more than one node before.
describe('talosctl simulator: version on several nodes', () => {
  const version = (nodes: string[]) => sim(['version', '--nodes', nodes.join(','), '--endpoints', nodes[0]!, '--talosconfig', talosconfig])

  it('prints the client, then a block per node with its own Tag', () => {
    const r = version([A, B])
    expect(r.status, r.stderr).toBe(0)
    expect(r.stdout).toMatch(/^Client:\n\tTag: +v1\.14\.1/)
    const server = r.stdout.split('Server:\n')[1]!
    expect([...server.matchAll(/NODE: +(\S+)\n\tTag: +(\S+)/g)].map((m) => [m[1], m[2]])).toEqual([
      [A, 'v1.14.1'],
      [B, 'v1.14.2'],
    ])
  })

  it('a node that fails, first or not, is named on stderr; the others still answer; exit 1', () => {
    const r = version([DOWN, A])
    expect(r.status).toBe(1)
    expect(r.stdout).toContain(`NODE:        ${A}`)
    expect(r.stderr.trim()).toMatch(new RegExp(`^error getting version from node ${DOWN.replace(/\./g, '\\.')}: rpc error: code = Unavailable`))
  })
})

describe('getMachineConfigs and getTalosVersions on those answers', () => {
  const saved = process.env.ICHOR_TALOSCTL
  beforeAll(() => {
    process.env.ICHOR_TALOSCTL = join(root, 'talosctl')
    writeFileSync(process.env.ICHOR_TALOSCTL, `#!/bin/sh\nTALOS_SIM_STATE=${root} exec ${process.execPath} ${SIMULATOR} "$@"\n`, {mode: 0o755})
  })
  afterAll(() => {
    if (saved === undefined) delete process.env.ICHOR_TALOSCTL
    else process.env.ICHOR_TALOSCTL = saved
  })

  it('versions: each node its Tag or its own error, in one call', async () => {
    const answers = await getTalosVersions({nodes: [A, DOWN, B], talosconfig})
    expect(answers.get(A)).toBe('v1.14.1')
    expect(answers.get(B)).toBe('v1.14.2')
    expect(String(answers.get(DOWN))).toMatch(new RegExp(`talosctl version on node ${DOWN.replace(/\./g, '\\.')} failed: rpc error`))
    const none = await getTalosVersions({nodes: [A], talosconfig: join(root, 'missing')})
    expect(none.get(A)).toBeInstanceOf(TalosctlError)
  })

  it('configs: each node its config or its own error, and leaves out what the answer does not say', async () => {
    {
      const answers = await getMachineConfigs({nodes: [A, DOWN, B], talosconfig})
      expect(answers.get(A)).toMatch(/hostname: a/)
      expect(answers.get(B)).toMatch(/hostname: b/)
      expect(answers.get(DOWN)).toBeInstanceOf(TalosctlError)
      expect(String(answers.get(DOWN))).toMatch(new RegExp(`on node ${DOWN.replace(/\./g, '\\.')} failed: rpc error`))
      const first = await getMachineConfigs({nodes: [DOWN, A], talosconfig})
      expect(first.get(DOWN)).toBeInstanceOf(TalosctlError)
      expect(first.has(A)).toBe(false)
    }
  })
})
