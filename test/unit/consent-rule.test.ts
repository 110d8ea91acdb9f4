// One confirmation rule for every command that changes a cluster (issue 23 point 2), on the
// built CLI, table-driven over oclif.manifest.json so a new mutating command cannot skip it:
// each has -y/--yes, and a real run without a terminal (or with --json) and without --yes is
// refused with exit 2 naming --yes before any connection is made. The table runs the CLI in
// this process (runCliInProcess, stdin and stdout not a terminal); one row also runs as a real
// process, whose stdin is a pipe, and must give the same.
import {existsSync, mkdtempSync, readFileSync, writeFileSync} from 'node:fs'
import {createServer, type Server} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {PROJECT_ROOT} from '../support/upstream.js'
import {runCli} from '../support/run-cli.js'
import {runCliInProcess} from '../support/run-cli-inprocess.js'

if (!existsSync(join(PROJECT_ROOT, 'dist', 'commands', 'version.js'))) throw new Error('dist/ is missing or old: run `npm run build` first (npm test does)')

type Flag = {char?: string; type?: string}
type Manifest = {commands: Record<string, {flags: Record<string, Flag>}>}
const manifest = JSON.parse(readFileSync(join(PROJECT_ROOT, 'oclif.manifest.json'), 'utf8')) as Manifest
/** A command that changes a cluster takes the Lease, so it has --break-lock. */
const MUTATING = Object.keys(manifest.commands)
  .filter((id) => 'break-lock' in manifest.commands[id]!.flags)
  .sort()

const work = mkdtempSync(join(tmpdir(), 'ichor-consent-'))
const kubeconfig = join(work, 'kubeconfig')
const keyFile = join(work, 'state-key')

/** What each gets besides the cluster to pass its own local checks (required args and flags). */
const ARGS: Record<string, string[]> = {
  init: ['--cluster-name', 'x', '--endpoint', 'https://192.0.2.10:6443', '--control-plane', '192.0.2.10', '--state-dir', join(work, 'state')],
  'cni:kube-proxy:replace': [],
  'credentials:renew': [],
  'cni:kube-proxy:restore': [],
  'cni:upgrade': ['--to', '1.19.6'],
  'cni:values:edit': [],
  'cni:values:set': ['hubble.enabled=true'],
  'kubernetes:upgrade': ['--to', '1.37.1'],
  'talos:upgrade': ['--to', 'v1.14.1'],
  'node:remove': ['192.0.2.11'],
  'node:replace': ['192.0.2.11', '192.0.2.12'],
  restore: ['--from', join(work, 'no-such.ichor-backup'), '--control-plane', '192.0.2.10'],
  'stack:promote': ['argocd'],
  'stack:promotion:set': ['Manual'],
  'stack:repair-secrets': [],
  'stack:sync': [],
  'stack:values:edit': ['argocd'],
  'stack:values:set': ['argocd', '--set', 'server.replicas=2'],
}

// A listener that counts connections and drops each one: the refusal must come before any.
let server: Server
let connections = 0

beforeAll(async () => {
  server = createServer((socket) => {
    connections++
    socket.destroy()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as {port: number}).port
  writeFileSync(
    kubeconfig,
    `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:${port}", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: not-a-secret}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`,
  )
  writeFileSync(keyFile, 'a test passphrase, not a secret\n', {mode: 0o600})
})
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve))
})

const argv = (id: string, extra: string[]) => [...id.split(':'), ...ARGS[id]!, ...extra, '--kubeconfig', kubeconfig]
const env = () => ({...process.env, ICHOR_MIRROR: '', EDITOR: 'true', VISUAL: '', ICHOR_STATE_PASSPHRASE_FILE: keyFile})

function ichor(id: string, extra: string[]) {
  return runCliInProcess(argv(id, extra), {env: env()})
}

describe('every command that changes a cluster asks, or needs --yes', () => {
  it('the table names every command that takes the Lease (a new one must be added here)', () => {
    expect(MUTATING).toEqual(Object.keys(ARGS).sort())
  })

  it.each(MUTATING.map((id) => [id.replaceAll(':', ' '), id]))('ichor %s has -y/--yes', (_name, id) => {
    expect(manifest.commands[id]!.flags.yes, `${id} has no --yes`).toMatchObject({char: 'y', type: 'boolean'})
  })

  it.each(MUTATING.map((id) => [id.replaceAll(':', ' '), id]))(
    'ichor %s without a terminal and without --yes: exit 2 naming --yes, no connection',
    async (_name, id) => {
      const before = connections
      const text = await ichor(id, [])
      expect(text.code, `${text.stdout}\n${text.stderr}`).toBe(2)
      expect(text.stderr).toMatch(/--yes/)
      expect(text.stderr).not.toMatch(/connection|refused|127\.0\.0\.1/i)
      const json = await ichor(id, ['--json'])
      const why = `${json.stdout}\n${json.stderr}`
      expect(json.code, why).toBe(2)
      const doc = JSON.parse(json.stdout)
      expect(doc.error, why).toMatchObject({exitCode: 2, code: 'usage'})
      expect(doc.error.message, why).toMatch(/--yes/)
      expect(connections, `${id} connected to the cluster before refusing`).toBe(before)
    },
  )

  it.each(MUTATING.filter((id) => 'dry-run' in manifest.commands[id]!.flags).map((id) => [id.replaceAll(':', ' '), id]))(
    'ichor %s --dry-run needs no --yes: it goes on to the cluster',
    async (_name, id) => {
      const before = connections
      const r = await ichor(id, ['--dry-run'])
      expect(r.stderr, r.stderr).not.toMatch(/--yes/)
      expect(connections, `${id} --dry-run did not reach the cluster`).toBeGreaterThan(before)
    },
  )
})

describe('a real process, its stdin a pipe, is refused the same way', () => {
  it.each([[[]], [['--json']]])('ichor cni upgrade %j without --yes: spawned and in-process alike', async (extra) => {
    const before = connections
    const spawned = await runCli(argv('cni:upgrade', extra), {env: env()})
    expect(spawned.code, `${spawned.stdout}\n${spawned.stderr}`).toBe(2)
    expect(await ichor('cni:upgrade', extra)).toEqual(spawned)
    expect(connections).toBe(before)
  })
})
