// The shared flags, the verbose logger, the error reports and the interrupt handling of
// src/lib/cli and src/lib/log, each through its real code path (oclif's own parser, a real
// child process receiving a real signal).
import {spawn} from 'node:child_process'
import {existsSync, mkdtempSync, readFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {sink} from '../support/sink.js'
import {fileURLToPath} from 'node:url'
import {Parser} from '@oclif/core'
import {describe, expect, it} from 'vitest'
import {closest, errorJson, errorText, reportOf} from '../../src/lib/cli/error-report.js'
import {kubeFlags, outputFormatFlag, parseDuration, timeoutFlag, verbosityFlags} from '../../src/lib/cli/flags.js'
import {printResult} from '../../src/lib/cli/output.js'
import {IchorError, ValidationError} from '../../src/lib/errors/errors.js'
import {configureLog, log, redactArgv} from '../../src/lib/log/log.js'
import {runCliInProcess} from '../support/run-cli-inprocess.js'

const PROJECT_ROOT = fileURLToPath(new URL('../..', import.meta.url))

describe('--timeout', () => {
  const parse = (argv: string[]) => Parser.parse(argv, {flags: {timeout: timeoutFlag(900)}})

  it('takes helm durations and plain seconds, in milliseconds', async () => {
    const cases: Array<[string, number]> = [
      ['90s', 90_000],
      ['15m', 900_000],
      ['1h', 3_600_000],
      ['1h30m', 5_400_000],
      ['500ms', 500],
      ['120', 120_000],
      ['2m30s', 150_000],
    ]
    for (const [input, ms] of cases) expect((await parse(['--timeout', input])).flags.timeout, input).toBe(ms)
  })
  it('defaults to the seconds given, in milliseconds', async () => {
    expect((await parse([])).flags.timeout).toBe(900_000)
  })
  it('refuses anything else naming --timeout and the accepted forms, exit 2', async () => {
    for (const bad of ['15x', 'soon', '0', '1h-5m', '']) {
      const error = await parse(['--timeout', bad]).then(
        () => undefined,
        (e: unknown) => e,
      )
      const report = reportOf(error)
      expect(report.exitCode, bad).toBe(2)
      expect(report.message).toMatch(/^--timeout: ".*" (is not a duration|must be longer than zero) \(accepted: .*90s, 15m, 1h or 1h30m, or plain seconds\)$/)
    }
    expect(() => parseDuration('3d')).toThrow(/--timeout: "3d" is not a duration/)
  })
})

describe('kube, output and verbosity flags', () => {
  it('--kubeconfig, --context, -o, -v and --debug parse as kubectl users type them', async () => {
    const {flags} = await Parser.parse(['--kubeconfig', 'k.yaml', '--context', 'prod', '-o', 'yaml', '-v', '--debug'], {
      flags: {...kubeFlags, ...outputFormatFlag, ...verbosityFlags},
    })
    expect(flags).toMatchObject({kubeconfig: 'k.yaml', context: 'prod', output: 'yaml', verbose: true, debug: true})
  })
  it('-o takes only yaml or json', async () => {
    const error = await Parser.parse(['-o', 'wide'], {flags: outputFormatFlag}).catch((e: unknown) => e)
    expect(reportOf(error)).toMatchObject({exitCode: 2, message: expect.stringMatching(/--output=wide to be one of: yaml, json/)})
  })
  it('printResult prints YAML, JSON or the table', async () => {
    const result = {release: 'cilium', revision: 3}
    const table = (r: typeof result) => `RELEASE  REVISION\n${r.release}   ${r.revision}`
    const print = (format: string | undefined, out = sink()) => printResult(result, {format, json: false, human: table, out})
    expect(await print('json')).toBe('{\n  "release": "cilium",\n  "revision": 3\n}\n')
    expect(await print('yaml')).toBe('release: cilium\nrevision: 3\n')
    const out = sink()
    await print(undefined, out)
    expect(out.text()).toBe('RELEASE  REVISION\ncilium   3\n')
  })
})

describe("helm's siblings of --set come with it (issue 37)", () => {
  type ManifestFlag = {multiple?: boolean; type: string; helpValue?: string}
  const manifest = JSON.parse(readFileSync(join(PROJECT_ROOT, 'oclif.manifest.json'), 'utf8')) as {
    commands: Record<string, {id: string; flags: Record<string, ManifestFlag>}>
  }
  const withSet = Object.values(manifest.commands).filter((c) => c.flags.set)
  const SIBLINGS: [string, string][] = [
    ['set-string', 'KEY=VALUE'],
    ['set-json', 'KEY=JSON'],
    ['set-file', 'KEY=FILE'],
    ['set-literal', 'KEY=VALUE'],
  ]
  it('some commands take --set', () => {
    expect(withSet.length).toBeGreaterThan(0)
  })
  it.each(withSet.map((c) => [c.id.replaceAll(':', ' '), c] as const))(
    'ichor %s takes --set-string, --set-json, --set-file and --set-literal, repeatable',
    (_name, c) => {
      for (const [name, helpValue] of SIBLINGS) expect(c.flags[name], `--${name}`).toMatchObject({type: 'option', multiple: true, helpValue})
    },
  )
  it('a --set-json helm refuses is a usage error naming the flag and its text, before any cluster', async () => {
    const r = await runCliInProcess(['cni', 'values', 'validate', '--set-json', 'hubble.enabled=tru'], {env: {...process.env, ICHOR_MIRROR: ''}})
    expect(r.code, r.stderr).toBe(2)
    expect(r.stderr).toMatch(/--set-json hubble\.enabled=tru: hubble\.enabled: not valid JSON/)
  })
})

describe('the verbose logger', () => {
  it('prints nothing unless verbose; then commands with secrets redacted', () => {
    const out = sink()
    configureLog({level: 'quiet', json: false, out})
    log.command(['helm', 'version'])
    expect(out.text()).toBe('')
    configureLog({level: 'verbose', json: false, out})
    log.command(['helm', 'upgrade', 'cilium', '--set', 'hubble.tls.password=hunter2,a=b', '--password', 'hunter2', '--token=abc', 'x y'])
    log.verbose('probe: release cilium at revision 3')
    expect(out.text()).toBe(
      "  $ helm upgrade cilium --set hubble.tls.password=***,a=b --password *** --token=*** 'x y'\n  · probe: release cilium at revision 3\n",
    )
    expect(out.text()).not.toMatch(/hunter2|abc/)
  })
  it('under --json writes JSON lines', () => {
    const out = sink()
    configureLog({level: 'verbose', json: true, out})
    log.command(['talosctl', 'apply-config', '--nodes', '192.0.2.10'])
    expect(JSON.parse(out.text())).toEqual({event: 'command', argv: ['talosctl', 'apply-config', '--nodes', '192.0.2.10']})
    configureLog({level: 'quiet', json: false, out: process.stderr})
  })
  it('redactArgv keeps ordinary arguments', () => {
    expect(redactArgv(['--set', 'image.tag=v1', '-f', 'values.yaml'])).toEqual(['--set', 'image.tag=v1', '-f', 'values.yaml'])
  })
})

describe('error reports', () => {
  it("an error that is not ichor's: its message, exit 1, a stack trace only with --debug", () => {
    const report = reportOf(new TypeError('cannot read properties of undefined'))
    expect(report).toMatchObject({message: 'cannot read properties of undefined', exitCode: 1, code: 'failed'})
    expect(errorText(report)).toBe('Error: cannot read properties of undefined\n')
    expect(errorText(report, {debug: true})).toMatch(/\n\s+at /)
    expect(errorJson(report).error).not.toHaveProperty('stack')
  })
  it.each([
    ['EISDIR', 'is a directory, expected a file'],
    ['ENOENT', 'does not exist'],
    ['EACCES', 'cannot be accessed (permission denied)'],
    ['ENOTDIR', 'is not a directory'],
  ])("Node's %s on a path is a usage error naming the path, exit 2", (code, words) => {
    const error = Object.assign(new Error(`${code}: raw message, open '/x/values.yaml'`), {code, path: '/x/values.yaml'})
    const report = reportOf(error)
    expect(report.exitCode).toBe(2)
    expect(report.message).toBe(`/x/values.yaml: ${words}${code === 'ENOTDIR' ? ' (or a part of the path is a file)' : ''}`)
  })
  it('a file that is not a gzip tarball is a usage error, exit 2', () => {
    const error = Object.assign(new Error('TAR_BAD_ARCHIVE: Unrecognized archive format'), {code: 'TAR_BAD_ARCHIVE', file: '/x/chart.tgz'})
    expect(reportOf(error)).toMatchObject({exitCode: 2, message: '/x/chart.tgz: not a gzip tarball (TAR_BAD_ARCHIVE: Unrecognized archive format)'})
  })
  it('Ctrl-C at a prompt: "aborted: nothing was changed", exit 130', () => {
    const error = Object.assign(new Error('User force closed the prompt with SIGINT'), {name: 'ExitPromptError'})
    expect(reportOf(error)).toMatchObject({message: 'aborted: nothing was changed', exitCode: 130, code: 'interrupted'})
  })
  it('ichor errors keep their exit code, issues and hint; --json carries the first line and the issues', () => {
    expect(reportOf(new IchorError('lease is held by alice', {exitCode: 3, hint: 'wait'}))).toEqual({
      message: 'lease is held by alice',
      exitCode: 3,
      code: 'lease',
      hint: 'wait',
    })
    const json = errorJson(reportOf(new ValidationError('ichor init: invalid input', [{path: '--endpoint', message: 'is required'}])))
    expect(json).toEqual({
      schemaVersion: 1,
      error: {message: 'ichor init: invalid input: 1 problem', exitCode: 2, code: 'usage', issues: [{path: '--endpoint', message: 'is required'}]},
    })
  })
  it('suggests the nearest flag only when it is near', () => {
    expect(closest('--dry-rn', ['--dry-run', '--debug'])).toBe('--dry-run')
    expect(closest('--kubeconfg=x', ['--kubeconfig', '--context'])).toBe('--kubeconfig')
    expect(closest('--zzzzzz', ['--dry-run', '--debug'])).toBeUndefined()
    // Issue 37: helm's name for kubectl's flag is offered by name; --yes is never offered for a typo.
    expect(closest('--kube-context', ['--kubeconfig', '--context'])).toBe('--context')
    expect(closest('--kube-context=x', ['--kubeconfig'])).toBeUndefined()
    expect(closest('--set', ['--yes', '--dry-run'])).toBeUndefined()
    expect(closest('--ye', ['--yes', '--dry-run'])).toBeUndefined()
  })
})

describe('SIGINT and SIGTERM', () => {
  const module = join(PROJECT_ROOT, 'dist', 'lib', 'session', 'interrupt.js')
  if (!existsSync(module)) throw new Error('dist/ is missing: run `npm run build` first')

  it.each(['SIGINT', 'SIGTERM'] as const)('%s runs the registered cleanups once, not the unregistered ones, then exits 130', async (signal) => {
    const dir = mkdtempSync(join(tmpdir(), 'ichor-interrupt-'))
    const script = `
      import {appendFileSync} from 'node:fs'
      const {installInterruptHandlers, onInterrupt} = await import(${JSON.stringify(module)})
      installInterruptHandlers({report: (s) => process.stderr.write('interrupted (' + s + ')\\n')})
      onInterrupt(async () => { await new Promise((r) => setTimeout(r, 50)); appendFileSync(${JSON.stringify(join(dir, 'log'))}, 'lease released\\n') })
      const off = onInterrupt(() => appendFileSync(${JSON.stringify(join(dir, 'log'))}, 'closed twice\\n'))
      off()
      process.stdout.write('ready\\n')
      setInterval(() => {}, 1000)
    `
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {stdio: ['ignore', 'pipe', 'pipe']})
    let stderr = ''
    child.stderr.on('data', (d) => (stderr += d))
    await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()))
    child.kill(signal)
    const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)))
    expect(code).toBe(130)
    expect(stderr).toBe(`interrupted (${signal})\n`)
    expect(readFileSync(join(dir, 'log'), 'utf8')).toBe('lease released\n')
  })

  // Issue 38 point 10: forty large patches parsed synchronously kept a Ctrl-C waiting until the
  // dry run had written its folder. heedSignals, before each write, lets the waiting signal in.
  it('a SIGINT that came during synchronous work (reading patches) is handled at heedSignals: the write after it never happens, exit 130', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ichor-interrupt-'))
    const written = join(dir, 'written')
    const script = `
      import {writeFileSync} from 'node:fs'
      const {heedSignals, installInterruptHandlers, onInterrupt} = await import(${JSON.stringify(module)})
      installInterruptHandlers({report: (s) => process.stderr.write('interrupted (' + s + ')\\n')})
      // A cleanup that takes a while (a Lease release): the write must not slip in meanwhile.
      onInterrupt(() => new Promise((r) => setTimeout(r, 300)))
      process.stdout.write('ready\\n')
      const until = Date.now() + 1500
      while (Date.now() < until) {} // synchronous work: the signal waits for the loop
      await heedSignals()
      writeFileSync(${JSON.stringify(written)}, 'the dry run folder')
      process.exit(0)
    `
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {stdio: ['ignore', 'pipe', 'pipe']})
    let stderr = ''
    child.stderr.on('data', (d) => (stderr += d))
    await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()))
    child.kill('SIGINT')
    expect(await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)))).toBe(130)
    expect(stderr).toBe('interrupted (SIGINT)\n')
    expect(existsSync(written)).toBe(false)
  })

  it('a command that serves until Ctrl-C (ichor open): SIGINT runs the cleanups and exits 0 with no "interrupted" report', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ichor-interrupt-'))
    const script = `
      import {appendFileSync} from 'node:fs'
      const {installInterruptHandlers, interruptEndsNormally, onInterrupt} = await import(${JSON.stringify(module)})
      installInterruptHandlers({report: (s) => process.stderr.write('interrupted (' + s + ')\\n')})
      interruptEndsNormally()
      onInterrupt(() => appendFileSync(${JSON.stringify(join(dir, 'log'))}, 'listener closed\\n'))
      process.stdout.write('ready\\n')
      setInterval(() => {}, 1000)
    `
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {stdio: ['ignore', 'pipe', 'pipe']})
    let stderr = ''
    child.stderr.on('data', (d) => (stderr += d))
    await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()))
    child.kill('SIGINT')
    expect(await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)))).toBe(0)
    expect(stderr).toBe('')
    expect(readFileSync(join(dir, 'log'), 'utf8')).toBe('listener closed\n')
  })
})
