// Issue 23 point 1: one values syntax on every values command, as helm has it: repeatable
// -f/--values FILE ("-" for stdin), repeatable --set KEY=VALUE, and positional KEY=VALUE as a
// shorthand; applied files first, then --set, then the positional ones. Walks the built
// manifest, so a new values command cannot skip the rule.
import {mkdtempSync, readFileSync, writeFileSync} from 'node:fs'
import {createServer} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {beforeAll, describe, expect, it} from 'vitest'
import {runCli, type CliResult} from '../support/run-cli.js'
import {PROJECT_ROOT, UPSTREAM} from '../support/upstream.js'

interface ManifestFlag {
  name: string
  char?: string
  multiple?: boolean
  type: string
}
interface ManifestCommand {
  id: string
  strict?: boolean
  usage?: string | string[]
  args: Record<string, {required?: boolean}>
  flags: Record<string, ManifestFlag>
}
const manifest = JSON.parse(readFileSync(join(PROJECT_ROOT, 'oclif.manifest.json'), 'utf8')) as {commands: Record<string, ManifestCommand>}
const VALUES_COMMANDS = Object.values(manifest.commands).filter((c) => c.id.split(':').includes('values') && !c.id.endsWith(':get'))

const work = mkdtempSync(join(tmpdir(), 'ichor-values-syntax-'))
let kubeconfig = ''

function ichor(args: string[], input?: string): Promise<CliResult> {
  // No editor may open: a test that reaches it failed already.
  return runCli(args, {env: {...process.env, ICHOR_MIRROR: '', EDITOR: 'false', VISUAL: 'false'}, input})
}

beforeAll(async () => {
  // A loopback port nothing listens on: a command that reached the cluster fails with exit 1, not 2.
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as {port: number}).port
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
})

describe('every values command (but get) takes -f, --set and positional KEY=VALUE', () => {
  it('finds the seven commands', () => {
    expect(VALUES_COMMANDS.map((c) => c.id).sort()).toEqual([
      'cni:values:diff',
      'cni:values:edit',
      'cni:values:set',
      'cni:values:validate',
      'stack:values:diff',
      'stack:values:edit',
      'stack:values:set',
    ])
  })
  it.each(VALUES_COMMANDS.map((c) => [c.id.replaceAll(':', ' '), c]))('ichor %s', (_name, c) => {
    expect(c.flags.values, 'flag --values').toMatchObject({char: 'f', multiple: true, type: 'option'})
    expect(c.flags.set, 'flag --set').toMatchObject({multiple: true, type: 'option'})
    expect(c.strict, 'strict: false, so KEY=VALUE arguments reach the command').toBe(false)
    // USAGE shows the shorthand
    expect([c.usage].flat().join('\n')).toMatch(/\[KEY=VALUE\.\.\.\]/)
  })
})

describe("the values are merged in helm's order: files, then --set, then KEY=VALUE", () => {
  it('ichor cni values validate -f X --set a=b a2=c', async () => {
    const file = join(work, 'v.yaml')
    writeFileSync(file, 'hubble:\n  relay: {enabled: false}\n  ui: {enabled: false}\n  metrics: {enabled: [dns]}\n')
    const r = await ichor([
      'cni',
      'values',
      'validate',
      'hubble.ui.enabled=false',
      '-f',
      file,
      '--set',
      'hubble.relay.enabled=true',
      '--set',
      'hubble.ui.enabled=true',
      '--cilium-chart',
      UPSTREAM.ciliumChart,
      '--json',
    ])
    expect(r.code, r.stderr + r.stdout).toBe(0)
    const hubble = JSON.parse(r.stdout).effective.hubble
    expect(hubble.relay.enabled).toBe(true) // --set over the file
    expect(hubble.ui.enabled).toBe(false) // the positional over --set
    expect(hubble.metrics.enabled).toEqual(['dns']) // the file's
  })
})

describe('local input is checked before the cluster, --set and KEY=VALUE alike (exit 2, the key named)', () => {
  const cases: [string, string[], RegExp][] = [
    ['cni values set --set', ['cni', 'values', 'set', '--set', 'ipam.mode=cluster-pool'], /ipam\.mode/],
    ['cni values set KEY=VALUE', ['cni', 'values', 'set', 'ipam.mode=cluster-pool'], /ipam\.mode/],
    ['cni values diff --set', ['cni', 'values', 'diff', '--set', 'ipam.mode=cluster-pool'], /ipam\.mode/],
    ['cni values edit --set', ['cni', 'values', 'edit', '--set', 'ipam.mode=cluster-pool'], /ipam\.mode/],
    ['cni values edit KEY=VALUE', ['cni', 'values', 'edit', 'ipam.mode=cluster-pool'], /ipam\.mode/],
    ['stack values set KEY=VALUE', ['stack', 'values', 'set', 'argocd', 'configs.repositories.x.url=y'], /configs\.repositories/],
    ['stack values set --set', ['stack', 'values', 'set', 'argocd', '--set', 'configs.repositories.x.url=y'], /configs\.repositories/],
    ['stack values diff --set', ['stack', 'values', 'diff', 'argocd', '--set', 'configs.repositories.x.url=y'], /configs\.repositories/],
    ['stack values edit --set', ['stack', 'values', 'edit', 'argocd', '--set', 'configs.repositories.x.url=y'], /configs\.repositories/],
    ['stack values edit KEY=VALUE', ['stack', 'values', 'edit', 'argocd', 'configs.repositories.x.url=y'], /configs\.repositories/],
  ]
  it.each(cases)('ichor %s', async (_name, args, key) => {
    const r = await ichor([...args, '--kubeconfig', kubeconfig, '--json'])
    expect(r.code, r.stdout + r.stderr).toBe(2)
    expect(r.stdout).toMatch(key)
    expect(r.stdout).not.toMatch(/refused|did you mean/)
  })
  it.each([
    ['cni values set', ['cni', 'values', 'set']],
    ['cni values edit', ['cni', 'values', 'edit']],
    ['stack values set', ['stack', 'values', 'set', 'kokumi']],
    ['stack values edit', ['stack', 'values', 'edit', 'kokumi']],
  ])('ichor %s refuses an argument that is not KEY=VALUE', async (_name, args) => {
    const r = await ichor([...args, 'hubble', '--kubeconfig', kubeconfig])
    expect(r.code, r.stdout + r.stderr).toBe(2)
    expect(r.stderr).toMatch(/argument "hubble": expected KEY=VALUE/)
  })
})
