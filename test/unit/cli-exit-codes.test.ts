// Exit codes and local input against a cluster that cannot be reached (issue 23 items 5 and 6),
// on the built CLI, table-driven over oclif.manifest.json so a new command cannot skip them:
// a refused connection is exit 1 with kubectl's sentence, not bad input; bad files, owned keys
// and malformed versions are exit 2 and named before any connection is tried.
//
// The tables run the CLI in this process (runCliInProcess); a few rows, one per exit code,
// also run as a real process and must give the same code and output.
import {existsSync, mkdtempSync, readFileSync, writeFileSync} from 'node:fs'
import {createServer} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {beforeAll, describe, expect, it} from 'vitest'
import {PROJECT_ROOT} from '../support/upstream.js'
import {runCli, type CliResult} from '../support/run-cli.js'
import {runCliInProcess} from '../support/run-cli-inprocess.js'
import {requiredArgs} from '../support/required-args.js'

if (!existsSync(join(PROJECT_ROOT, 'dist', 'commands', 'version.js'))) throw new Error('dist/ is missing or old: run `npm run build` first (npm test does)')

type Manifest = {commands: Record<string, {flags: Record<string, unknown>; args?: Record<string, {required?: boolean}>}>}
const manifest = JSON.parse(readFileSync(join(PROJECT_ROOT, 'oclif.manifest.json'), 'utf8')) as Manifest
const CLUSTER_COMMANDS = Object.keys(manifest.commands).filter((id) => 'kubeconfig' in manifest.commands[id]!.flags)
/** doctor reports an unreachable cluster as one of its checks (its result document, exit 1), not as an error. */
const NOT_AN_ERROR = new Set(['doctor'])

const work = mkdtempSync(join(tmpdir(), 'ichor-exit-codes-'))
let port = 0
let kubeconfig = ''
const keyFile = join(work, 'state-key')

const REQUIRED = await requiredArgs(keyFile)

function argv(id: string, args: string[]): string[] {
  // A flag the case gives itself (a malformed --to) replaces the one REQUIRED has.
  const required = [...(REQUIRED[id] ?? [])]
  const twice = required.findIndex((a) => a.startsWith('--') && args.includes(a))
  if (twice !== -1) required.splice(twice, 2)
  return [...id.split(':'), ...required, ...args, '--kubeconfig', kubeconfig]
}
const env = () => ({...process.env, ICHOR_MIRROR: '', EDITOR: 'true', VISUAL: '', ICHOR_STATE_PASSPHRASE_FILE: keyFile})

function ichor(id: string, args: string[]): Promise<CliResult> {
  return runCliInProcess(argv(id, args), {env: env()})
}

beforeAll(async () => {
  // A loopback port nothing listens on: connections are refused at once.
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  port = (server.address() as {port: number}).port
  await new Promise((resolve) => server.close(resolve))
  kubeconfig = join(work, 'kubeconfig')
  writeFileSync(
    kubeconfig,
    `apiVersion: v1
kind: Config
clusters: [{name: dead, cluster: {server: "https://127.0.0.1:${port}", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: not-a-secret}}]
contexts: [{name: dead, context: {cluster: dead, user: u}}]
current-context: dead
`,
  )
  writeFileSync(keyFile, 'a test passphrase, not a secret\n', {mode: 0o600})
})

// kubectl's own sentence: k8s.io/kubectl v0.36.3 pkg/cmd/util/helpers.go standardErrorMessage (exit 1, DefaultErrorExitCode).
const refused = () => new RegExp(`^The connection to the server 127\\.0\\.0\\.1:${port} was refused - did you specify the right host or port\\?`)

describe("a cluster that refuses the connection: exit 1, kubectl's message, the one error shape", () => {
  it.each(CLUSTER_COMMANDS.filter((id) => !NOT_AN_ERROR.has(id)).map((id) => [id.replaceAll(':', ' '), id]))('ichor %s', async (_name, id) => {
    const json = await ichor(id, ['--json'])
    const why = `${json.stdout}\n${json.stderr}`
    expect(json.code, why).toBe(1)
    const doc = JSON.parse(json.stdout)
    expect(doc, why).toMatchObject({schemaVersion: 1, error: {exitCode: 1, code: 'failed'}})
    expect(doc.error.message, why).toMatch(refused())
    const text = await ichor(id, [])
    expect(text.code, text.stderr).toBe(1)
    expect(text.stderr.replace(/^Error: /, '')).toMatch(refused())
  })
})

// Every command that talks to a cluster and reads a local input of this kind gets the case (from the manifest).
const LOCAL_INPUT: {flag: string; args: () => string[]; message: RegExp}[] = [
  {flag: 'values', args: () => ['-f', join(work, 'no-such-values.yaml')], message: /no-such-values\.yaml.*(does not exist|no such file)/i},
  {flag: 'to', args: () => ['--to', 'not-a-version'], message: /--to|not-a-version/},
  {flag: 'cilium-chart', args: () => ['--cilium-chart', join(work, 'no-such-chart.tgz')], message: /no-such-chart\.tgz/},
]
// Every values command that changes or previews a layer, with a key ichor owns in that layer.
const OWNED_KEY: {id: string; args: string[]; path: string}[] = [
  // Owned keys whose value never depends on the cluster: judged before it is read. (kubeProxyReplacement
  // agrees or not with the cluster's kube-proxy mode: judged once it is read, before any change.)
  {id: 'cni:values:set', args: ['ipam.mode=cluster-pool'], path: 'ipam.mode'},
  {id: 'cni:values:diff', args: ['cgroup.hostRoot=/run/cilium/cgroupv2'], path: 'cgroup.hostRoot'},
  {id: 'stack:values:set', args: ['--set', 'configs.repositories.x.url=oci://example.invalid/x'], path: 'configs.repositories'},
  {id: 'stack:values:diff', args: ['configs.repositories.x.url=oci://example.invalid/x'], path: 'configs.repositories'},
  {id: 'cni:values:edit', args: ['--set', 'rollOutCiliumPods=false'], path: 'rollOutCiliumPods'},
  {id: 'stack:values:edit', args: ['configs.repositories.x.url=oci://example.invalid/x'], path: 'configs.repositories'},
  {id: 'init', args: ['--set', 'ipam.mode=cluster-pool'], path: 'ipam.mode'},
]

describe('local input is refused before any connection (exit 2, naming it, never the cluster)', () => {
  const cases = LOCAL_INPUT.flatMap((input) =>
    CLUSTER_COMMANDS.filter((id) => input.flag in manifest.commands[id]!.flags && !NOT_AN_ERROR.has(id)).map(
      (id) => [`${id.replaceAll(':', ' ')} --${input.flag}`, id, input] as const,
    ),
  )
  it('the table covers values files, versions and charts of every cluster command', () => {
    expect(cases.length).toBeGreaterThanOrEqual(10)
  })
  it.each(cases)('ichor %s', async (_name, id, input) => {
    const r = await ichor(id, [...input.args(), '--json'])
    const why = `${r.stdout}\n${r.stderr}`
    expect(r.code, why).toBe(2)
    const doc = JSON.parse(r.stdout)
    expect(doc.error.code, why).toBe('usage')
    expect(JSON.stringify(doc.error), why).toMatch(input.message)
    expect(doc.error.message, why).not.toMatch(/127\.0\.0\.1|connection|cannot reach|cluster/i)
  })
  it('every cluster command that takes values files has an owned-key case', () => {
    const takesValues = CLUSTER_COMMANDS.filter((id) => 'values' in manifest.commands[id]!.flags)
    expect(OWNED_KEY.map((c) => c.id).sort()).toEqual(takesValues.sort())
  })
  it.each(OWNED_KEY.map((c) => [`${c.id.replaceAll(':', ' ')} ${c.args.join(' ')}`, c]))('ichor %s: the owned key, not the cluster', async (_name, c) => {
    const r = await ichor(c.id, [...c.args, '--json'])
    const why = `${r.stdout}\n${r.stderr}`
    expect(r.code, why).toBe(2)
    const doc = JSON.parse(r.stdout)
    expect(
      doc.error.issues?.map((i: {path: string}) => i.path),
      why,
    ).toContain(c.path)
    expect(JSON.stringify(doc.error), why).toMatch(/owned by ichor/i)
    expect(doc.error.message, why).not.toMatch(/127\.0\.0\.1|connection|cannot reach/i)
  })
})

describe('a real process gives the same: one row per exit code, spawned and in-process', () => {
  const ROWS: [string, () => string[], number][] = [
    ['version --json', () => ['version', '--json'], 0],
    ['cni status (refused)', () => argv('cni:status', []), 1],
    ['cni status --json (refused)', () => argv('cni:status', ['--json']), 1],
    ['cni values set -f <missing> --json', () => argv('cni:values:set', ['-f', join(work, 'no-such-values.yaml'), '--json']), 2],
    ['stack values diff <owned key>', () => argv('stack:values:diff', ['configs.repositories.x.url=oci://example.invalid/x']), 2],
  ]
  it.each(ROWS)('ichor %s', async (_name, args, code) => {
    const spawned = await runCli(args(), {env: env()})
    expect(spawned.code, `${spawned.stdout}\n${spawned.stderr}`).toBe(code)
    expect(await runCliInProcess(args(), {env: env()})).toEqual(spawned)
  })
})
