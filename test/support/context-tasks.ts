// Engine tests describe steps over a toy world passed in; the engine's tasks close over
// their data. `bindTasks` closes the tests' steps over the world they run against.
import type {ProbeResult, Task} from '../../src/lib/tasks/types.js'

export interface WorldTask<C> extends Omit<Task, 'probe' | 'run'> {
  probe(ctx: C): Promise<ProbeResult>
  run(ctx: C, progress: (msg: string) => void): Promise<void>
}

export function bindTasks<C>(tasks: readonly WorldTask<C>[], ctx: C): Task[] {
  return tasks.map((t) => ({...t, probe: () => t.probe(ctx), run: (progress) => t.run(ctx, progress)}))
}
