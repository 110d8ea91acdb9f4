// Shell completion as a bash user gets it: the script `ichor autocomplete script bash` prints
// (after `ichor autocomplete bash` wrote the functions), evaluated in a real bash, its
// completion function called with COMP_WORDS/COMP_CWORD set as bash sets them on <TAB>.
// zsh is not installed where these tests run: bash only.
import {spawn} from 'node:child_process'
import {mkdirSync, mkdtempSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {beforeAll, describe, expect, it} from 'vitest'
import {runCli} from '../support/run-cli.js'

const work = mkdtempSync(join(tmpdir(), 'ichor-completion-'))
const env = {...process.env, XDG_CACHE_HOME: join(work, 'cache'), ICHOR_MIRROR: ''}
let script = ''

beforeAll(async () => {
  const setup = await runCli(['autocomplete', 'bash'], {env})
  expect(setup.code, setup.stderr).toBe(0)
  const printed = await runCli(['autocomplete', 'script', 'bash'], {env})
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

describe('ichor autocomplete script bash', () => {
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

  it('command names still complete', async () => {
    expect(await complete('ichor cn')).toEqual(['cni'])
    expect(await complete('ichor cni values ')).toEqual(['diff', 'edit', 'get', 'set', 'validate'])
  })
})
