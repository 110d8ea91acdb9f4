// How a task run looks: listr2 on a terminal, one line per step when piped, JSON event
// lines for scripts. Renderers only format what the engine tells them.
import {DefaultRenderer, Listr, ListrLogger, ProcessOutput, SimpleRenderer, type ListrTaskWrapper} from 'listr2'
import type {OutputMode, RunResult, TaskInfo, TaskRenderer, TaskReport} from './types.js'

export function createRenderer(mode: OutputMode, stream: NodeJS.WritableStream): TaskRenderer {
  switch (mode) {
    case 'json':
      return new JsonRenderer(stream)
    case 'plain':
      return new PlainRenderer(stream)
    case 'tty':
      return new ListrRenderer(stream)
  }
}

export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`
  const minutes = Math.floor(ms / 60_000)
  return `${minutes}m${Math.round((ms - minutes * 60_000) / 1000)}s`
}

/** The closing line: what a dry run would change, or what a run did. */
function summarize(result: RunResult, error?: Error): string {
  if (error) return ''
  const count = (status: TaskReport['status']) => result.tasks.filter((t) => t.status === status).length
  const steps = (n: number) => `${n} step${n === 1 ? '' : 's'}`
  if (result.dryRun) {
    const wouldRun = count('would-run')
    return wouldRun === 0 ? 'Dry run: nothing to do, every step already holds.' : `Dry run: ${steps(wouldRun)} would run; nothing was changed.`
  }
  const done = count('done')
  const total = formatDuration(result.tasks.reduce((sum, t) => sum + t.ms, 0))
  return done === 0
    ? `Nothing to do: every step already holds (${total}).`
    : `Finished in ${total}: ${steps(done)} run, ${steps(count('skipped'))} already held.`
}

/** `[3/10] Adopt Cilium into Helm release... done (1.2s)`, progress lines indented below. */
class PlainRenderer implements TaskRenderer {
  private total = 0
  private lineOpen = false
  private lastProgress = ''

  constructor(private readonly out: NodeJS.WritableStream) {}

  begin(info: {tasks: TaskInfo[]; dryRun: boolean}): void {
    this.total = info.tasks.length
    if (info.dryRun) this.out.write('Dry run: only checks run; nothing is changed.\n')
  }

  taskStarted(task: TaskInfo, index: number): void {
    this.out.write(`${this.prefix(task, index)} `)
    this.lineOpen = true
    this.lastProgress = ''
  }

  taskRunning(): void {}

  progress(_task: TaskInfo, _index: number, message: string): void {
    if (message === this.lastProgress) return
    this.lastProgress = message
    if (this.lineOpen) this.out.write('\n')
    this.lineOpen = false
    this.out.write(`      ${message}\n`)
  }

  taskFinished(task: TaskInfo, index: number, report: TaskReport): void {
    const text = statusText(report)
    this.out.write(this.lineOpen ? `${text}\n` : `${this.prefix(task, index)} ${text}\n`)
    this.lineOpen = false
  }

  async end(result: RunResult, error?: Error): Promise<void> {
    if (this.lineOpen) this.out.write('\n')
    const summary = summarize(result, error)
    if (summary) this.out.write(`${summary}\n`)
  }

  private prefix(task: TaskInfo, index: number): string {
    return `[${index + 1}/${this.total}] ${task.title}...`
  }
}

function statusText(report: TaskReport): string {
  switch (report.status) {
    case 'done':
      return `done (${formatDuration(report.ms)})`
    case 'skipped':
      return report.detail ? `skipped: ${report.detail}` : 'skipped'
    case 'would-run':
      return `would run: ${report.detail ?? 'not in place yet'}`
    case 'failed':
      return `failed (${formatDuration(report.ms)}): ${report.detail ?? 'unknown error'}`
  }
}

/**
 * One JSON object per line: `start`, `task` (status checking → running → final),
 * `progress`, and `end`. Scripts (and the kill-anywhere tests) read task boundaries here.
 */
class JsonRenderer implements TaskRenderer {
  constructor(private readonly out: NodeJS.WritableStream) {}

  private emit(event: Record<string, unknown>): void {
    this.out.write(`${JSON.stringify(event)}\n`)
  }

  begin(info: {tasks: TaskInfo[]; dryRun: boolean}): void {
    this.emit({event: 'start', dryRun: info.dryRun, tasks: info.tasks.map((t) => ({id: t.id, title: t.title, mutating: t.mutating}))})
  }

  taskStarted(task: TaskInfo, index: number): void {
    this.emit({event: 'task', id: task.id, index, status: 'checking'})
  }

  taskRunning(task: TaskInfo, index: number, reason: string): void {
    this.emit({event: 'task', id: task.id, index, status: 'running', reason})
  }

  progress(task: TaskInfo, _index: number, message: string): void {
    this.emit({event: 'progress', id: task.id, message})
  }

  taskFinished(task: TaskInfo, index: number, report: TaskReport): void {
    this.emit({event: 'task', id: task.id, index, title: task.title, status: report.status, detail: report.detail, ms: report.ms})
  }

  async end(result: RunResult, error?: Error): Promise<void> {
    this.emit({event: 'end', ok: !error, changed: result.changed, dryRun: result.dryRun, error: error?.message})
  }
}

/**
 * listr2's default renderer, allowed on any stream: the engine already chose it for a
 * terminal, and listr2 would otherwise judge by process.stdout, not the stream we draw on.
 */
class TerminalRenderer extends DefaultRenderer {
  static override nonTTY = true
}

type Wrapper = ListrTaskWrapper<unknown, typeof TerminalRenderer, typeof SimpleRenderer>

interface Slot {
  wrapper?: Wrapper
  pendingOutput?: string
  finish: (report: TaskReport | undefined) => void
  finished: Promise<TaskReport | undefined>
}

/**
 * listr2 draws the list; the engine drives it. Each listr task waits for the engine to
 * report its step finished, so listr never decides anything itself.
 */
class ListrRenderer implements TaskRenderer {
  private slots: Slot[] = []
  private run?: Promise<unknown>

  constructor(private readonly out: NodeJS.WritableStream) {}

  begin(info: {tasks: TaskInfo[]; dryRun: boolean}): void {
    this.slots = info.tasks.map(() => {
      let finish!: Slot['finish']
      const finished = new Promise<TaskReport | undefined>((resolve) => (finish = resolve))
      return {finish, finished}
    })
    const listr = new Listr<unknown, typeof TerminalRenderer, 'simple'>(
      info.tasks.map((task, index) => ({
        title: info.dryRun ? `${task.title} (check only)` : task.title,
        task: async (_ctx: unknown, wrapper: Wrapper) => {
          const slot = this.slots[index]!
          slot.wrapper = wrapper
          if (slot.pendingOutput) wrapper.output = slot.pendingOutput
          const report = await slot.finished
          if (!report) return wrapper.skip('not reached')
          if (report.status === 'skipped') return wrapper.skip(`${task.title}: already holds${report.detail ? ` (${report.detail})` : ''}`)
          if (report.status === 'would-run') return wrapper.skip(`${task.title}: would run (${report.detail ?? 'not in place yet'})`)
          if (report.status === 'failed') throw new Error(`${task.title}: ${report.detail ?? 'failed'}`)
          // The engine's own timing: listr's timer starts late, when listr reaches the task.
          wrapper.title = `${task.title} (${formatDuration(report.ms)})`
        },
      })),
      {
        concurrent: false,
        exitOnError: !info.dryRun,
        registerSignalListeners: false,
        renderer: TerminalRenderer,
        fallbackRendererCondition: false,
        silentRendererCondition: false,
        rendererOptions: {
          collapseSubtasks: false,
          removeEmptyLines: true,
          logger: new ListrLogger({
            useIcons: true,
            processOutput: new ProcessOutput(this.out as NodeJS.WriteStream, process.stderr as NodeJS.WriteStream),
          }),
        },
      },
    )
    // Failures surface through the engine's own error; listr's copy is not needed.
    this.run = listr.run().catch(() => undefined)
  }

  taskStarted(): void {}

  taskRunning(): void {}

  progress(_task: TaskInfo, index: number, message: string): void {
    const slot = this.slots[index]
    if (!slot) return
    if (slot.wrapper) slot.wrapper.output = message
    else slot.pendingOutput = message
  }

  taskFinished(_task: TaskInfo, index: number, report: TaskReport): void {
    this.slots[index]?.finish(report)
  }

  async end(result: RunResult, error?: Error): Promise<void> {
    for (const slot of this.slots) slot.finish(undefined)
    await this.run
    const summary = summarize(result, error)
    if (summary) this.out.write(`${summary}\n`)
  }
}
