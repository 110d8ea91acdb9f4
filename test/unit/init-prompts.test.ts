// `ichor init` on a terminal: the built CLI driven through a pseudo-terminal (util-linux
// `script`), answering each prompt when it appears, as a user types.
import {chmodSync, existsSync, mkdtempSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {describe, expect, it} from 'vitest'
import {nodeListProblem} from '../../src/lib/init/prompts.js'
import {PROJECT_ROOT, UPSTREAM} from '../support/upstream.js'
import {terminal} from '../support/terminal.js'

if (!existsSync(join(PROJECT_ROOT, 'dist', 'commands', 'init.js'))) throw new Error('dist/ is missing: run `npm run build` first')

const ENTER = '\r'
const CLEAR_LINE = '\x15' // Ctrl-U
const CTRL_C = '\x03'

// init checks what `ichor doctor` checks before its first prompt: a talosctl of the Talos
// version targeted must be there. All ichor reads of it before a step runs is its version.
const tools = mkdtempSync(join(tmpdir(), 'ichor-prompt-tools-'))
const TALOSCTL = join(tools, 'talosctl')
writeFileSync(TALOSCTL, "#!/bin/sh\nprintf 'Client:\\n\\tTag:         v1.14.1\\n'\n")
chmodSync(TALOSCTL, 0o755)
const env = {ICHOR_TALOSCTL: TALOSCTL}

describe('ichor init on a terminal', () => {
  it('checks each answer as it is typed, asks again when wrong, takes comma lists, and Ctrl-C aborts with exit 130', async () => {
    const t = terminal(['init', '--allow-unpinned', '--mirror', UPSTREAM.dir, '--state-dir', join(PROJECT_ROOT, '.cache', 'prompt-test-state')], {env})
    await t.expect('Cluster name')
    t.type(`${CLEAR_LINE}Bad_Name${ENTER}`)
    await t.expect('is not a DNS-1123 label')
    t.type(`${CLEAR_LINE}homelab${ENTER}`)
    await t.expect('Control-plane node addresses')
    t.type(`192.0.2.999${ENTER}`)
    await t.expect('"192.0.2.999" is not an IP address or host name')
    t.type(`${CLEAR_LINE}192.0.2.10, 192.0.2.12${ENTER}`)
    await t.expect('Kubernetes API endpoint')
    t.type(ENTER) // the default, https://192.0.2.10:6443
    await t.expect('Worker node addresses')
    t.type(`192.0.2.12${ENTER}`)
    await t.expect('"192.0.2.12" is given twice')
    t.type(`${CLEAR_LINE}192.0.2.11${ENTER}`)
    await t.expect('Configure 192.0.2.10, 192.0.2.12, 192.0.2.11 as cluster "homelab" (https://192.0.2.10:6443)?', 120_000)
    t.type(CTRL_C)
    expect(await t.exited).toBe(130)
    expect(t.screen()).toContain('aborted: nothing was changed')
    expect(t.screen()).not.toMatch(/\n\s+at /)
  }, 300_000)

  it('asks for the passphrase of the Talos bundle after the confirmation, refuses one under 12 characters, twice for a new bundle, again when the two differ; never echoed', async () => {
    const t = terminal(
      [
        'init',
        '--allow-unpinned',
        '--mirror',
        UPSTREAM.dir,
        '--state-dir',
        join(PROJECT_ROOT, '.cache', 'prompt-test-state'),
        '--cluster-name',
        'homelab',
        '--endpoint',
        'https://192.0.2.10:6443',
        '--control-plane',
        '192.0.2.10',
      ],
      {env},
    )
    await t.expect('Worker node addresses')
    t.type(ENTER)
    await t.expect('Configure 192.0.2.10 as cluster "homelab" (https://192.0.2.10:6443)?', 120_000)
    t.type(`y${ENTER}`)
    await t.expect('Passphrase for the Talos admin bundle kept in the cluster')
    t.type(`first${ENTER}`) // a new bundle's passphrase is refused under 12 characters, and asked again
    await t.expect('at least 12 characters')
    t.type(`-try-passphrase${ENTER}`)
    await t.expect('The same passphrase again')
    t.type(`first-tyr-passphrase${ENTER}`)
    await t.expect('The passphrases differ; try again.')
    await t.expect('Passphrase for the Talos admin bundle kept in the cluster')
    t.type(CTRL_C)
    expect(await t.exited).toBe(130)
    expect(t.screen()).not.toMatch(/first-t/)
  }, 300_000)

  it('--yes never prompts: a missing flag is an error naming it', async () => {
    const t = terminal(['init', '--yes', '--mirror', UPSTREAM.dir])
    expect(await t.exited).toBe(2)
    expect(t.screen()).toMatch(/- --cluster-name: is required/)
    expect(t.screen()).not.toMatch(/Cluster name/)
  })
})

describe('prerequisites before questions (issue 23 point 7)', () => {
  it("a missing helm is reported with the doctor's message before the first prompt, and no prompt is asked", async () => {
    // PATH without helm and no ICHOR_HELM: helm cannot be found (src/lib/exec/resolve.ts).
    const t = terminal(['init', '--allow-unpinned', '--mirror', UPSTREAM.dir, '--state-dir', join(PROJECT_ROOT, '.cache', 'prompt-test-state')], {
      env: {...env, ICHOR_HELM: '', PATH: '/usr/bin:/bin'},
    })
    const code = await Promise.race([t.exited, new Promise((r) => setTimeout(() => r('still running'), 60_000))])
    if (code === 'still running') t.type(CTRL_C)
    expect(code, t.screen()).toBe(1)
    expect(t.screen()).toMatch(/helm not found/)
    expect(t.screen()).toMatch(/install Helm 3\.18\+ or 4\.0\.1\+ and put it on PATH, or set ICHOR_HELM/)
    expect(t.screen()).not.toMatch(/Cluster name|Control-plane node|Worker node|Passphrase|Configure /)
  }, 120_000)
  it('a missing talosctl too, naming the version to install', async () => {
    const t = terminal(['init', '--allow-unpinned', '--mirror', UPSTREAM.dir, '--state-dir', join(PROJECT_ROOT, '.cache', 'prompt-test-state')], {
      env: {ICHOR_TALOSCTL: join(tools, 'no-talosctl')},
    })
    const code = await Promise.race([t.exited, new Promise((r) => setTimeout(() => r('still running'), 60_000))])
    if (code === 'still running') t.type(CTRL_C)
    expect(code, t.screen()).toBe(1)
    expect(t.screen()).toMatch(/talosctl not found[\s\S]*install talosctl v1\.14\.1/)
    expect(t.screen()).not.toMatch(/Cluster name/)
  }, 120_000)
})

describe('a mistyped command on a terminal', () => {
  it('`ichor inti --yes` and Enter: the suggestion and exit 2, init never runs', async () => {
    const t = terminal(['inti', '--yes', '--mirror', UPSTREAM.dir])
    await t.expect('did you mean ichor init?')
    t.type(ENTER)
    expect(await t.exited).toBe(2)
    expect(t.screen()).toMatch(/inti is not an ichor command/)
    // init --yes would have run and named its missing flags.
    expect(t.screen()).not.toMatch(/cluster-name|Did you mean init\? \(Y\/n\)/)
  })
})

describe('init prompts', () => {
  it('node list answers take commas and spaces, and name what is wrong', () => {
    expect(nodeListProblem('192.0.2.10, 192.0.2.11 node-3', {required: true})).toBeUndefined()
    expect(nodeListProblem('', {required: true})).toBe('at least one node address is required')
    expect(nodeListProblem('', {required: false})).toBeUndefined()
    expect(nodeListProblem('192.0.2.10,192.0.2.10', {required: true})).toBe('"192.0.2.10" is given twice')
  })
})
