// src/lib/exec: binaries found on disk before any spawn (Go's exec.LookPath rules, as
// kubectl uses them), and a runner that never signals a child without a pid and leaves no
// child running when ichor exits. Real processes throughout.
import {spawn, spawnSync} from 'node:child_process'
import {chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {delimiter, join} from 'node:path'
import {afterAll, describe, expect, it, vi} from 'vitest'
import {lookPath, resolveBinary} from '../../src/lib/exec/resolve.js'
import {liveChildren, runProcess, signalChild} from '../../src/lib/exec/run.js'
import {PROJECT_ROOT} from '../support/upstream.js'

const work = mkdtempSync(join(tmpdir(), 'ichor-exec-'))
afterAll(() => rmSync(work, {recursive: true, force: true}))

function file(path: string, mode: number): string {
  mkdirSync(join(path, '..'), {recursive: true})
  writeFileSync(path, '#!/bin/sh\necho "$@"\n')
  chmodSync(path, mode)
  return path
}

describe('lookPath (Go exec.LookPath, as kubectl runs exec plugins)', () => {
  const a = join(work, 'a')
  const b = join(work, 'b')
  file(join(a, 'tool'), 0o644) // not executable: skipped
  file(join(b, 'tool'), 0o755)
  file(join(work, 'cwd', 'local-tool'), 0o755)

  it('finds a bare name in the first PATH entry holding it as an executable file', () => {
    expect(lookPath('tool', `${a}${delimiter}${b}`)).toEqual({found: true, path: join(b, 'tool')})
    expect(lookPath('tool', a)).toEqual({found: false, reason: 'not-executable', path: join(a, 'tool')})
    expect(lookPath('tool', join(work, 'none'))).toEqual({found: false, reason: 'not-found'})
    expect(lookPath('a', work)).toEqual({found: false, reason: 'not-executable', path: a}) // a directory is not a binary
  })

  it('refuses a match found through a relative or empty PATH entry (exec.ErrDot)', () => {
    const cwd = join(work, 'cwd')
    expect(lookPath('local-tool', `${delimiter}${b}`, cwd)).toEqual({found: false, reason: 'relative-to-cwd', path: 'local-tool'})
    expect(lookPath('local-tool', `.${delimiter}${b}`, cwd)).toEqual({found: false, reason: 'relative-to-cwd', path: 'local-tool'})
  })

  it('takes a name holding a slash as a path, against the working directory', () => {
    expect(lookPath('./local-tool', '', join(work, 'cwd'))).toEqual({found: true, path: join(work, 'cwd', 'local-tool')})
    expect(lookPath('./missing', '', join(work, 'cwd'))).toEqual({found: false, reason: 'not-found', path: join(work, 'cwd', 'missing')})
  })
})

describe('resolveBinary', () => {
  const spec = {name: 'tool', envVar: 'ICHOR_TOOL', fallbacks: [join(work, 'fallback', 'tool')], hint: 'install tool'}

  it('takes the variable, then PATH, then the fallbacks; names every place when none holds it', () => {
    expect(resolveBinary(spec, {PATH: join(work, 'b'), ICHOR_TOOL: join(work, 'cwd', 'local-tool')})).toBe(join(work, 'cwd', 'local-tool'))
    expect(resolveBinary(spec, {PATH: join(work, 'b')})).toBe(join(work, 'b', 'tool'))
    expect(() => resolveBinary(spec, {PATH: join(work, 'a')})).toThrow(
      'tool not found: (a/tool is not an executable file), and ICHOR_TOOL is not set'.replace('a/tool', join(work, 'a', 'tool')),
    )
    file(join(work, 'fallback', 'tool'), 0o755)
    expect(resolveBinary(spec, {PATH: join(work, 'none')})).toBe(join(work, 'fallback', 'tool'))
    // A variable that names nothing is an error, never a silent fallback.
    expect(() => resolveBinary(spec, {PATH: join(work, 'b'), ICHOR_TOOL: join(work, 'nope')})).toThrow(
      `tool not found: ICHOR_TOOL=${join(work, 'nope')} (${join(work, 'nope')} does not exist)`,
    )
  })
})

describe('runProcess', () => {
  it('feeds stdin, collects stdout and stderr, and reports the exit code', async () => {
    const r = await runProcess(
      process.execPath,
      ['-e', 'process.stdin.pipe(process.stdout); console.error("err"); process.on("exit", () => (process.exitCode = 4))'],
      {input: 'hello'},
    )
    expect(r).toMatchObject({exitCode: 4, stdout: 'hello', stderr: 'err\n', timedOut: false, canceled: false})
  })

  it('spawns only absolute paths', () => {
    expect(() => runProcess('helm', ['version'])).toThrow('runProcess needs an absolute path, got "helm" (resolve it first)')
  })

  it('ends a child on timeout and on cancel, and forgets it', async () => {
    const timed = await runProcess(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], {timeoutMs: 200})
    expect(timed).toMatchObject({timedOut: true, exitCode: null, signal: 'SIGTERM'})
    const abort = new AbortController()
    const running = runProcess(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], {signal: abort.signal})
    abort.abort()
    expect(await running).toMatchObject({canceled: true, signal: 'SIGTERM'})
    expect(liveChildren()).toBe(0)
  })

  it('never signals a child whose spawn failed (no pid, native handle still set)', () => {
    // Node keeps the handle of a failed spawn until the next tick; a kill() now would go
    // to the pid libuv never set. This spawn is of a path that does not exist.
    const child = spawn(join(work, 'does-not-exist'), [])
    child.on('error', () => {})
    const kill = vi.spyOn(child, 'kill')
    expect(child.pid).toBeUndefined()
    expect(signalChild(child, 'SIGTERM')).toBe(false)
    expect(kill).not.toHaveBeenCalled()
  })

  it('leaves no child running when ichor exits while it runs', async () => {
    const pidFile = join(work, 'child.pid')
    const r = spawnSync(process.execPath, ['--import', 'tsx', join(PROJECT_ROOT, 'test', 'exec', 'support', 'exit-with-child.ts'), pidFile], {
      cwd: PROJECT_ROOT,
      encoding: 'utf8',
    })
    expect(r.status, r.stderr).toBe(3)
    const pid = Number(readFileSync(pidFile, 'utf8'))
    // SIGTERM was sent at exit; wait until the child has gone (it ends at once on SIGTERM).
    // A zombie not yet reaped by whoever adopted it counts as ended.
    const running = () => {
      try {
        return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))
      } catch {
        return false
      }
    }
    for (let i = 0; i < 100 && running(); i++) await new Promise((resolve) => setTimeout(resolve, 50))
    expect(running()).toBe(false)
    expect(existsSync(pidFile)).toBe(true)
  })
})
