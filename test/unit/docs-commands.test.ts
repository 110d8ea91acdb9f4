// Every `ichor ...` line in a code block of README.md and docs/**/*.md names a command the
// built CLI has, and every flag it shows is a flag of that command (and every value it
// shows for a flag with fixed options is one of them). Checked against oclif.manifest.json
// of the build (`npm run build` writes it from dist/) and the manifests of the oclif plugins
// the CLI loads (help): what `ichor COMMAND --help` prints comes from them.
// Commands that are not on main yet belong in prose, never in a code block.
import {existsSync, readdirSync, readFileSync} from 'node:fs'
import {join, relative} from 'node:path'
import {describe, expect, it} from 'vitest'
import {PROJECT_ROOT} from '../support/upstream.js'

interface ManifestFlag {
  name: string
  char?: string
  options?: string[]
  type: 'boolean' | 'option'
}
interface ManifestCommand {
  id: string
  flags: Record<string, ManifestFlag>
  aliases?: string[]
}

const MANIFEST = join(PROJECT_ROOT, 'oclif.manifest.json')
if (!existsSync(MANIFEST)) throw new Error('oclif.manifest.json is missing: run `npm run build` first (npm test does)')

function commandsOf(file: string): ManifestCommand[] {
  return Object.values((JSON.parse(readFileSync(file, 'utf8')) as {commands: Record<string, ManifestCommand>}).commands)
}

const pkg = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as {oclif: {plugins: string[]}}
const COMMANDS = new Map<string, ManifestCommand>()
// oclif `aliases` (`ichor k8s upgrade`) run the same command.
for (const c of commandsOf(MANIFEST)) for (const id of [c.id, ...(c.aliases ?? [])]) COMMANDS.set(id, c)
for (const plugin of pkg.oclif.plugins) {
  const file = join(PROJECT_ROOT, 'node_modules', plugin, 'oclif.manifest.json')
  for (const c of commandsOf(file)) COMMANDS.set(c.id, c)
}
/** Flags of `ichor` itself and of every command (oclif adds --help/-h, the CLI adds -h as a help flag). */
const ROOT_FLAGS = new Set(['--version', '--help', '-h'])
const HELP_FLAGS = new Set(['--help', '-h'])

export interface DocCommand {
  file: string
  line: number
  text: string
}

/** The `ichor ...` commands in the fenced code blocks of a markdown text (`\` continuations joined). */
export function ichorLines(markdown: string, file: string): DocCommand[] {
  const found: DocCommand[] = []
  let inBlock = false
  let pending: {text: string; line: number} | undefined
  markdown.split('\n').forEach((raw, i) => {
    if (/^\s*```/.test(raw)) {
      inBlock = !inBlock
      return
    }
    if (!inBlock) return
    const text = pending ? `${pending.text} ${raw.trim()}` : raw
    const line = pending?.line ?? i + 1
    if (/\\\s*$/.test(text)) {
      pending = {text: text.replace(/\\\s*$/, ''), line}
      return
    }
    pending = undefined
    const code = text.replace(/\s#.*$/, '') // a shell comment
    for (const segment of code.split(/&&|\|\||;|\s\|\s/)) {
      const words = segment.trim().split(/\s+/).filter(Boolean)
      while (words.length > 0 && /^[A-Z_][A-Z0-9_]*=/.test(words[0]!)) words.shift() // VAR=value before the command
      if (words[0] === '$') words.shift()
      if (words[0] === 'node' && words[1] === 'bin/run.js') words.splice(0, 2, 'ichor')
      if (words[0] === 'ichor') found.push({file, line, text: words.join(' ')})
    }
  })
  return found
}

/** What is wrong with one documented command line: empty when the CLI has it as shown. */
export function problemsOf(text: string): string[] {
  const words = text
    .split(/\s+/)
    .slice(1)
    .map((w) => w.replace(/^[[(]+|[\])]+$/g, ''))
  const topics: string[] = []
  for (const w of words) {
    if (w.startsWith('-') || !/^[a-z][a-z0-9-]*$/.test(w)) break
    topics.push(w)
  }
  let id: string | undefined
  for (let n = topics.length; n > 0 && !id; n--) if (COMMANDS.has(topics.slice(0, n).join(':'))) id = topics.slice(0, n).join(':')
  const problems: string[] = []
  if (!id && topics.length > 0) return [`no command \`ichor ${topics.join(' ')}\``]
  const command = id ? COMMANDS.get(id)! : undefined
  const byName = new Map<string, ManifestFlag>()
  for (const flag of Object.values(command?.flags ?? {})) {
    byName.set(`--${flag.name}`, flag)
    if (flag.char) byName.set(`-${flag.char}`, flag)
  }
  words.forEach((w, i) => {
    const m = /^(--?[A-Za-z][\w-]*)(=.*)?$/.exec(w)
    if (!m) return
    const name = m[1]!
    if (!command) {
      if (!ROOT_FLAGS.has(name)) problems.push(`\`ichor\` has no flag ${name}`)
      return
    }
    if (HELP_FLAGS.has(name)) return
    const flag = byName.get(name)
    if (!flag) {
      problems.push(`\`ichor ${id!.replace(/:/g, ' ')}\` has no flag ${name}`)
      return
    }
    // A value shown for a flag with fixed options (not a placeholder such as FILE) must be one of them.
    const value = m[2]?.slice(1) ?? (flag.type === 'option' ? words[i + 1] : undefined)
    if (flag.options && value && /^[a-z0-9]/.test(value)) {
      // FILE, ... and the like are placeholders
      for (const v of value.split('|')) if (!flag.options.includes(v)) problems.push(`${name} ${v}: not one of ${flag.options.join(', ')}`)
    }
  })
  return problems
}

function markdownFiles(): string[] {
  const files = [join(PROJECT_ROOT, 'README.md')]
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, {withFileTypes: true})) {
      if (e.isDirectory()) walk(join(dir, e.name))
      else if (e.name.endsWith('.md')) files.push(join(dir, e.name))
    }
  }
  walk(join(PROJECT_ROOT, 'docs'))
  return files.sort()
}

const DOCUMENTED = markdownFiles().flatMap((f) => ichorLines(readFileSync(f, 'utf8'), relative(PROJECT_ROOT, f)))

describe('the checker', () => {
  it('finds the commands of a code block, continuations, env prefixes and pipes included, and not those in prose', () => {
    const md =
      'Run `ichor bogus` in prose.\n```sh\nichor init --cluster-name a \\\n  --worker 1.2.3.4   # comment --nope\nEDITOR=vi ichor cni values edit && ichor version\necho x | ichor stack status\n```\n'
    expect(ichorLines(md, 'x.md').map((c) => c.text)).toEqual([
      'ichor init --cluster-name a --worker 1.2.3.4',
      'ichor cni values edit',
      'ichor version',
      'ichor stack status',
    ])
  })
  it('refuses a made-up flag, a made-up command and a value a flag does not take', () => {
    expect(problemsOf('ichor init --cluster-name a --made-up-flag')).toEqual(['`ichor init` has no flag --made-up-flag'])
    expect(problemsOf('ichor cni downgrade --to 1.17.0')).toEqual(['no command `ichor cni downgrade`'])
    expect(problemsOf('ichor init [--tunnel vxlan|ipip]')).toEqual(['--tunnel ipip: not one of vxlan, geneve'])
    expect(problemsOf('ichor --verbos')).toEqual(['`ichor` has no flag --verbos'])
  })
  it('accepts the forms the docs use: [optional] flags, placeholders, A|B alternatives, short flags, plugin commands', () => {
    expect(problemsOf('ichor cni status [--talosconfig FILE | --state-dir DIR] [-o yaml|json]')).toEqual([])
    expect(problemsOf('ichor completion bash')).toEqual([])
    expect(problemsOf('ichor help init')).toEqual([])
    expect(problemsOf('ichor --version')).toEqual([])
  })
})

describe('every `ichor ...` line in README.md and docs/', () => {
  it('finds the documented commands (README and the guide)', () => {
    expect(new Set(DOCUMENTED.map((c) => c.file))).toEqual(new Set(['README.md', 'docs/guide.md']))
    expect(DOCUMENTED.length).toBeGreaterThan(30)
  })
  it.each(DOCUMENTED.map((c) => [`${c.file}:${c.line}`, c.text]))('%s `%s`: the command and its flags exist', (_where, text) => {
    expect(problemsOf(text)).toEqual([])
  })
})

describe('README and the guide document', () => {
  const readme = readFileSync(join(PROJECT_ROOT, 'README.md'), 'utf8')
  // Continued lines (`\` at the end) joined.
  const commandsBlock = (/## Commands\n+```sh\n([\s\S]*?)```/.exec(readme)?.[1] ?? '').replace(/\\\n\s*/g, ' ')
  // Aliases (k8s) and the plugin commands are documented in prose.
  // Hidden commands (`ichor autocomplete`, kept for old ~/.bashrc lines) are not advertised.
  const shown = commandsOf(MANIFEST).filter((c) => !(c as {hidden?: boolean}).hidden)
  it.each(shown.map((c) => c.id.split(':').join(' ')))("README's Commands block names `ichor %s`", (id) => {
    expect(commandsBlock).toMatch(new RegExp(`^ichor ${id}( |$)`, 'm'))
  })
  const guide = readFileSync(join(PROJECT_ROOT, 'docs', 'guide.md'), 'utf8')
  // The guide is where a user looks a command up: a new command cannot skip it.
  it.each(shown.map((c) => c.id.split(':').join(' ')))('the guide names `ichor %s`', (id) => {
    expect(guide).toMatch(new RegExp(`ichor ${id}( |\\b|$)`, 'm'))
  })
  it('completion: only bash, the shell ichor completes flag values in, and zsh said plainly to be unsupported', () => {
    const shells = (COMMANDS.get('completion') as unknown as {args: {shell: {options: string[]}}}).args.shell.options
    for (const [name, text] of [
      ['README.md', readme],
      ['docs/guide.md', guide],
    ] as const) {
      const named = [...text.matchAll(/ichor (?:auto)?completion (?:script )?((?:[a-z]+\|)*[a-z]+)/g)].flatMap((m) => m[1]!.split('|'))
      expect(named.length, name).toBeGreaterThan(0)
      for (const shell of named) expect(shells, `${name}: ${shell}`).toContain(shell)
      expect(
        named.filter((shell) => shell !== 'bash'),
        name,
      ).toEqual([])
      expect(text, name).toMatch(/zsh is not supported yet/)
    }
  })
  it('`ichor stack repair-secrets` in README and the guide', () => {
    expect(readme).toMatch(/ichor stack repair-secrets/)
    expect(guide).toMatch(/ichor stack repair-secrets/)
  })
  it.each([
    ['cni values validate', '--tunnel'],
    ['cni values validate', '--show-effective'],
  ])("`ichor %s %s`, in README's Commands block and the guide", (command, flag) => {
    expect(commandsBlock).toMatch(new RegExp(`^ichor ${command} .*${flag}`, 'm'))
    expect(readFileSync(join(PROJECT_ROOT, 'docs', 'guide.md'), 'utf8')).toContain(flag)
  })
})
