// The command base class in-process, on oclif's real Config: what an error prints and the
// exit code it ends with, with and without --json and --debug.
import {readFileSync} from 'node:fs'
import {fileURLToPath} from 'node:url'
import {Config} from '@oclif/core'
import {afterAll, afterEach, beforeAll, describe, expect, it, vi} from 'vitest'
import {IchorCommand} from '../../src/lib/cli/base.js'
import {removeInterruptHandlers} from '../../src/lib/session/interrupt.js'
import {runTasks} from '../../src/lib/tasks/engine.js'
import type {Task} from '../../src/lib/tasks/types.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
let config: Config
beforeAll(async () => {
  config = await Config.load(ROOT)
})
afterEach(() => vi.restoreAllMocks())
// The base class installs SIGINT/SIGTERM handlers; the test runner's own signals are not for them.
afterAll(() => removeInterruptHandlers())

/** Runs a command class with argv; returns what it printed and the exit code it asked for. */
async function runCommand(Cmd: new (argv: string[], config: Config) => IchorCommand, argv: string[]) {
  let stdout = ''
  let stderr = ''
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => ((stdout += String(chunk)), true))
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => ((stderr += String(chunk)), true))
  let exitCode = 0
  try {
    await (new Cmd(argv, config) as unknown as {_run(): Promise<unknown>})._run()
  } catch (error) {
    exitCode = (error as {oclif?: {exit?: number}}).oclif?.exit ?? -1
  } finally {
    vi.restoreAllMocks()
  }
  return {stdout, stderr, exitCode}
}

const task = (id: string, title: string, fails?: string): Task => ({
  id,
  title,
  probe: async () => ({done: false, reason: 'missing'}),
  run: async () => {
    if (fails) throw new Error(fails)
  },
})

class FailingStep extends IchorCommand {
  async run() {
    await this.parse(FailingStep)
    let ran = false
    const first = {
      ...task('first', 'First'),
      run: async () => void (ran = true),
      probe: async () => (ran ? {done: true as const} : {done: false as const, reason: 'missing'}),
    }
    return runTasks([first, task('second', 'Second', 'no route to host')], {
      output: this.jsonEnabled() ? 'json' : 'plain',
      dryRun: false,
      stream: this.jsonEnabled() ? process.stderr : process.stdout,
    })
  }
}

class Buggy extends IchorCommand {
  async run() {
    await this.parse(Buggy)
    throw new TypeError("cannot read properties of undefined (reading 'spec')")
  }
}

class ReadsADirectory extends IchorCommand {
  async run() {
    await this.parse(ReadsADirectory)
    return {text: readFileSync(ROOT, 'utf8')}
  }
}

describe('a failed step', () => {
  it('its message is printed once (by the step list), then the hint, exit 1', async () => {
    const r = await runCommand(FailingStep, [])
    expect(r.exitCode).toBe(1)
    const all = r.stdout + r.stderr
    expect(all.match(/no route to host/g)).toHaveLength(1)
    expect(r.stdout).toMatch(/\[2\/2\] Second\.\.\. failed \(\d+ms\): no route to host/)
    expect(r.stderr).toBe('Hint: fix the cause above and run the same command again; the steps already done are skipped\n')
  })
  it('under --json: progress as JSON lines on stderr, one JSON error on stdout, the same exit code', async () => {
    const r = await runCommand(FailingStep, ['--json'])
    expect(r.exitCode).toBe(1)
    const doc = JSON.parse(r.stdout)
    expect(doc).toMatchObject({schemaVersion: 1, error: {message: 'step "Second" failed: no route to host', exitCode: 1, code: 'failed'}})
    const events = r.stderr
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line))
    expect(events.map((e) => e.event)).toEqual(['start', 'task', 'task', 'task', 'task', 'task', 'task', 'end'])
  })
})

describe("an error that is not ichor's", () => {
  it('prints "Error: <message>" without a stack trace, exit 1', async () => {
    const r = await runCommand(Buggy, [])
    expect(r.exitCode).toBe(1)
    expect(r.stderr).toBe("Error: cannot read properties of undefined (reading 'spec')\n")
  })
  it('--debug adds the stack trace', async () => {
    const r = await runCommand(Buggy, ['--debug'])
    expect(r.exitCode).toBe(1)
    expect(r.stderr).toMatch(/^Error: cannot read properties[^\n]*\nTypeError: [^\n]*\n\s+at /)
  })
  it('a directory read as a file is a usage error, exit 2, with and without --json', async () => {
    expect(await runCommand(ReadsADirectory, [])).toMatchObject({exitCode: 2, stderr: 'Error: a directory was given where a file was expected (EISDIR)\n'})
    const r = await runCommand(ReadsADirectory, ['--json'])
    expect(r.exitCode).toBe(2)
    expect(JSON.parse(r.stdout).error).toMatchObject({exitCode: 2, code: 'usage'})
  })
})
