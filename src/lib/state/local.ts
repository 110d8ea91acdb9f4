// Local state before the cluster exists: Talos secrets, machine configs, talosconfig and
// kubeconfig in the XDG state directory (or --state-dir). Once the cluster is up the
// secrets and talosconfig are also stored in ichor-system, so another machine can go on.
import {existsSync, mkdirSync} from 'node:fs'
import {homedir} from 'node:os'
import {join} from 'node:path'

export interface LocalState {
  dir: string
  secrets: string
  talosconfig: string
  kubeconfig: string
  controlPlaneConfig: string
  workerConfig: string
  /** Hash of the inputs the machine configs were generated from. */
  configsHash: string
}

export function localState(clusterName: string, override?: string): LocalState {
  const base = process.env.XDG_STATE_HOME || join(homedir(), '.local', 'state')
  const dir = override ?? join(base, 'ichor', clusterName)
  return {
    dir,
    secrets: join(dir, 'secrets.yaml'),
    talosconfig: join(dir, 'talosconfig'),
    kubeconfig: join(dir, 'kubeconfig'),
    controlPlaneConfig: join(dir, 'controlplane.yaml'),
    workerConfig: join(dir, 'worker.yaml'),
    configsHash: join(dir, 'configs.sha256'),
  }
}

export function ensureStateDir(state: LocalState): void {
  if (!existsSync(state.dir)) mkdirSync(state.dir, {recursive: true, mode: 0o700})
}
