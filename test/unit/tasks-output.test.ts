// What a task run prints: plain one-line-per-step when piped, JSON event lines for
// scripts, and listr2 on a terminal. Output is captured from a stream.
import {PassThrough} from 'node:stream'
import {describe, expect, it} from 'vitest'
import {outputModeFor, runTasks} from '../../src/lib/tasks/engine.js'
import type {OutputMode} from '../../src/lib/tasks/types.js'
import {bindTasks, type WorldTask} from '../support/context-tasks.js'
import {formatDuration} from '../../src/lib/tasks/renderers.js'

function capture(): {stream: PassThrough; text: () => string} {
  const stream = new PassThrough()
  const chunks: Buffer[] = []
  stream.on('data', (c: Buffer) => chunks.push(c))
  return {stream, text: () => Buffer.concat(chunks).toString('utf8')}
}

/** Every call advances 100 ms, so each task takes exactly 100 ms. */
function fakeClock(): () => number {
  let t = 0
  return () => (t += 100)
}

type Facts = Set<string>

function step(id: string, title: string, opts: {fails?: string; progress?: string[]} = {}): WorldTask<Facts> {
  return {
    id,
    title,
    probe: async (f) => (f.has(id) ? {done: true, detail: `${id} already there`} : {done: false, reason: `${id} missing`}),
    async run(f, progress) {
      for (const m of opts.progress ?? []) progress(m)
      if (opts.fails) throw new Error(opts.fails)
      f.add(id)
    },
  }
}

async function render(output: OutputMode, tasks: WorldTask<Facts>[], facts: Facts, dryRun = false) {
  const out = capture()
  let error: unknown
  try {
    await runTasks(bindTasks(tasks, facts), {output, dryRun, stream: out.stream, now: fakeClock()})
  } catch (e) {
    error = e
  }
  return {text: out.text(), error}
}

const tasks = () => [
  step('crd', 'Install the Ichor CRD'),
  step('adopt', 'Adopt Cilium into Helm release', {progress: ['helm install cilium', 'helm install cilium']}),
  step('policies', 'Apply network policies'),
]

describe('plain output', () => {
  it('prints one line per step with its number, status and time, progress indented, and a summary', async () => {
    const {text} = await render('plain', tasks(), new Set(['crd']))
    expect(text).toBe(
      [
        '[1/3] Install the Ichor CRD... skipped: crd already there',
        '[2/3] Adopt Cilium into Helm release... ',
        '      helm install cilium',
        '[2/3] Adopt Cilium into Helm release... done (100ms)',
        '[3/3] Apply network policies... done (100ms)',
        'Finished in 300ms: 2 steps run, 1 step already held.',
        '',
      ].join('\n'),
    )
  })

  it('says when nothing had to be done', async () => {
    const {text} = await render('plain', tasks(), new Set(['crd', 'adopt', 'policies']))
    expect(text.trimEnd().split('\n').at(-1)).toBe('Nothing to do: every step already holds (300ms).')
  })

  it('shows a dry run as would-run lines with the reasons', async () => {
    const {text} = await render('plain', tasks(), new Set(['adopt']), true)
    expect(text).toBe(
      [
        'Dry run: only checks run; nothing is changed.',
        '[1/3] Install the Ichor CRD... would run: crd missing',
        '[2/3] Adopt Cilium into Helm release... skipped: adopt already there',
        '[3/3] Apply network policies... would run: policies missing',
        'Dry run: 2 steps would run; nothing was changed.',
        '',
      ].join('\n'),
    )
  })

  it('marks the failed step and prints nothing after it', async () => {
    const {text, error} = await render('plain', [step('a', 'First'), step('b', 'Second', {fails: 'no route to host'}), step('c', 'Third')], new Set())
    expect(error).toBeInstanceOf(Error)
    expect(text).toBe(['[1/3] First... done (100ms)', '[2/3] Second... failed (100ms): no route to host', ''].join('\n'))
  })
})

describe('json output', () => {
  it('writes one JSON event per line: start, task checking/running/final, progress, end', async () => {
    const {text} = await render('json', tasks(), new Set(['crd']))
    const events = text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>)
    expect(events[0]).toEqual({
      event: 'start',
      dryRun: false,
      tasks: [
        {id: 'crd', title: 'Install the Ichor CRD', mutating: true},
        {id: 'adopt', title: 'Adopt Cilium into Helm release', mutating: true},
        {id: 'policies', title: 'Apply network policies', mutating: true},
      ],
    })
    const brief = events.slice(1).map((e) => [e.event, e.id, e.status ?? e.message])
    expect(brief).toEqual([
      ['task', 'crd', 'checking'],
      ['task', 'crd', 'skipped'],
      ['task', 'adopt', 'checking'],
      ['task', 'adopt', 'running'],
      ['progress', 'adopt', 'helm install cilium'],
      ['progress', 'adopt', 'helm install cilium'],
      ['task', 'adopt', 'done'],
      ['task', 'policies', 'checking'],
      ['task', 'policies', 'running'],
      ['task', 'policies', 'done'],
      ['end', undefined, undefined],
    ])
    expect(events.find((e) => e.id === 'adopt' && e.status === 'running')).toMatchObject({reason: 'adopt missing', index: 1})
    expect(events.find((e) => e.id === 'adopt' && e.status === 'done')).toMatchObject({ms: 100, title: 'Adopt Cilium into Helm release'})
    expect(events.at(-1)).toEqual({event: 'end', ok: true, changed: true, dryRun: false})
  })

  it('ends with ok false and the error message on failure', async () => {
    const {text} = await render('json', [step('a', 'First', {fails: 'boom'})], new Set())
    const last = JSON.parse(text.trimEnd().split('\n').at(-1)!) as Record<string, unknown>
    expect(last).toEqual({event: 'end', ok: false, changed: false, dryRun: false, error: 'step "First" failed: boom'})
  })
})

describe('where the events go', () => {
  // README, "JSON output": stdout carries only the final document, so the events must not.
  it('json events go to stderr when no stream is given; stdout gets nothing', async () => {
    const written = {stdout: '', stderr: ''}
    const restore = (['stdout', 'stderr'] as const).map((name) => {
      const original = process[name].write
      process[name].write = ((chunk: string | Uint8Array) => ((written[name] += String(chunk)), true)) as typeof original
      return () => (process[name].write = original)
    })
    try {
      await runTasks(bindTasks([step('a', 'Step A')], new Set<string>()), {output: 'json', dryRun: false, now: fakeClock()})
    } finally {
      for (const r of restore) r()
    }
    expect(written.stdout).toBe('')
    expect(
      written.stderr
        .trimEnd()
        .split('\n')
        .map((l) => (JSON.parse(l) as {event: string}).event),
    ).toEqual(['start', 'task', 'task', 'task', 'end'])
  })
})

describe('tty output (listr2)', () => {
  it('draws every step title and finishes, also after a failure', async () => {
    const ok = await render('tty', tasks(), new Set(['crd']))
    expect(ok.error).toBeUndefined()
    for (const title of ['Install the Ichor CRD', 'Adopt Cilium into Helm release', 'Apply network policies']) expect(ok.text).toContain(title)
    expect(ok.text).toContain('Finished in 300ms')

    const failed = await render('tty', [step('a', 'First'), step('b', 'Second', {fails: 'no route to host'}), step('c', 'Third')], new Set())
    expect(failed.error).toBeInstanceOf(Error)
    expect(failed.text).toContain('no route to host')
  })

  it('finishes a dry run with a failing probe without hanging', async () => {
    const broken: WorldTask<Facts> = {id: 'x', title: 'Broken probe', probe: async () => Promise.reject(new Error('forbidden')), run: async () => {}}
    const {text, error} = await render('tty', [broken, step('b', 'Second')], new Set(), true)
    expect(error).toBeInstanceOf(Error)
    expect(text).toContain('Second')
  })
})

describe('helpers', () => {
  it('chooses json when asked, tty on a terminal, plain otherwise', () => {
    expect(outputModeFor({json: true, stream: Object.assign(new PassThrough(), {isTTY: true})})).toBe('json')
    expect(outputModeFor({stream: Object.assign(new PassThrough(), {isTTY: true})})).toBe('tty')
    expect(outputModeFor({stream: new PassThrough()})).toBe('plain')
  })

  it('formats durations', () => {
    expect(formatDuration(45)).toBe('45ms')
    expect(formatDuration(1234)).toBe('1.2s')
    expect(formatDuration(125_000)).toBe('2m5s')
  })
})
