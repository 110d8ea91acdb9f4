// How many helm and talosctl processes a day-2 read starts: each is a Go binary costing
// hundreds of ms on a laptop, so a working binary is not asked for its version on the way
// to every call. The stand-ins log their argv and hand over to the real binary (helm) or
// answer like `talosctl get machineconfig -o yaml` does (a resource with the config in spec).
import {chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, afterEach, beforeAll, describe, expect, it, vi} from 'vitest'
import {UPSTREAM} from '../support/upstream.js'

let work: string
const saved = {helm: process.env.ICHOR_HELM, talosctl: process.env.ICHOR_TALOSCTL, xdg: process.env.XDG_CACHE_HOME, cache: process.env.ICHOR_RENDER_CACHE}

/** A script at `name` that appends its argv to `log`, then runs `body`. */
function logging(name: string, log: string, body: string): string {
  const path = join(work, name)
  writeFileSync(path, `#!/bin/sh\necho "$*" >> '${log}'\n${body}\n`)
  chmodSync(path, 0o755)
  return path
}
const calls = (log: string) => (existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n') : [])

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'ichor-day2-processes-'))
})
afterEach(() => {
  for (const [k, v] of [
    ['ICHOR_HELM', saved.helm],
    ['ICHOR_TALOSCTL', saved.talosctl],
    ['XDG_CACHE_HOME', saved.xdg],
    ['ICHOR_RENDER_CACHE', saved.cache],
  ] as const) {
    if (v === undefined) delete process.env[k]
    else process.env[k] = v
  }
  vi.resetModules()
})
afterAll(() => rmSync(work, {recursive: true, force: true}))

describe('helm processes of a cached render', () => {
  it('Given a render in the cache, When a new process renders the same again, Then no helm process starts (not even `helm version`)', async () => {
    const real = (await import('../../src/lib/helm/binary.js')).helmPath()
    const log = join(work, 'helm.log')
    process.env.ICHOR_HELM = logging('helm', log, `exec '${real}' "$@"`)
    process.env.XDG_CACHE_HOME = join(work, 'cache')
    process.env.ICHOR_RENDER_CACHE = 'on'
    const render = async () =>
      (await import('../../src/lib/helm/template.js')).helmTemplate({chartPath: UPSTREAM.argocdChart, releaseName: 'argocd', namespace: 'argocd', values: {}})
    const first = await render()
    expect(
      calls(log)
        .map((c) => c.split(' ')[0])
        .sort(),
    ).toEqual(['template', 'version'])
    vi.resetModules() // a new CLI run: nothing remembered in memory
    expect(await render()).toBe(first)
    expect(calls(log)).toHaveLength(2)
  })

  // Issue 25: a cold `cni values validate` waited for `helm version` before it started the render.
  it('Given no cached render, When it renders, Then `helm template` starts without waiting for `helm version`', async () => {
    const real = (await import('../../src/lib/helm/binary.js')).helmPath()
    const log = join(work, 'helm-slow-version.log')
    // `helm version` answers after 1 s, as a cold Go binary on a loaded laptop can.
    process.env.ICHOR_HELM = logging('helm-slow-version', log, `if [ "$1" = version ]; then sleep 1; echo "version done" >> '${log}'; fi\nexec '${real}' "$@"`)
    process.env.ICHOR_RENDER_CACHE = 'off'
    const {helmTemplate} = await import('../../src/lib/helm/template.js')
    await helmTemplate({chartPath: UPSTREAM.argocdChart, releaseName: 'argocd', namespace: 'argocd', values: {}})
    // Both start at once, so which logs first is the scheduler's choice; the render must start before the version check ends.
    const order = calls(log).map((c) => c.split(' ').slice(0, 2).join(' '))
    expect([...order].sort()).toEqual(['template argocd', 'version --template', 'version done'])
    expect(order.indexOf('template argocd')).toBeLessThan(order.indexOf('version done'))
  })

  it('Given a helm too old for ichor, When it renders, Then the version error wins over the render', async () => {
    const real = (await import('../../src/lib/helm/binary.js')).helmPath()
    const log = join(work, 'helm-old.log')
    process.env.ICHOR_HELM = logging('helm-old', log, `if [ "$1" = version ]; then echo v3.17.3; exit 0; fi\nexec '${real}' "$@"`)
    process.env.ICHOR_RENDER_CACHE = 'off'
    const {helmTemplate} = await import('../../src/lib/helm/template.js')
    await expect(helmTemplate({chartPath: UPSTREAM.argocdChart, releaseName: 'argocd', namespace: 'argocd', values: {}})).rejects.toThrow(
      /ichor needs Helm 3\.18 or newer/,
    )
  })
})

describe('talosctl processes of a day-2 read', () => {
  const resource = 'node: 127.0.0.11\\nmetadata:\\n  id: v1alpha1\\nspec: |\\n  version: v1alpha1\\n  machine: {type: controlplane}\\n'

  it('reads a machine config with one talosctl process', async () => {
    const log = join(work, 'talosctl-ok.log')
    process.env.ICHOR_TALOSCTL = logging('talosctl-ok', log, `printf '${resource}'`)
    const {getMachineConfig} = await import('../../src/lib/talos/talosctl.js')
    expect(await getMachineConfig({node: '127.0.0.11', talosconfig: join(work, 'talosconfig')})).toBe('version: v1alpha1\nmachine: {type: controlplane}\n')
    expect(calls(log).map((c) => c.split(' ').slice(0, 2).join(' '))).toEqual(['get machineconfig'])
  })

  it('still says a talosctl that does not run cannot run, rather than blaming the node', async () => {
    const log = join(work, 'talosctl-broken.log')
    process.env.ICHOR_TALOSCTL = logging('talosctl-broken', log, 'echo "exec format error" >&2; exit 126')
    const {getMachineConfig} = await import('../../src/lib/talos/talosctl.js')
    await expect(getMachineConfig({node: '127.0.0.11', talosconfig: join(work, 'talosconfig')})).rejects.toThrow(
      /^cannot run talosctl at "\S+talosctl-broken": exec format error$/,
    )
  })
})
