// One read of each node's machine config per run, shared by the steps that need it (issue 25):
// init's pre-check, the hand-over probe and the machine-config change all read the same config,
// and a no-op rerun should ask each node once. The authenticated read doubles as the proof that
// a node runs this bundle, so a configured node costs one talosctl call, not a `version` pair
// and then a read. A write to a node drops what was read from it: no step is ever served a
// config from before a write.
import {once, type Once} from '../tasks/memo.js'
import {getMachineConfig, isReachable, TalosctlError, type Reachability} from './talosctl.js'

export class TalosNodeReads {
  private readonly configs = new Map<string, Once<string>>()

  private static key(node: string, talosconfig: string): string {
    return `${node}\n${talosconfig}`
  }

  /** The node's machine config, read once; a failed read is not kept (the next call asks again: once()'s rule). */
  machineConfig(node: string, talosconfig: string, opts: {timeoutMs?: number} = {}): Promise<string> {
    const key = TalosNodeReads.key(node, talosconfig)
    let read = this.configs.get(key)
    if (!read) {
      read = once(() => getMachineConfig({node, talosconfig, timeoutMs: opts.timeoutMs}))
      this.configs.set(key, read)
    }
    return read()
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
  async write<T>(node: string, change: () => Promise<T>): Promise<T> {
    this.forget(node)
    try {
      return await change()
    } finally {
      this.forget(node)
    }
  }
}
