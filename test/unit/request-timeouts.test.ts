// Request timeouts as a kubectl user expects them (issue 23 point 3), on the built CLI and
// table-driven over oclif.manifest.json so a new command cannot skip them: every command that
// talks to a cluster takes --request-timeout (kubectl's name and forms, default 30s); a server
// that accepts and never answers, or trickles its answer a byte a second, is reported after that
// time with the time really waited, the server and the context; "connecting to …" shows while
// the first request waits with -v or on a terminal, never under --json.
//
// No cluster is needed: the servers here accept connections and never answer (a black hole),
// or answer one byte a second (a registry or API server on a dying link).
//
// The CLI runs in this process (runCliInProcess), one command after another, with a 200 ms
// timeout; the default of 30 s and the terminal run as real processes.
import {existsSync, mkdtempSync, readFileSync, writeFileSync} from 'node:fs'
import {createServer as createHttpServer, type Server as HttpServer} from 'node:http'
import {createServer, type Server, type Socket} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {PROJECT_ROOT} from '../support/upstream.js'
import {runCli, type CliResult} from '../support/run-cli.js'
import {runCliInProcess} from '../support/run-cli-inprocess.js'
import {terminal} from '../support/terminal.js'
import {requiredArgs} from '../support/required-args.js'

if (!existsSync(join(PROJECT_ROOT, 'dist', 'commands', 'version.js'))) throw new Error('dist/ is missing or old: run `npm run build` first (npm test does)')

type Manifest = {commands: Record<string, {flags: Record<string, {default?: unknown; description?: string}>}>}
const manifest = JSON.parse(readFileSync(join(PROJECT_ROOT, 'oclif.manifest.json'), 'utf8')) as Manifest
const CLUSTER_COMMANDS = Object.keys(manifest.commands).filter((id) => 'kubeconfig' in manifest.commands[id]!.flags)

const work = mkdtempSync(join(tmpdir(), 'ichor-request-timeouts-'))
const keyFile = join(work, 'state-key')
/**
 * The timeout the CLI runs are given, and the bound they must end within once their first
 * request went out: 3×, and a second for a loaded machine's scheduling, far below the 30 s
 * default a flag not applied would wait. Loading the command before it is not counted; where
 * no "connecting to" line marks that moment, START_UP_MS is allowed for it.
 */
const TIMEOUT_MS = 200
const TIMEOUT = `${TIMEOUT_MS}ms`
const BOUND_MS = 3 * TIMEOUT_MS + 1000
const START_UP_MS = 30_000
/**
 * For the two cases where the wait must last over a second: a server that trickles a byte a
 * second (a timer reset by each byte would never fire) and a terminal, where "connecting to"
 * shows after 500 ms. A real process is given START_UP_MS more for Node to start.
 */
const SLOW_TIMEOUT_MS = 2000
const SLOW_BOUND_MS = 3 * SLOW_TIMEOUT_MS

const env = () => ({...process.env, ICHOR_MIRROR: '', EDITOR: 'true', VISUAL: '', ICHOR_STATE_PASSPHRASE_FILE: keyFile})

/** Runs the CLI with -v, timing from the "connecting to" line (the first request going out) to its exit. */
async function fromFirstRequest(args: string[], config = kubeconfig): Promise<CliResult & {ms: number}> {
  let connecting: number | undefined
  let stderr = ''
  const r = await runCliInProcess([...args, '-v', '--kubeconfig', config], {
    env: env(),
    onWrite: (stream, text) => {
      if (stream === 'stderr' && connecting === undefined && (stderr += text).includes('connecting to ')) connecting = Date.now()
    },
  })
  return {...r, ms: connecting === undefined ? Number.NaN : Date.now() - connecting}
}

const REQUIRED = await requiredArgs(keyFile)

const sockets = new Set<Socket>()
const servers: Array<Server | HttpServer> = []
/** Accepts every connection and never sends a byte. */
let blackHolePort = 0
/** Answers 200 with a 100 kB body, one byte a second. */
let tricklePort = 0
let trickleRequests = 0
let kubeconfig = ''
let defaultRun: Promise<CliResult & {ms: number}>
let trickleKubeconfig = ''

function listen(server: Server | HttpServer): Promise<number> {
  servers.push(server)
  server.on('connection', (s: Socket) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
    s.on('error', () => undefined)
  })
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as {port: number}).port)))
}

function kubeconfigFor(name: string, server: string, context: string): string {
  const path = join(work, name)
  writeFileSync(
    path,
    `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "${server}", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: not-a-secret}}]
contexts: [{name: ${context}, context: {cluster: c, user: u}}]
current-context: ${context}
`,
  )
  return path
}

beforeAll(async () => {
  blackHolePort = await listen(createServer(() => undefined))
  tricklePort = await listen(
    createHttpServer((req, res) => {
      trickleRequests++
      res.writeHead(200, {'content-type': 'application/json', 'content-length': '100000', 'docker-content-digest': `sha256:${'0'.repeat(64)}`})
      if (req.method === 'HEAD') return res.end()
      const timer = setInterval(() => res.write(' '), 1000)
      res.on('close', () => clearInterval(timer))
    }),
  )
  kubeconfig = kubeconfigFor('kubeconfig', `https://127.0.0.1:${blackHolePort}`, 'hole-ctx')
  trickleKubeconfig = kubeconfigFor('trickle-kubeconfig', `http://127.0.0.1:${tricklePort}`, 'trickle-ctx')
  writeFileSync(keyFile, 'a test passphrase, not a secret\n', {mode: 0o600})
  // The default's 30 s wait, on a process of its own: it waits while the rows run in this one.
  defaultRun = timed(['cni', 'status'], {spawn: true})
  defaultRun.catch(() => undefined)
})

afterAll(async () => {
  for (const s of sockets) s.destroy()
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))))
})

/** Runs the CLI in this process, or as a real one (`spawn`), timing it from start to exit. */
async function timed(args: string[], {spawn = false} = {}): Promise<CliResult & {ms: number}> {
  const started = Date.now()
  const argv = [...args, '--kubeconfig', kubeconfig]
  const r = spawn ? await runCli(argv, {env: env()}) : await runCliInProcess(argv, {env: env()})
  return {...r, ms: Date.now() - started}
}

function cliArgs(id: string, extra: string[]): string[] {
  return [...id.split(':'), ...(REQUIRED[id] ?? []), ...extra]
}

/** The seconds the message says were waited: at least the timeout, and the real time, not the configured one. */
function secondsWaited(text: string): number {
  const m = /request timed out after (\d+\.\d)s/.exec(text)
  expect(m, text).not.toBeNull()
  return Number(m![1])
}

// kubectl's words for a server it could not talk to (k8s.io/kubectl v0.36.3 pkg/cmd/util/helpers.go, standardErrorMessage).
const unableToConnect = (port: number, context: string) =>
  new RegExp(`^Unable to connect to the server 127\\.0\\.0\\.1:${port}: request timed out after \\d+\\.\\ds \\(.*context "${context}"\\)`)

describe('--request-timeout on every command that talks to a cluster', () => {
  it('every command with --kubeconfig in the built manifest takes --request-timeout, default 30s', () => {
    expect(CLUSTER_COMMANDS.length).toBeGreaterThan(15)
    for (const id of CLUSTER_COMMANDS) {
      const flag = manifest.commands[id]!.flags['request-timeout']
      expect(flag, `${id} has no --request-timeout`).toBeDefined()
      expect(flag!.default, id).toBe('30s')
    }
  })

  it('the help says the default and the forms', async () => {
    const r = await runCliInProcess(['cni', 'status', '-h'])
    expect(r.stdout).toMatch(/--request-timeout=DURATION\s+\[default: 30s\] how long each request/)
    expect(r.stdout).toMatch(/0\s+waits forever/)
  })

  it("parses kubectl's forms: 30s, 1m, plain seconds, 0 for none (k8s.io/client-go tools/clientcmd ParseTimeout)", async () => {
    const {parseRequestTimeout} = await import('../../src/lib/cli/flags.js')
    expect(parseRequestTimeout('30s')).toBe(30_000)
    expect(parseRequestTimeout('1m')).toBe(60_000)
    expect(parseRequestTimeout('45')).toBe(45_000)
    expect(parseRequestTimeout('1m30s')).toBe(90_000)
    expect(parseRequestTimeout('0')).toBe(0)
    expect(parseRequestTimeout('0s')).toBe(0)
    for (const bad of ['abc', '-1', '5x', '']) expect(() => parseRequestTimeout(bad), bad).toThrow(/--request-timeout: .* \(accepted: .*0 for no timeout\)/)
  })

  it('a bad value is exit 2, naming the flag and what it accepts, before any connection', async () => {
    const r = await timed(['cni', 'status', '--request-timeout', 'soon'])
    expect(r.code, r.stderr).toBe(2)
    expect(r.stderr).toMatch(/--request-timeout: "soon" is not a duration/)
    expect(r.stderr).not.toMatch(/Unable to connect/)
  })
})

describe(`a server that accepts and never answers: exit 1 after --request-timeout ${TIMEOUT}, with the time waited, the server and the context`, () => {
  it.each(CLUSTER_COMMANDS.filter((id) => id !== 'doctor').map((id) => [id.replaceAll(':', ' '), id]))('ichor %s', async (_name, id) => {
    // Mutating commands are run as a dry run where they have one: the first request decides either way.
    const dryRun = '--dry-run' in (manifest.commands[id]!.flags as object) && id !== 'init' ? ['--dry-run'] : []
    const r = await fromFirstRequest(cliArgs(id, [...dryRun, '--request-timeout', TIMEOUT]))
    const why = `${r.ms} ms from the first request\n${r.stdout}\n${r.stderr}`
    expect(r.code, why).toBe(1)
    expect(r.ms, why).toBeLessThan(BOUND_MS)
    const error = r.stderr.slice(r.stderr.indexOf('Error: ') + 'Error: '.length)
    expect(error, why).toMatch(unableToConnect(blackHolePort, 'hole-ctx'))
    expect(secondsWaited(r.stderr) * 1000, why).toBeGreaterThanOrEqual(TIMEOUT_MS)
    expect(secondsWaited(r.stderr) * 1000, why).toBeLessThan(BOUND_MS)
  })

  it('doctor reports it as its kube-api check (exit 1), after the same time', async () => {
    const r = await timed(['doctor', '--request-timeout', TIMEOUT, '--json'])
    const why = `${r.ms} ms\n${r.stdout}\n${r.stderr}`
    expect(r.code, why).toBe(1)
    expect(r.ms, why).toBeLessThan(START_UP_MS + BOUND_MS)
    const check = (JSON.parse(r.stdout).checks as Array<{id: string; detail: string}>).find((c) => c.id === 'kube-api')
    expect(secondsWaited(check?.detail ?? '') * 1000, why).toBeLessThan(BOUND_MS)
    expect(check?.detail, why).toMatch(new RegExp(`127\\.0\\.0\\.1:${blackHolePort} \\(context "hole-ctx"\\): request timed out after \\d+\\.\\ds`))
  })

  it('--json: the one error document on stdout, with the same message', async () => {
    const r = await timed(['cni', 'values', 'get', '--request-timeout', TIMEOUT, '--json'])
    expect(r.code, r.stderr).toBe(1)
    expect(r.ms).toBeLessThan(START_UP_MS + BOUND_MS)
    const doc = JSON.parse(r.stdout)
    expect(doc).toMatchObject({schemaVersion: 1, error: {exitCode: 1, code: 'failed'}})
    expect(doc.error.message).toMatch(unableToConnect(blackHolePort, 'hole-ctx'))
  })
})

describe('an API server that trickles its answer a byte a second is cut off at the same total time', () => {
  it('ichor cni status', async () => {
    const r = await fromFirstRequest(['cni', 'status', '--request-timeout', `${SLOW_TIMEOUT_MS}ms`], trickleKubeconfig)
    const why = `${r.ms} ms from the first request\n${r.stderr}`
    expect(r.code, why).toBe(1)
    expect(r.ms, why).toBeLessThan(SLOW_BOUND_MS)
    expect(r.stderr.slice(r.stderr.indexOf('Error: ') + 'Error: '.length), why).toMatch(unableToConnect(tricklePort, 'trickle-ctx'))
  })
})

describe('"connecting to …" while the first request waits', () => {
  it('-v shows it on stderr before the error', async () => {
    const r = await timed(['cni', 'status', '-v', '--request-timeout', TIMEOUT])
    expect(r.code, r.stderr).toBe(1)
    const at = r.stderr.indexOf(`connecting to https://127.0.0.1:${blackHolePort} (context hole-ctx)…`)
    expect(at, r.stderr).toBeGreaterThanOrEqual(0)
    expect(at).toBeLessThan(r.stderr.indexOf('Unable to connect'))
  })

  it('under --json (even with -v) stderr carries JSON lines only, and no "connecting to" text', async () => {
    const r = await timed(['cni', 'status', '-v', '--json', '--request-timeout', TIMEOUT])
    expect(r.code, r.stderr).toBe(1)
    expect(r.stderr).not.toMatch(/connecting to/)
    for (const line of r.stderr.split('\n').filter(Boolean)) expect(() => JSON.parse(line), line).not.toThrow()
    expect(JSON.parse(r.stdout).error.message).toMatch(unableToConnect(blackHolePort, 'hole-ctx'))
  })

  it('on a terminal it shows while waiting, then the error', async () => {
    const t = terminal(['cni', 'status', '--kubeconfig', kubeconfig, '--request-timeout', `${SLOW_TIMEOUT_MS}ms`])
    await t.expect(`connecting to https://127.0.0.1:${blackHolePort} (context hole-ctx)…`, START_UP_MS + SLOW_BOUND_MS)
    await t.expect(/Unable to connect to the server 127\.0\.0\.1:\d+: request timed out after/, SLOW_BOUND_MS)
    expect(await t.exited).toBe(1)
  })
})

describe('the registry client: a per-request deadline over the whole exchange, body included, not retried', () => {
  it('a registry that sends one byte a second is cut off after the timeout, once', async () => {
    const {OciClient} = await import('../../src/lib/oci/client.js')
    const client = new OciClient(`http://127.0.0.1:${tricklePort}`, {timeoutMs: 2000, sleep: async () => {}})
    const before = trickleRequests
    const started = Date.now()
    const error = await client.getManifest('ichor/argocd', 'v1').then(
      () => undefined,
      (e: Error) => e,
    )
    const ms = Date.now() - started
    expect(error?.message).toMatch(
      new RegExp(`^Unable to connect to the registry 127\\.0\\.0\\.1:${tricklePort}: request timed out after 2\\.\\ds \\(GET /v2/ichor/argocd/manifests/v1\\)`),
    )
    expect(ms).toBeLessThan(6000)
    expect(trickleRequests - before).toBe(1)
  })

  it('a registry that accepts and never answers is cut off after the timeout, once', async () => {
    const {OciClient} = await import('../../src/lib/oci/client.js')
    const client = new OciClient(`http://127.0.0.1:${blackHolePort}`, {timeoutMs: 2000, sleep: async () => {}})
    const started = Date.now()
    const error = await client.ping().then(
      () => undefined,
      (e: Error) => e,
    )
    expect(error?.message).toMatch(
      new RegExp(`^Unable to connect to the registry 127\\.0\\.0\\.1:${blackHolePort}: request timed out after 2\\.\\ds \\(GET /v2/\\)`),
    )
    expect(Date.now() - started).toBeLessThan(6000)
  })
})

describe('the port-forward to the registry', () => {
  it('a WebSocket upgrade the API server never answers fails after the timeout instead of waiting forever', async () => {
    const {configureRequests, requestSettings} = await import('../../src/lib/kube/request-settings.js')
    const {connectKube} = await import('../../src/lib/kube/client.js')
    const {tunnelKubeConfig} = await import('../../src/lib/kube/portforward.js')
    const {PortForward} = await import('@kubernetes/client-node')
    const {PassThrough} = await import('node:stream')
    const saved = requestSettings().timeoutMs
    configureRequests({timeoutMs: 2000})
    try {
      const kube = await connectKube({kubeconfig, probe: false})
      const forward = new PortForward(await tunnelKubeConfig(kube), true)
      const started = Date.now()
      const outcome = await Promise.race([
        forward.portForward('kokumi', 'kokumi-registry-0', [5000], new PassThrough(), null, new PassThrough()).then(
          () => 'connected',
          (e: Error) => `failed: ${e.message}`,
        ),
        new Promise<string>((resolve) => setTimeout(() => resolve('still waiting after 10 s'), 10_000)),
      ])
      expect(outcome).toMatch(/^failed: .*handshake has timed out/i)
      expect(Date.now() - started).toBeLessThan(6000)
    } finally {
      configureRequests({timeoutMs: saved})
    }
  })
})

// Last in the file: its run started with the file, and waited while every row above ran.
describe('the default --request-timeout, on a real process', () => {
  it('is 30s, and the message gives the time really waited (not 30 s after a minute)', async () => {
    const r = await defaultRun
    const why = `${r.ms} ms\n${r.stderr}`
    expect(r.code, why).toBe(1)
    expect(r.ms, why).toBeLessThan(3 * 30_000)
    expect(r.stderr.replace(/^Error: /, ''), why).toMatch(unableToConnect(blackHolePort, 'hole-ctx'))
    const waited = secondsWaited(r.stderr)
    expect(waited).toBeGreaterThanOrEqual(30)
    expect(waited * 1000).toBeLessThanOrEqual(r.ms)
    // Silent without -v and off a terminal.
    expect(r.stderr).not.toMatch(/connecting to/)
  }, 150_000)
})
