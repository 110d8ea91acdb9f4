// The kill-at-every-boundary pattern shared by the day-2 e2e tests: the plan's step ids from
// a --json run's start event, and a `killOn` predicate that SIGKILLs the CLI as step k starts
// (its probe is about to run, nothing of the step has happened yet).
import {jsonEvents, type CliRun} from './cluster.js'

type Event = Record<string, unknown>

/** The ids of the steps a --json run announced in its start event. */
export function taskIds(run: CliRun): string[] {
  const start = jsonEvents(run).find((e) => e.event === 'start') as {tasks?: {id: string}[]} | undefined
  if (!start?.tasks) throw new Error(`no start event in the run's output:\n${run.stderr.slice(-2000)}`)
  return start.tasks.map((t) => t.id)
}

/** SIGKILL as step `k` starts. */
export const killBeforeTask = (k: number) => (e: Event) => e.event === 'task' && e.index === k && e.status === 'checking'

/** The ids of the steps a run finished with `done` (ran and proved). */
export const doneTaskIds = (run: CliRun) => jsonEvents(run).filter((e) => e.event === 'task' && e.status === 'done').map((e) => e.id as string)
