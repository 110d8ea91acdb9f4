// Shell completion as a bash user gets it: the script `ichor completion bash` prints, evaluated in
// a real bash, its completion function called with COMP_WORDS/COMP_CWORD set as bash sets them
// on <TAB>. The run has an empty cache folder that nothing writes to: the script must need none.
// zsh is not installed where these tests run: bash only.
import {spawn} from 'node:child_process'
import {existsSync, mkdirSync, mkdtempSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {beforeAll, describe, expect, it} from 'vitest'
import {runCli} from '../support/run-cli.js'

const work = mkdtempSync(join(tmpdir(), 'ichor-completion-'))
const env = {...process.env, XDG_CACHE_HOME: join(work, 'cache'), HOME: join(work, 'home'), ICHOR_MIRROR: ''}
let script = ''

beforeAll(async () => {
  const printed = await runCli(['completion', 'bash'], {env})
  expect(printed.code, printed.stderr).toBe(0)
  script = printed.stdout
  // A folder to complete file names in.
  mkdirSync(join(work, 'files', 'configs'), {recursive: true})
  writeFileSync(join(work, 'files', 'kubeconfig.yaml'), '')
  writeFileSync(join(work, 'files', 'values.yaml'), '')
}, 60_000)

/** What bash offers for `line<TAB>` (the words of the line; a trailing space starts a new word). */
function complete(line: string): Promise<string[]> {
  const words = line.split(' ')
  const program = `
eval "$ICHOR_SCRIPT"
fn=$(complete -p ichor | sed -E 's/.* -F ([^ ]+) .*/\\1/')
COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')})
COMP_CWORD=${words.length - 1}
COMP_LINE=${JSON.stringify(line)}
COMP_POINT=${line.length}
"$fn" ichor "\${COMP_WORDS[COMP_CWORD]}" "\${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\\n' "\${COMPREPLY[@]}"
`
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['--norc', '--noprofile', '-c', program], {cwd: join(work, 'files'), env: {...env, ICHOR_SCRIPT: script}})
    let out = ''
    let err = ''
    child.stdout.on('data', (d) => (out += d))
    child.stderr.on('data', (d) => (err += d))
    child.on('error', reject)
    child.on('close', (code) => (code === 0 ? resolve([...new Set(out.split('\n').filter(Boolean))].sort()) : reject(new Error(`bash exited ${code}: ${err}`))))
  })
}

describe('ichor completion bash', () => {
  it.each([
    ['ichor cni values get -o ', ['json', 'yaml']],
    ['ichor stack status --output ', ['json', 'yaml']],
    ['ichor stack values set ', ['argocd', 'kokumi']],
    ['ichor stack values get k', ['kokumi']],
    ['ichor stack promotion set ', ['Automatic', 'Manual']],
    ['ichor init --kube-proxy ', ['kube-proxy', 'replaced']],
    ['ichor init --tunnel ', ['geneve', 'vxlan']],
    ['ichor init --promotion ', ['Automatic', 'Manual']],
    ['ichor cni values validate --tunnel g', ['geneve']],
  ])('`%s<TAB>` offers the values', async (line, expected) => {
    expect(await complete(line)).toEqual(expected)
  })

  it.each([
    'ichor init --kubeconfig ',
    'ichor cni values set -f ',
    'ichor stack values set argocd --values ',
    'ichor cni status --talosconfig ',
    'ichor cni upgrade --cilium-chart ',
  ])('`%s<TAB>` offers files', async (line) => {
    expect(await complete(line)).toEqual(['configs', 'kubeconfig.yaml', 'values.yaml'])
  })

  it('a directory flag offers directories', async () => {
    expect(await complete('ichor init --state-dir ')).toEqual(['configs'])
  })

  it("flags after an argument, and after a flag's value", async () => {
    expect(await complete('ichor stack values set argocd --kube')).toEqual(['--kubeconfig'])
    expect(await complete('ichor stack values set argocd -f values.yaml --se')).toEqual(['--set', '--set-file', '--set-json', '--set-literal', '--set-string'])
    expect(await complete('ichor stack values set argocd -f values.yaml ')).toEqual([]) // KEY=VALUE: nothing to offer
  })

  it('a free-text flag value offers nothing (no flag names as a value)', async () => {
    expect(await complete('ichor init --cluster-name ')).toEqual([])
  })

  it('command names complete, topic by topic', async () => {
    expect(await complete('ichor cn')).toEqual(['cni'])
    expect(await complete('ichor cr')).toEqual(['credentials'])
    expect(await complete('ichor cni values ')).toEqual(['diff', 'edit', 'get', 'set', 'validate'])
    expect(await complete('ichor k8s ')).toEqual(['upgrade'])
    // A topic that is a command too: its subcommands.
    expect(await complete('ichor backup i')).toEqual(['inspect'])
    // An unknown word: nothing.
    expect(await complete('ichor bogus ')).toEqual([])
    // Hidden commands are not offered.
    expect(await complete('ichor au')).toEqual([])
  })

  it('needs no cache: nothing was written to the cache or home folder', () => {
    expect(existsSync(join(work, 'cache'))).toBe(false)
    expect(existsSync(join(work, 'home'))).toBe(false)
  })

  it('the ~/.bashrc line of older ichor (eval "$(ichor autocomplete script bash)") gets the same whole script', async () => {
    const old = await runCli(['autocomplete', 'script', 'bash'], {env})
    expect(old.code, old.stderr).toBe(0)
    expect(old.stdout).toBe(script)
    const setup = await runCli(['autocomplete', '--refresh-cache'], {env})
    expect([setup.code, setup.stdout]).toEqual([0, expect.stringContaining('source <(ichor completion bash)')])
  })

  it('zsh and the others: a usage error naming what is accepted', async () => {
    const r = await runCli(['completion', 'zsh'], {env})
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(/zsh.*bash/)
  })
})
