// One read of each node's machine config per run, shared by the steps that need it (issue 25):
// init's pre-check, the hand-over probe and the machine-config change all read the same config,
// and a no-op rerun should ask each node once. The authenticated read doubles as the proof that
// a node runs this bundle, so a configured node costs one talosctl call, not a `version` pair
// and then a read. A write to a node drops what was read from it: no step is ever served a
// config from before a write.
//
// Reads asked for in the same turn of the event loop (a Promise.all over the nodes) go out as
// one talosctl call with `--nodes a,b,c` (issue 31): a talosctl start costs more than the read
// it makes, and a 3+30 cluster's no-op rerun paid one start per node.
import {once, type Once} from '../tasks/memo.js'
import {getMachineConfig, getMachineConfigs, isReachable, TalosctlError, type Reachability} from './talosctl.js'

interface Waiter {
  resolve(config: string): void
  reject(error: unknown): void
}

interface Batch {
  talosconfig: string
  timeoutMs?: number
  waiting: Map<string, Waiter[]>
}

export class TalosNodeReads {
  private readonly configs = new Map<string, Once<string>>()
  private readonly batches = new Map<string, Batch>()

  private static key(node: string, talosconfig: string): string {
    return `${node}\n${talosconfig}`
  }

  /** The node's machine config, read once; a failed read is not kept (the next call asks again: once()'s rule). */
  machineConfig(node: string, talosconfig: string, opts: {timeoutMs?: number} = {}): Promise<string> {
    const key = TalosNodeReads.key(node, talosconfig)
    let read = this.configs.get(key)
    if (!read) {
      read = once(() => this.batched(node, talosconfig, opts.timeoutMs))
      this.configs.set(key, read)
    }
    return read()
  }

  /** Joins the read to this turn's batch for the same talosconfig, sent on the next turn. */
  private batched(node: string, talosconfig: string, timeoutMs: number | undefined): Promise<string> {
    const key = `${talosconfig}\n${timeoutMs ?? ''}`
    let batch = this.batches.get(key)
    if (!batch) {
      const started: Batch = {talosconfig, timeoutMs, waiting: new Map()}
      this.batches.set(key, started)
      setImmediate(() => {
        this.batches.delete(key)
        void sendBatch(started)
      })
      batch = started
    }
    const waiting = batch.waiting
    return new Promise<string>((resolve, reject) => waiting.set(node, [...(waiting.get(node) ?? []), {resolve, reject}]))
  }

  /** Read again from the node now (an action decides on what the node runs at that moment), and kept for later steps. */
  freshMachineConfig(node: string, talosconfig: string): Promise<string> {
    this.forget(node)
    return this.machineConfig(node, talosconfig)
  }

  /**
   * Whether the node answers, and as what: with a talosconfig, the config read first (a node that
   * answers it is configured from this bundle, and the read serves later steps); anything else
   * (maintenance mode, another bundle, no answer) is told apart by isReachable.
   */
  async reachable(node: string, opts: {talosconfig?: string; timeoutMs?: number} = {}): Promise<Reachability> {
    if (opts.talosconfig) {
      try {
        await this.machineConfig(node, opts.talosconfig, {timeoutMs: opts.timeoutMs})
        return {node, state: 'configured', ours: true}
      } catch (error) {
        if (!(error instanceof TalosctlError)) throw error
      }
    }
    return isReachable(node, opts)
  }

  /** Drops what was read from the node. */
  forget(node: string): void {
    for (const key of this.configs.keys()) if (key.startsWith(`${node}\n`)) this.configs.delete(key)
  }

  /** Runs a write to the node; what was read from it before (or while it ran) is dropped. */
  write<T>(node: string, change: () => Promise<T>): Promise<T> {
    return this.writeAll([node], change)
  }

  /** Runs a write to several nodes at once (talosctl upgrade-k8s); what was read from them is dropped. */
  async writeAll<T>(nodes: readonly string[], change: () => Promise<T>): Promise<T> {
    for (const node of nodes) this.forget(node)
    try {
      return await change()
    } finally {
      for (const node of nodes) this.forget(node)
    }
  }
}

/** One call for the batch's nodes; a node its answer says nothing about is asked alone. */
async function sendBatch(batch: Batch): Promise<void> {
  const nodes = [...batch.waiting.keys()]
  const settle = (node: string, outcome: Promise<string>) =>
    outcome.then(
      (config) => batch.waiting.get(node)!.forEach((w) => w.resolve(config)),
      (error: unknown) => batch.waiting.get(node)!.forEach((w) => w.reject(error)),
    )
  const alone = (node: string) => getMachineConfig({node, talosconfig: batch.talosconfig, timeoutMs: batch.timeoutMs})
  if (nodes.length === 1) return settle(nodes[0]!, alone(nodes[0]!))
  let answers: Map<string, string | TalosctlError>
  try {
    answers = await getMachineConfigs({nodes, talosconfig: batch.talosconfig, timeoutMs: batch.timeoutMs})
  } catch (error) {
    for (const node of nodes) void settle(node, Promise.reject(error))
    return
  }
  await Promise.all(
    nodes.map((node) => {
      const answer = answers.get(node)
      if (answer === undefined) return settle(node, alone(node))
      return settle(node, typeof answer === 'string' ? Promise.resolve(answer) : Promise.reject(answer))
    }),
  )
}
