// Where a command gets its talosconfig (talosconfigFor, src/lib/talos/access.ts): one rule for
// every caller. --talosconfig or the state folder on this machine first; else, only for a caller
// that can open it, the sealed copy the cluster keeps; else the one error.
import {existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {dirname, join} from 'node:path'
import {describe, expect, it, onTestFinished} from 'vitest'
import {reportOf} from '../../src/lib/cli/error-report.js'
import type {KubeObject} from '../../src/lib/kube/objects.js'
import {installationCrd, type Installation} from '../../src/lib/state/installation.js'
import {sealedBundleSecret} from '../../src/lib/state/sealed-bundle.js'
import {StateKey} from '../../src/lib/state/state-key.js'
import {talosconfigFor, type SealedTalosconfig} from '../../src/lib/talos/access.js'
import {sessionFixture} from '../support/session-fixture.js'
import {planFixture, withoutLease} from '../support/plan-fixture.js'
import {runPlan, type Plan} from '../../src/lib/plans/run.js'
import {holds, missing} from '../../src/lib/tasks/probe.js'
import {ichorInstallation} from '../support/stack-cluster.js'

const installation = ichorInstallation() as unknown as Installation
const SEALED_TALOSCONFIG = 'context: from-the-cluster\n'
const key = StateKey.passphrase('a passphrase long enough', 'test')

function folder(): string {
  const dir = mkdtempSync(join(tmpdir(), 'ichor-talos-access-'))
  onTestFinished(() => rmSync(dir, {recursive: true, force: true}))
  return dir
}

/** A state folder as init leaves it on this machine, with a talosconfig. */
function stateDirWithTalosconfig(): string {
  const dir = folder()
  writeFileSync(join(dir, 'talosconfig'), 'context: local\n', {mode: 0o600})
  return dir
}

// Sealing runs scrypt (about 2 s): once for the file.
let sealing: Promise<KubeObject> | undefined
const sealedSecret = () => (sealing ??= sealedBundleSecret({secretsYaml: Buffer.from('cluster: {}\n'), talosconfig: Buffer.from(SEALED_TALOSCONFIG)}, key))

/** The sealed copy, opened from a cluster that keeps one (or none); counts the times the key was asked for. */
async function sealed(keeps: boolean): Promise<SealedTalosconfig & {asked: () => number}> {
  const objects: KubeObject[] = keeps ? [await sealedSecret()] : []
  const {session} = await sessionFixture(objects)
  let asked = 0
  return {
    kube: await session.kube(),
    privateDir: folder(),
    key: async () => {
      asked++
      return key
    },
    warn: () => {},
    asked: () => asked,
  }
}

const failure = (p: Promise<unknown>) =>
  p.then(
    () => expect.unreachable('found one'),
    (e: unknown) => reportOf(e),
  )

describe('talosconfigFor', () => {
  it('Given a talosconfig in the state folder, When the caller could open the sealed copy, Then the local one is used and no key is asked for', async () => {
    const stateDir = stateDirWithTalosconfig()
    const cluster = await sealed(true)
    expect(await talosconfigFor(installation, {stateDir, sealed: cluster})).toBe(join(stateDir, 'talosconfig'))
    expect(cluster.asked()).toBe(0)
  })

  it('Given --talosconfig, Then that file, before the state folder', async () => {
    const named = join(folder(), 'mine')
    writeFileSync(named, 'context: named\n')
    expect(await talosconfigFor(installation, {talosconfig: named, stateDir: stateDirWithTalosconfig()})).toBe(named)
  })

  it('Given none on this machine, When the caller can open the sealed copy, Then it is written into the private folder', async () => {
    const cluster = await sealed(true)
    const file = await talosconfigFor(installation, {stateDir: folder(), sealed: cluster})
    expect(file).toBe(join(cluster.privateDir, 'talosconfig'))
    expect(readFileSync(file, 'utf8')).toBe(SEALED_TALOSCONFIG)
    expect(cluster.asked()).toBe(1)
  })

  it('Given none on this machine, When the caller cannot open the sealed copy, Then the one error (exit 2), and no key is asked for', async () => {
    const stateDir = folder()
    expect(await failure(talosconfigFor(installation, {stateDir}))).toMatchObject({
      exitCode: 2,
      message: `no talosconfig: none in ${stateDir}`,
      hint: 'pass --talosconfig FILE (or --state-dir DIR of the machine that ran ichor init)',
    })
  })

  it('Given none on this machine and none in the cluster, Then the same error, saying the cluster was asked', async () => {
    const stateDir = folder()
    expect(await failure(talosconfigFor(installation, {stateDir, sealed: await sealed(false)}))).toMatchObject({
      exitCode: 2,
      message: `no talosconfig: none in ${stateDir}, and the cluster holds no copy`,
    })
  })

  it('Given none, When the caller reads on without the nodes (optional), Then undefined', async () => {
    expect(await talosconfigFor(installation, {stateDir: folder(), optional: true})).toBeUndefined()
  })

  it('Given --talosconfig naming no file, Then a usage error even when optional', async () => {
    expect(await failure(talosconfigFor(installation, {talosconfig: join(folder(), 'absent'), optional: true}))).toMatchObject({exitCode: 2})
  })
})

// The plan runner opens one TalosAccess per run (ctx.talos) from the plan's flags: the key file is
// read with this machine's input, an opened sealed copy lives in the run's private folder only.
describe('ctx.talos on the plan runner', () => {
  const readsTalosconfig = (seen: {file?: string; mode?: number; dirMode?: number}, times = 2): Plan<void, void> => ({
    command: 'test talos',
    talos: {stateDir: folder(), sealed: {}},
    consent: () => 'go?',
    // Two steps ask for it: found (and the key asked) once.
    steps: (_, {talos}) =>
      Array.from({length: times}, (_, i) => ({
        id: `read-${i}`,
        title: `read ${i}`,
        mutating: false,
        probe: async () => (seen.file ? holds('read') : missing('not read')),
        async run() {
          seen.file = await talos.talosconfig()
          seen.mode = statSync(seen.file).mode & 0o777
          seen.dirMode = statSync(dirname(seen.file)).mode & 0o777
        },
      })),
    result: () => undefined,
  })

  it('Given a plan that may open the sealed copy and a key file, Then the copy is written 0600 in a 0700 folder the run removes', async () => {
    const f = await planFixture([installationCrd(), ichorInstallation(), await sealedSecret()])
    const keyFile = join(folder(), 'key')
    writeFileSync(keyFile, 'a passphrase long enough\n', {mode: 0o600})
    const seen: {file?: string; mode?: number; dirMode?: number} = {}
    const plan = readsTalosconfig(seen)
    plan.talos!.sealed = {statePassphraseFile: keyFile}
    await f.run(plan)
    expect(seen).toMatchObject({mode: 0o600, dirMode: 0o700})
    expect(seen.file!.endsWith('/talosconfig')).toBe(true)
    expect(existsSync(dirname(seen.file!))).toBe(false)
  })

  it('Given --state-passphrase-file naming no file, Then exit 2 before any connection', async () => {
    let opened = false
    const plan = readsTalosconfig({})
    plan.talos!.sealed = {statePassphraseFile: join(folder(), 'absent')}
    const error = await runPlan(plan, {output: 'plain', dryRun: false, yes: true, json: false}, {open: () => ((opened = true), undefined as never)}).then(
      () => expect.unreachable('ran'),
      (e: unknown) => reportOf(e),
    )
    expect(error).toMatchObject({exitCode: 2})
    expect(error.message).toContain('absent')
    expect(opened).toBe(false)
  })

  it('Given no talosconfig here, no key file and --yes, Then the error names the flag, and the run changed nothing', async () => {
    const f = await planFixture([installationCrd(), ichorInstallation(), await sealedSecret()])
    const error = await f.run(readsTalosconfig({})).then(
      () => expect.unreachable('ran'),
      (e: unknown) => reportOf(e),
    )
    expect(`${error.message} ${error.hint ?? ''}`).toContain('--state-passphrase-file')
    expect(withoutLease(f.writes())).toEqual([])
  })

  it('Given a cluster ichor did not set up, Then the one refusal with the exit code the plan declares', async () => {
    const f = await planFixture([])
    const plan: Plan<void, void> = {
      command: 'test talos',
      talos: {missingInstallationExit: 2},
      prepare: async ({talos}) => void (await talos.installation()),
      consent: () => 'go?',
      steps: () => [],
      result: () => undefined,
    }
    const error = await f.run(plan).then(
      () => expect.unreachable('ran'),
      (e: unknown) => reportOf(e),
    )
    expect(error).toMatchObject({exitCode: 2})
    expect(error.message).toContain('this cluster was not set up by ichor init')
  })
})
