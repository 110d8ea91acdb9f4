// The one output helper of `-o json|yaml` (src/lib/cli/output.ts): the format, the human view
// without -o, nothing under --json (oclif prints the result document), and the exit code of a
// failed result set one way. Table-driven over oclif.manifest.json too: every command that takes
// -o prints through the helper, so a new one cannot write a fifth variant.
import {existsSync, readFileSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {sink} from '../support/sink.js'
import {afterEach, describe, expect, it} from 'vitest'
import {parse as parseYaml} from 'yaml'
import {printResult} from '../../src/lib/cli/output.js'
import {EXIT} from '../../src/lib/errors/exit-codes.js'
import {INSTALLATION} from '../../src/lib/constants.js'
import type {KubeObject} from '../../src/lib/kube/objects.js'
import {installationCrd} from '../../src/lib/state/installation.js'
import {runCli} from '../support/run-cli.js'
import {backupFixture} from '../support/backup-fixture.js'
import {requiredArgs} from '../support/required-args.js'
import {sessionFixture} from '../support/session-fixture.js'
import {startSimulatedNodes, type SimulatedNodes} from '../sim/simulated-nodes.js'
import {PROJECT_ROOT} from '../support/upstream.js'

const result = {healthy: false, release: 'cilium', revision: 3, problems: ['a: b']}
const human = (r: typeof result) => `RELEASE  REVISION\n${r.release}   ${r.revision}`

describe('printResult', () => {
  afterEach(() => {
    process.exitCode = undefined
  })

  it('-o json and -o yaml print the result document, parseable, in its own key order', async () => {
    const json = sink()
    await printResult(result, {format: 'json', json: false, human, out: json})
    expect(JSON.parse(json.text())).toEqual(result)
    expect(json.text().endsWith('}\n')).toBe(true)
    const yaml = sink()
    await printResult(result, {format: 'yaml', json: false, human, out: yaml})
    expect(parseYaml(yaml.text())).toEqual(result)
    expect(yaml.text().split('\n')[0]).toBe('healthy: false')
  })

  it('without -o prints the human view, one trailing newline', async () => {
    const out = sink()
    await printResult(result, {format: undefined, json: false, human, out})
    expect(out.text()).toBe('RELEASE  REVISION\ncilium   3\n')
  })

  it('under --json prints nothing: oclif prints the returned document', async () => {
    const out = sink()
    await printResult(result, {format: 'yaml', json: true, human, out})
    expect(out.text()).toBe('')
  })

  it('a failed result exits 1 in every format, --json included; a good one leaves the exit code alone', async () => {
    for (const [format, json] of [
      ['json', false],
      ['yaml', false],
      [undefined, false],
      [undefined, true],
    ] as const) {
      process.exitCode = undefined
      await printResult(result, {format, json, human, failed: (r) => !r.healthy, out: sink()})
      expect(process.exitCode, `${format} ${json}`).toBe(EXIT.failed)
    }
    process.exitCode = undefined
    await printResult({...result, healthy: true}, {format: 'json', json: false, human, failed: (r) => !r.healthy, out: sink()})
    expect(process.exitCode).toBeUndefined()
  })

  it('an unknown format is bad input naming --output and what it accepts', async () => {
    const error = await printResult(result, {format: 'wide', json: false, human, out: sink()}).catch((e: unknown) => e)
    expect(error).toMatchObject({exitCode: EXIT.usage, message: '--output: "wide" is not a format (accepted: yaml, json)'})
  })
})

type Manifest = {commands: Record<string, {flags: Record<string, unknown>}>}
const manifest = JSON.parse(readFileSync(join(PROJECT_ROOT, 'oclif.manifest.json'), 'utf8')) as Manifest
const WITH_OUTPUT = Object.keys(manifest.commands).filter((id) => 'output' in manifest.commands[id]!.flags)

describe('every command with -o prints through the one helper', () => {
  it('there are such commands', () => {
    expect(WITH_OUTPUT.length).toBeGreaterThanOrEqual(4)
  })
  it.each(WITH_OUTPUT)('%s', (id) => {
    const file = join(PROJECT_ROOT, 'src', 'commands', ...id.split(':'))
    // A command that is a topic too (`backup`) lives in its folder's index.ts.
    const source = readFileSync(existsSync(`${file}.ts`) ? `${file}.ts` : join(file, 'index.ts'), 'utf8')
    expect(source).toMatch(/\bprintResult\(/)
    // No hand-written JSON or YAML printing, and no exit code set beside the helper.
    expect(source).not.toMatch(/JSON\.stringify|stringify\(|process\.exitCode/)
  })
})

// A cluster with an IchorInstallation and nothing installed yet: every read command has a
// document to print (the status commands a degraded one, exit 1).
const installation = {
  apiVersion: INSTALLATION.apiVersion,
  kind: INSTALLATION.kind,
  metadata: {name: INSTALLATION.name},
  spec: {
    talos: {
      clusterName: 'homelab',
      endpoint: 'https://192.0.2.10:6443',
      talosVersion: 'v1.13.4',
      kubernetesVersion: '1.36.0',
      controlPlanes: ['192.0.2.10'],
      workers: [],
    },
    cni: {kubeProxy: 'kube-proxy', tunnel: 'vxlan', cilium: {values: {hubble: {relay: {enabled: true}}}}},
    stack: {promotion: 'Manual', argocd: {values: {server: {replicas: 2}}}, kokumi: {values: {}}},
  },
} as unknown as KubeObject

// `talos status` asks the nodes: a talosconfig, and the Talos node simulator with no node in it
// (192.0.2.10 refuses), so it prints the degraded document.
let nodes: SimulatedNodes | undefined
afterEach(() => {
  nodes?.cleanup()
  nodes = undefined
})
function talosArgs(id: string): string[] {
  if (id !== 'talos:status') return []
  nodes = startSimulatedNodes([])
  const talosconfig = join(nodes.workDir, 'talosconfig')
  writeFileSync(talosconfig, 'context: homelab\ncontexts:\n  homelab:\n    endpoints: [192.0.2.10]\n')
  return ['--talosconfig', talosconfig]
}

/**
 * The commands that need more than an API server for a document: `upgrade plan` the nodes' versions; `backup` an etcd snapshot from a
 * Talos node (its -o json and -o yaml run on the harness, test/e2e/backup.test.ts); `backup
 * inspect` a backup file and no cluster (one is written here with the real age and tar).
 */
const OWN_FIXTURE: Record<string, (() => Promise<string[]>) | 'e2e'> = {
  backup: 'e2e',
  // Its plan starts from every node's Talos version: -o json and -o yaml on the harness (test/e2e/upgrade-plan.test.ts).
  'upgrade:plan': 'e2e',
  // It prints its document and then serves until Ctrl-C: -o json, -o yaml and --json on the harness (test/e2e/open.test.ts).
  open: 'e2e',
  // Reads no cluster (issue 37 item 8: `version -o json` was refused as an unknown flag).
  version: async () => [],
  'backup:inspect': async () => {
    const {file, keyFile} = await backupFixture()
    return [file, '--state-passphrase-file', keyFile]
  },
}

describe('every command with -o prints a parseable document for -o json and -o yaml, against a fake API server', () => {
  it.each(WITH_OUTPUT.filter((id) => OWN_FIXTURE[id] !== 'e2e'))('%s', async (id) => {
    const own = OWN_FIXTURE[id]
    const {kubeconfig} = await sessionFixture([installationCrd(), installation])
    const args =
      typeof own === 'function'
        ? [...id.split(':'), ...(await own())]
        : [...id.split(':'), ...((await requiredArgs('unused'))[id] ?? []), ...talosArgs(id), '--kubeconfig', kubeconfig]
    const env = {...process.env, ICHOR_MIRROR: '', XDG_STATE_HOME: join(PROJECT_ROOT, 'no-such-state-dir')}
    const json = await runCli([...args, '-o', 'json'], {env})
    expect([0, 1], json.stderr).toContain(json.code)
    expect(json.stdout, json.stderr).not.toBe('')
    const doc = JSON.parse(json.stdout) as unknown
    const yaml = await runCli([...args, '-o', 'yaml'], {env})
    expect(yaml.code, yaml.stderr).toBe(json.code)
    expect(parseYaml(yaml.stdout)).toEqual(doc)
  })
})
