// `ichor doctor` on the built CLI, as a user runs it, against present, missing and
// wrong-version binaries. The helm of the "present" case is the real Go-built Helm 4
// (ICHOR_HELM in the vitest config); the wrong versions are small scripts that print a
// version, which is all ichor reads of them: what is tested is ichor's reaction to it.
// The real talosctl and a real API server are in test/e2e/doctor.test.ts.
import {spawn} from 'node:child_process'
import {chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {basename, join} from 'node:path'
import {afterAll, describe, expect, it} from 'vitest'
import {pinnedAssets} from '../../src/lib/assets/lock.js'
import {formatDoctorReport} from '../../src/lib/doctor/format.js'
import type {DoctorReport} from '../../src/lib/doctor/types.js'
import {findHelm} from '../../src/lib/helm/binary.js'
import {PROJECT_ROOT, UPSTREAM} from '../support/upstream.js'

const BIN = join(PROJECT_ROOT, 'bin', 'run.js')
if (!existsSync(join(PROJECT_ROOT, 'dist', 'commands', 'doctor.js'))) throw new Error('dist/ is missing or old: run `npm run build` first (npm test does)')
const REAL_HELM = process.env.ICHOR_HELM!

const dir = mkdtempSync(join(tmpdir(), 'ichor-doctor-'))
afterAll(() => rmSync(dir, {recursive: true, force: true}))

let n = 0
/** An executable script that prints `output` and records each run in a marker file. */
function fakeBinary(name: string, output: string, opts: {executable?: boolean} = {}): {path: string; ran: () => boolean} {
  const folder = join(dir, `bin-${n++}`)
  mkdirSync(folder)
  const path = join(folder, name)
  const marker = join(folder, 'ran')
  writeFileSync(path, `#!/bin/sh\ntouch '${marker}'\nprintf '%s' '${output}'\n`)
  chmodSync(path, opts.executable === false ? 0o644 : 0o755)
  return {path, ran: () => existsSync(marker)}
}

const TALOSCTL_1_14_1 = fakeBinary('talosctl', 'Client:\n\tTag:         v1.14.1\n\tSHA:         undefined\n').path
const privateState = join(dir, 'state')
mkdirSync(privateState, {mode: 0o700})

interface Check {
  id: string
  status: 'ok' | 'warn' | 'fail'
  detail: string
  fix?: string
}

async function doctor(args: string[], env: Record<string, string | undefined> = {}) {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !['ICHOR_HELM', 'ICHOR_TALOSCTL', 'KUBECONFIG', 'ICHOR_ASSETS_DIR'].includes(k)))
  const fullEnv: Record<string, string | undefined> = {
    ...base,
    ICHOR_MIRROR: '',
    XDG_CACHE_HOME: join(dir, 'cache'),
    XDG_STATE_HOME: join(dir, 'xdg-state'),
    ICHOR_HELM: REAL_HELM,
    ICHOR_TALOSCTL: TALOSCTL_1_14_1,
    ...env,
  }
  for (const [k, v] of Object.entries(fullEnv)) if (v === undefined) delete fullEnv[k]
  // Asynchronous: a synchronous spawn would block the test worker for the whole run.
  const r = await new Promise<{status: number | null; stdout: string; stderr: string}>((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, 'doctor', '--json', ...args], {env: fullEnv as NodeJS.ProcessEnv})
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d: Buffer) => (stdout += d))
    child.stderr.on('data', (d: Buffer) => (stderr += d))
    child.on('error', reject)
    child.on('close', (status) => resolve({status, stdout, stderr}))
  })
  const doc = JSON.parse(r.stdout) as {
    ok: boolean
    checks: Check[]
    skipped: string[]
    tested: {id: string; pinned: string; pinTested: boolean; testedVersions: string[]}[]
    error?: {message: string; exitCode: number}
  }
  const check = (id: string) => {
    const found = doc.checks.find((c) => c.id === id)
    if (!found) throw new Error(`no check ${id} in ${r.stdout}`)
    return found
  }
  return {code: r.status, doc, check, stderr: r.stderr}
}

const ASSET_FLAGS = ['--cilium-chart', UPSTREAM.pinnedCiliumChart, '--argocd-chart', UPSTREAM.argocdChart, '--kokumi-manifest', UPSTREAM.kokumiManifest]
const READY = [...ASSET_FLAGS, '--state-dir', privateState]

describe('ichor doctor: helm', async () => {
  it('the real helm is found and can adopt; with every other check ok or warn the exit code is 0', async () => {
    const r = await doctor(READY)
    expect(r.check('helm')).toMatchObject({status: 'ok'})
    expect(r.check('helm').detail).toContain(REAL_HELM)
    expect(r.doc.checks.filter((c) => c.status === 'fail')).toEqual([])
    expect(r.doc.ok).toBe(true)
    expect(r.code).toBe(0)
    // No cluster named: the kubeconfig is not looked at.
    expect(r.doc.checks.map((c) => c.id)).not.toContain('kubeconfig')
    expect(r.doc.skipped.join()).toMatch(/--kubeconfig/)
  })
  it('a missing helm fails with the fix, exit 1', async () => {
    const r = await doctor(READY, {ICHOR_HELM: join(dir, 'nowhere', 'helm')})
    expect(r.check('helm')).toMatchObject({status: 'fail', fix: expect.stringMatching(/ICHOR_HELM/)})
    expect(r.check('helm').detail).toMatch(/helm not found: ICHOR_HELM=.*does not exist/)
    expect(r.doc.ok).toBe(false)
    expect(r.code).toBe(1)
  })
  it('a helm file that is not executable is reported from the file system and never run', async () => {
    const helm = fakeBinary('helm', 'v4.1.4', {executable: false})
    const r = await doctor(READY, {ICHOR_HELM: helm.path})
    expect(r.check('helm')).toMatchObject({status: 'fail'})
    expect(r.check('helm').detail).toMatch(/is not an executable file/)
    expect(helm.ran()).toBe(false)
  })
  it.each([
    ['v3.17.3', 'fail', /too old: ichor needs Helm 3\.18/],
    ['v4.0.0', 'fail', /Helm 4\.0\.0 fails the server-side --take-ownership \(helm\/helm#31510\)/],
    ['v3.18.0', 'ok', /can adopt/],
    ['v4.0.1', 'ok', /can adopt/],
    ['devel', 'fail', /cannot read helm's version from "devel"/],
  ] as const)('helm %s: %s', async (version, status, detail) => {
    const helm = fakeBinary('helm', version)
    const r = await doctor(READY, {ICHOR_HELM: helm.path})
    expect(r.check('helm')).toMatchObject({status})
    expect(r.check('helm').detail).toMatch(detail)
    expect(helm.ran()).toBe(true)
    expect(r.code).toBe(status === 'fail' ? 1 : 0)
  })
})

describe('every command refuses the helm doctor fails', async () => {
  it('findHelm (used before any helm install or upgrade) refuses Helm 4.0.0 and accepts 4.0.1', async () => {
    const saved = process.env.ICHOR_HELM
    try {
      process.env.ICHOR_HELM = fakeBinary('helm', 'v4.0.0').path
      await expect(findHelm()).rejects.toThrow(/helm\/helm#31510/)
      process.env.ICHOR_HELM = fakeBinary('helm', 'v4.0.1').path
      await expect(findHelm()).resolves.toMatchObject({major: 4, minor: 0})
    } finally {
      process.env.ICHOR_HELM = saved
    }
  })
})

describe('ichor doctor: talosctl against the Talos version targeted', async () => {
  it('a missing talosctl fails, naming ICHOR_TALOSCTL and the version to install', async () => {
    const r = await doctor(READY, {ICHOR_TALOSCTL: undefined, PATH: join(dir, 'empty-path')})
    expect(r.check('talosctl')).toMatchObject({
      status: 'fail',
      detail: expect.stringMatching(/talosctl not found/),
      fix: expect.stringMatching(/install talosctl v1\.14\.1.*ICHOR_TALOSCTL/),
    })
    expect(r.code).toBe(1)
  })
  it.each([
    ['v1.14.1', [], 'ok', /matches Talos v1\.14\.1/],
    ['v1.14.3', [], 'ok', /matches Talos v1\.14\.1/],
    ['v1.13.4', [], 'fail', /older than the Talos v1\.14\.1 targeted/],
    ['v1.13.4', ['--talos-version', 'v1.13.0'], 'ok', /matches Talos v1\.13\.0/],
    ['v1.14.1', ['--talos-version', 'v1.12.6'], 'warn', /newer than the Talos v1\.12\.6 targeted/],
  ] as const)('talosctl %s %j: %s', async (tag, args, status, detail) => {
    const talosctl = fakeBinary('talosctl', `Client:\n\tTag:         ${tag}\n\tSHA:         abc\n`)
    const r = await doctor([...READY, ...args], {ICHOR_TALOSCTL: talosctl.path})
    expect(r.check('talosctl')).toMatchObject({status, detail: expect.stringMatching(detail)})
    expect(r.code).toBe(status === 'fail' ? 1 : 0)
  })
  it('a talosctl that does not say its version is a warning', async () => {
    const talosctl = fakeBinary('talosctl', 'Client:\n\tSHA: abc\n')
    expect((await doctor(READY, {ICHOR_TALOSCTL: talosctl.path})).check('talosctl')).toMatchObject({
      status: 'warn',
      detail: expect.stringMatching(/does not say its version/),
    })
  })
  it('an unsupported --talos-version is bad input: exit 2, nothing checked', async () => {
    const r = await doctor([...READY, '--talos-version', 'v1.99.0'])
    expect(r.code).toBe(2)
    expect(r.doc.error!.message).toMatch(/--talos-version: v1\.99\.0 is not supported/)
  })
})

describe('ichor doctor: assets', async () => {
  it('says which file and version each is and whether it is the pinned one', async () => {
    const r = await doctor(READY)
    const pin = pinnedAssets().cilium
    expect(r.check('asset:cilium')).toMatchObject({status: 'ok', detail: expect.stringContaining(`${basename(pin.file)} (cilium ${pin.version},`)})
    expect(r.check('asset:cilium').detail).toContain(`matches the pin ${pin.version}`)
    expect(r.check('asset:argocd')).toMatchObject({
      status: 'warn',
      detail: expect.stringMatching(/argo-cd 10\.1\.1.*does NOT match the pin/),
      fix: expect.stringMatching(/ichor assets fetch/),
    })
  })
  it("says plainly which pins this build was tested with: Cilium's pinned chart, but older Argo CD and Kokumi than the pins", async () => {
    const r = await doctor(READY)
    const lock = JSON.parse(readFileSync(join(PROJECT_ROOT, 'assets', 'lock.json'), 'utf8')) as Record<string, {version: string}>
    expect(r.doc.tested).toEqual([
      expect.objectContaining({id: 'cilium', pinned: lock.cilium!.version, pinTested: true}),
      expect.objectContaining({id: 'argocd', pinned: lock.argocd!.version, pinTested: false, testedVersions: ['10.1.1']}),
      expect.objectContaining({id: 'kokumi', pinned: lock.kokumi!.version, pinTested: false, testedVersions: ['0.14.0']}),
    ])
    const human = formatDoctorReport(r.doc as unknown as DoctorReport)
    expect(human).toMatch(new RegExp(`argocd ${lock.argocd!.version.replace(/\./g, '\\.')} \\(the pin\\): NOT tested by this build; its tests ran 10\\.1\\.1`))
    expect(human).toMatch(new RegExp(`cilium ${lock.cilium!.version.replace(/\./g, '\\.')} \\(the pin\\): tested`))
  })
  it('nothing fetched and no mirror: each asset fails with `ichor assets fetch` as the fix', async () => {
    const r = await doctor(['--state-dir', privateState])
    for (const id of ['cilium', 'argocd', 'kokumi'])
      expect(r.check(`asset:${id}`)).toMatchObject({status: 'fail', fix: expect.stringMatching(/ichor assets fetch/)})
    expect(r.code).toBe(1)
  })
  it('a fetched file that changed since fails', async () => {
    const assets = join(dir, 'assets-changed')
    mkdirSync(join(assets, 'charts'), {recursive: true})
    copyFileSync(UPSTREAM.cilium119Chart, join(assets, pinnedAssets().cilium.file))
    const r = await doctor(['--assets-dir', assets, '--state-dir', privateState])
    expect(r.check('asset:cilium')).toMatchObject({status: 'fail', detail: expect.stringMatching(/changed since it was fetched/)})
  })
})

describe('ichor doctor: state folder', async () => {
  it('a folder others can enter is a warning with the chmod that fixes it; a private one is ok', async () => {
    const open = join(dir, 'open-state')
    mkdirSync(open)
    chmodSync(open, 0o755)
    expect((await doctor([...ASSET_FLAGS, '--state-dir', open])).check('state-dir')).toMatchObject({
      status: 'warn',
      fix: expect.stringContaining(`chmod 700 ${open}`),
    })
    expect((await doctor(READY)).check('state-dir')).toMatchObject({status: 'ok', detail: expect.stringMatching(/writable, permissions 0700/)})
  })
  it('the default folder ($XDG_STATE_HOME/ichor) not created yet is ok; one under a file cannot be created and fails', async () => {
    expect((await doctor(ASSET_FLAGS)).check('state-dir')).toMatchObject({status: 'ok', detail: expect.stringMatching(/does not exist yet/)})
    const file = join(dir, 'a-file')
    writeFileSync(file, '')
    const r = await doctor(ASSET_FLAGS, {XDG_STATE_HOME: file})
    expect(r.check('state-dir')).toMatchObject({status: 'fail', detail: expect.stringMatching(/is not a folder/)})
    expect(r.code).toBe(1)
  })
})

describe('ichor doctor: kubeconfig', async () => {
  it('a missing --kubeconfig file fails; an unknown --context fails naming the known ones', async () => {
    expect((await doctor([...READY, '--kubeconfig', join(dir, 'none')])).check('kubeconfig')).toMatchObject({
      status: 'fail',
      detail: expect.stringMatching(/does not exist/),
    })
    const kc = join(dir, 'kubeconfig')
    writeFileSync(
      kc,
      'apiVersion: v1\nkind: Config\ncurrent-context: a\ncontexts: [{name: a, context: {cluster: a, user: a}}]\nclusters: [{name: a, cluster: {server: "https://127.0.0.1:1"}}]\nusers: [{name: a, user: {token: x}}]\n',
    )
    const r = await doctor([...READY, '--kubeconfig', kc, '--context', 'b'])
    expect(r.check('kubeconfig')).toMatchObject({
      status: 'fail',
      detail: expect.stringMatching(/no context "b"/),
      fix: expect.stringMatching(/known contexts: a/),
    })
  })
  it('KUBECONFIG naming a server that does not answer: the kubeconfig is ok, the API server fails', async () => {
    const kc = join(dir, 'kubeconfig')
    const r = await doctor(READY, {KUBECONFIG: kc})
    expect(r.check('kubeconfig')).toMatchObject({status: 'ok'})
    expect(r.check('kube-api')).toMatchObject({
      status: 'fail',
      detail: expect.stringMatching(/cannot reach the Kubernetes API server https:\/\/127\.0\.0\.1:1/),
    })
    expect(r.code).toBe(1)
  })
})
