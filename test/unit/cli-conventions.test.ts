// The conventions every command shares (issue 7, section 2), checked on the built CLI as a
// user runs it: help, version, "did you mean", exit codes and the --json contract. The rows run
// the CLI in this process (runCliInProcess); the terminal case runs it on a pseudo-terminal.
import {existsSync, mkdtempSync, readFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {describe, expect, it} from 'vitest'
import {parse as parseYaml} from 'yaml'
import {DEFAULT_TALOS_VERSION, defaultKubernetesVersion} from '../../src/lib/talos/versions.js'
import {PROJECT_ROOT, UPSTREAM} from '../support/upstream.js'
import {type CliResult} from '../support/run-cli.js'
import {runCliInProcess} from '../support/run-cli-inprocess.js'
import {terminal} from '../support/terminal.js'

if (!existsSync(join(PROJECT_ROOT, 'dist', 'commands', 'version.js'))) throw new Error('dist/ is missing or old: run `npm run build` first (npm test does)')

function ichor(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  return runCliInProcess(args, {env: {...process.env, ICHOR_MIRROR: '', ...env}})
}

/** stdout must be exactly one JSON document. */
function oneJson(stdout: string): Record<string, any> {
  return JSON.parse(stdout)
}

const manifest = JSON.parse(readFileSync(join(PROJECT_ROOT, 'oclif.manifest.json'), 'utf8')) as {commands: Record<string, unknown>}
const COMMANDS = Object.keys(manifest.commands).map((id) => id.split(':'))
/** Hidden commands (`autocomplete`, kept for old ~/.bashrc lines): run, but not listed. */
const HIDDEN = new Set(
  Object.entries(manifest.commands as Record<string, {hidden?: boolean}>)
    .filter(([, c]) => c.hidden)
    .map(([id]) => id.split(':').join(' ')),
)
// Every topic the built manifest has: each proper prefix of a command id (`cni`, `cni values`).
const TOPICS = [...new Set(COMMANDS.flatMap((c) => c.slice(0, -1).map((_, i) => c.slice(0, i + 1).join(' '))))].sort()
const pjsonOclif = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')).oclif as {
  topics: Record<string, {description?: string; subtopics?: Record<string, unknown>}>
}
/** package.json's description of a topic, nested as oclif reads it (`subtopics`). */
function topicDescription(topic: string): string | undefined {
  let node: {description?: string; subtopics?: Record<string, any>} | undefined = {subtopics: pjsonOclif.topics}
  for (const part of topic.split(' ')) node = node?.subtopics?.[part]
  return node?.description
}
const PLUGIN_COMMANDS = [['help']]
const lock = JSON.parse(readFileSync(join(PROJECT_ROOT, 'assets', 'lock.json'), 'utf8'))

describe('help', () => {
  it.each(COMMANDS.map((c) => [c.join(' '), c]))('`ichor %s -h` prints its help, exit 0', async (_name, cmd) => {
    const r = await ichor([...cmd, '-h'])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toContain(`$ ichor ${cmd.join(' ')}`)
    // Issue 37 item 8: a list flag's empty default is no default worth showing.
    expect(r.stdout).not.toContain('[default: ]')
    // Every example is a command line as typed: `$ ichor ...`.
    const examples = r.stdout.split(/^EXAMPLES$/m)[1]?.split(/^[A-Z][A-Z ]+$/m)[0]
    if (examples) for (const line of examples.split('\n').filter((l) => /^ {2}\S/.test(l))) expect(line, cmd.join(' ')).toMatch(/^ {2}\$ /)
  })
  it('`ichor -h` and `ichor help init` print help', async () => {
    expect((await ichor(['-h'])).stdout).toMatch(/TOPICS[\s\S]*cni/)
    const r = await ichor(['help', 'init'])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toMatch(/\$ ichor init/)
    expect(r.stdout).toMatch(/--output-dir/)
  })
  it('lists the global flags -v/--verbose and --debug on every command', async () => {
    const r = await ichor(['version', '-h'])
    expect(r.stdout).toMatch(/-v, --verbose/)
    expect(r.stdout).toMatch(/--debug/)
  })
})

// A topic that is a command too (`ichor backup`, `ichor backup inspect`) runs the command; its help lists the subcommands.
const COMMAND_IDS = new Set(COMMANDS.map((c) => c.join(' ')))

describe('topics', () => {
  it.each(TOPICS.filter((t) => !COMMAND_IDS.has(t)))("`ichor %s` shows the topic's own description, not a subcommand's", async (topic) => {
    const description = topicDescription(topic)
    expect(description, `package.json oclif.topics has no description for "${topic}"`).toBeTruthy()
    for (const args of [topic.split(' '), [...topic.split(' '), '--help']]) {
      const r = await ichor(args)
      expect(r.code, r.stderr).toBe(0)
      expect(r.stdout.split('\n')[0], args.join(' ')).toBe(description)
      expect(r.stdout).toContain(`$ ichor ${topic} COMMAND`)
    }
  })
})

// oclif answers any flag given to a topic with the topic's help and exit 0, so a script's typo
// (`ichor cni --foo`, `ichor cni values --output json`) would pass unnoticed.
describe('a flag given to a topic', () => {
  it.each(TOPICS.filter((t) => !COMMAND_IDS.has(t)))('`ichor %s --no-such-flag` is a usage error naming the flag, with --json too', async (topic) => {
    const r = await ichor([...topic.split(' '), '--no-such-flag=1'])
    expect(r.code, r.stdout).toBe(2)
    expect(r.stdout).toBe('')
    expect(r.stderr).toMatch(new RegExp(`^Error: unknown flag --no-such-flag: ichor ${topic} is a topic`))
    expect(r.stderr).toContain(`Run ichor ${topic} --help for its commands.`)
    const json = await ichor([...topic.split(' '), '-o', 'json', '--json'])
    expect(json.code).toBe(2)
    expect(oneJson(json.stdout).error).toMatchObject({code: 'usage', message: expect.stringContaining('unknown flag -o')})
  })
  it('still shows the help with -h or --help beside the flag', async () => {
    const r = await ichor(['cni', '--foo', '--help'])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toContain('$ ichor cni COMMAND')
  })
})

describe('topics that are commands too', () => {
  it.each(TOPICS.filter((t) => COMMAND_IDS.has(t)))("`ichor %s --help` is the command's help and lists its subcommands", async (topic) => {
    expect(topicDescription(topic), `package.json oclif.topics has no description for "${topic}"`).toBeTruthy()
    const r = await ichor([...topic.split(' '), '--help'])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toContain(`$ ichor ${topic}`)
    const subcommands = COMMANDS.filter((c) => c.length === topic.split(' ').length + 1 && c.join(' ').startsWith(`${topic} `) && !HIDDEN.has(c.join(' ')))
    if (HIDDEN.has(topic)) return
    expect(subcommands.length).toBeGreaterThan(0)
    for (const c of subcommands) expect(r.stdout).toMatch(new RegExp(`COMMANDS[\\s\\S]*${c.join(' ')}`))
  })
})

describe('ichor k8s, as kubectl users write it', () => {
  it('is the kubernetes topic: the same help, and k8s upgrade is kubernetes upgrade', async () => {
    const topic = await ichor(['kubernetes'])
    const short = await ichor(['k8s'])
    expect(short.code, short.stderr).toBe(0)
    expect(short.stdout).toBe(topic.stdout)
    expect(short.stdout).toMatch(/kubernetes upgrade/)
    expect((await ichor(['k8s', 'upgrade', '--help'])).stdout).toBe((await ichor(['kubernetes', 'upgrade', '--help'])).stdout)
    const flag = await ichor(['k8s', '--yes'])
    expect([flag.code, flag.stderr.split('\n')[0]]).toEqual([2, 'Error: unknown flag --yes: ichor kubernetes is a topic, and its commands take the flags'])
  })
})

describe('ichor version', () => {
  const pins = [lock.cilium.version, lock.argocd.version, lock.kokumi.version, DEFAULT_TALOS_VERSION, defaultKubernetesVersion()]
  it('prints the CLI version and every pinned version; --version prints the same', async () => {
    const version = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')).version
    const r = await ichor(['version'])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toContain(`ichor ${version}`)
    for (const pin of pins) expect(r.stdout).toContain(pin)
    expect((await ichor(['--version'])).stdout).toBe(r.stdout)
  })
  it('-o json and -o yaml print the same document as --json (issue 37 item 8)', async () => {
    const json = await ichor(['version', '-o', 'json'])
    expect(json.code, json.stderr).toBe(0)
    const doc = JSON.parse(json.stdout) as {pinned: {cilium: string}}
    expect(doc.pinned.cilium).toBe(lock.cilium.version)
    expect(parseYaml((await ichor(['version', '-o', 'yaml'])).stdout)).toEqual(doc)
  })
  it('--json gives them as one object with a schemaVersion', async () => {
    const r = await ichor(['version', '--json'])
    expect(r.code).toBe(0)
    expect(oneJson(r.stdout)).toMatchObject({
      schemaVersion: 1,
      pinned: {
        cilium: lock.cilium.version,
        argocd: lock.argocd.version,
        kokumi: lock.kokumi.version,
        talos: DEFAULT_TALOS_VERSION,
        kubernetes: defaultKubernetesVersion(),
      },
    })
    expect(oneJson((await ichor(['--version', '--json'])).stdout).pinned.cilium).toBe(lock.cilium.version)
  })
})

describe('usage errors', () => {
  it.each([...COMMANDS, ...PLUGIN_COMMANDS].map((c) => [c.join(' '), c]))(
    '`ichor %s --json --no-such-flag`: one short JSON error on stdout, exit 2',
    async (_name, cmd) => {
      const r = await ichor([...cmd, '--json', '--no-such-flag'])
      expect(r.code).toBe(2)
      expect(r.stdout.length).toBeLessThan(2000)
      const doc = oneJson(r.stdout)
      expect(doc).toMatchObject({schemaVersion: 1, error: {exitCode: 2, code: 'usage'}})
      expect(doc.error.message).toMatch(/--no-such-flag/)
    },
  )
  it('a flag typo suggests the flag meant, with and without --json', async () => {
    const r = await ichor(['init', '--dry-rn'])
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(/Nonexistent flag: --dry-rn/)
    expect(r.stderr).toMatch(/did you mean --dry-run\?/)
    expect(r.stdout).toBe('')
    expect(oneJson((await ichor(['cni', 'values', 'validate', '--sett', 'a=b', '--json'])).stdout).error.hint).toBe('did you mean --set?')
  })
  it('a missing value and a bad option exit 2 with a one-line error', async () => {
    for (const args of [
      ['init', '--timeout'],
      ['init', '--tunnel', 'ipip'],
    ]) {
      const r = await ichor(args)
      expect(r.code, args.join(' ')).toBe(2)
      expect(r.stderr).toMatch(/^Error: /)
      expect(r.stderr).not.toMatch(/\n\s+at /)
    }
  })
  it('an unknown command exits 2 naming the command meant; with --json as one JSON error', async () => {
    for (const [typo, meant] of [
      [['inti'], 'init'],
      [['cni', 'valeus', 'set'], 'cni values set'],
      [['stack', 'stauts'], 'stack status'],
      [['hepl'], 'help'],
    ] as const) {
      const r = await ichor([...typo])
      expect(r.code, typo.join(' ')).toBe(2)
      expect(r.stdout).toBe('')
      expect(r.stderr).toMatch(new RegExp(`${typo.join(' ')} is not an ichor command`))
      expect(r.stderr).toContain(`did you mean ichor ${meant}?`)
    }
    const r = await ichor(['inti', '--json'])
    expect(r.code).toBe(2)
    expect(oneJson(r.stdout).error).toMatchObject({exitCode: 2, code: 'usage', hint: expect.stringContaining('did you mean ichor init?')})
  })
  it('a mistyped command on a terminal is not run: the suggestion, exit 2, no question', async () => {
    // plugin-not-found asks "Did you mean version? (Y/n)" on a terminal and runs it on Enter.
    const session = terminal(['verison'])
    await session.expect('did you mean ichor version?')
    session.type('\r')
    expect(await session.exited).toBe(2)
    expect(session.screen()).not.toMatch(/Pinned:|\(Y\/n\)/)
  })
})

describe('shell completion', () => {
  it('`ichor completion bash` prints a completion script for ichor; help advertises only it', async () => {
    const r = await ichor(['completion', 'bash'])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toMatch(/^complete -F _ichor_complete ichor$/m)
    const help = await ichor(['help'])
    expect(help.stdout).toMatch(/^\s+completion\s/m)
    expect(help.stdout).not.toMatch(/autocomplete|zsh|powershell/)
  })
})

describe('bad files are usage errors (exit 2) naming the path', () => {
  const NODES = ['--cluster-name', 'homelab', '--endpoint', 'https://192.0.2.10:6443', '--control-plane', '192.0.2.10']
  it('a chart that is not a gzip tarball, and a directory given as the chart', async () => {
    const notTar = await ichor(['cni', 'values', 'validate', '--cilium-chart', join(PROJECT_ROOT, 'package.json')])
    expect(notTar.code).toBe(2)
    expect(notTar.stderr).toMatch(/package\.json is not a gzip tarball/)
    const dir = await ichor(['cni', 'values', 'validate', '--cilium-chart', PROJECT_ROOT, '--json'])
    expect(dir.code).toBe(2)
    expect(oneJson(dir.stdout).error.message).toMatch(/--cilium-chart: .* is a directory, expected a file/)
  })
  it('an output directory below a file', async () => {
    const r = await ichor(['init', '--dry-run', '--output-dir', join(PROJECT_ROOT, 'package.json', 'out'), ...NODES, '--mirror', UPSTREAM.dir])
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(/--output-dir .*package\.json\/out.*(is not a directory|a part of the path is a file, not a folder)/)
    // Named and explained, never Node's raw `ENOTDIR: not a directory, ...` or a stack.
    expect(r.stderr).not.toMatch(/ENOTDIR:|\n\s+at /)
  })
})

describe('flags', () => {
  it('--control-plane and --worker take comma lists as well as repeats', async () => {
    const out = mkdtempSync(join(tmpdir(), 'ichor-dry-'))
    const r = await ichor([
      'init',
      '--dry-run',
      '--output-dir',
      out,
      '--cluster-name',
      'homelab',
      '--endpoint',
      'https://192.0.2.10:6443',
      '--control-plane',
      '192.0.2.10,192.0.2.12',
      '--worker',
      '192.0.2.11',
      '--worker',
      '192.0.2.13,192.0.2.14',
      '--mirror',
      UPSTREAM.dir,
      '--json',
    ])
    expect(r.code, r.stderr).toBe(0)
    expect(oneJson(r.stdout).schemaVersion).toBe(1)
  })
  it('assets fetch --only takes a comma list', async () => {
    const r = await ichor(['assets', 'fetch', '--only', 'cilium,argocd', '--from', join(PROJECT_ROOT, 'no-such-mirror')])
    expect(r.stderr).not.toMatch(/Expected --only/)
    expect(r.stderr).toMatch(/- cilium: /)
    expect(r.stderr).toMatch(/- argocd: /)
    expect(r.stderr).not.toMatch(/- kokumi: /)
  })
  it('-v shows the helm command run; without it nothing of the sort', async () => {
    const args = ['cni', 'values', 'validate', '--set', 'hubble.relay.enabled=true', '--cilium-chart', UPSTREAM.ciliumChart]
    const verbose = await ichor([...args, '-v'])
    expect(verbose.code, verbose.stderr).toBe(0)
    expect(verbose.stderr).toMatch(/\$ \S*helm template /)
    expect((await ichor(args)).stderr).not.toMatch(/helm template/)
  })
})
