// A converged cluster for an e2e file in seconds: `ichor init` runs once per shape and run (the
// first file that asks for a shape makes it), the cluster is saved (cluster.ts `save()`: etcd's
// data folder, the simulated nodes, the registry's storage, ichor's state folder), and every file
// gets a copy of its own, restored on new ports and folders. Files whose subject is `init` itself
// still start a bare harness and run it.
//
//   let h: HarnessCluster
//   beforeAll(async () => void (h = await convergedCluster('1+1')), CONVERGED_TIMEOUT_MS)
//   afterAll(() => h?.stop())
import {existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {inject} from 'vitest'
import {connectKube} from '../../src/lib/kube/client.js'
import {runIchor, SAVED_MANIFEST, startHarnessCluster, type CliRun, type HarnessCluster} from './cluster.js'
import {canonicalDump} from './dump.js'

/**
 * Control planes + workers; `1` is one control plane that runs the workloads too. A shape with a
 * Talos version runs it (and a Kubernetes version inside that Talos minor's range) instead of the
 * harness's default.
 */
export type Shape = '1+1' | '3+2' | '1' | '3+1@v1.13.9'

const SHAPES: Record<Shape, {controlPlanes: number; workers: number; talosVersion?: string; initArgs?: string[]}> = {
  '1+1': {controlPlanes: 1, workers: 1},
  '3+2': {controlPlanes: 3, workers: 2},
  '1': {controlPlanes: 1, workers: 0},
  '3+1@v1.13.9': {controlPlanes: 3, workers: 1, talosVersion: 'v1.13.9', initArgs: ['--kubernetes-version', '1.36.0']},
}

/** A hook that may have to make the shape first (one `init`) before restoring it. */
export const CONVERGED_TIMEOUT_MS = 600_000

declare module 'vitest' {
  export interface ProvidedContext {
    /** The run's folder of saved clusters (test/support/converged-setup.ts). */
    convergedDir: string
  }
}

/** A fresh copy of the run's converged cluster of this shape: no other file sees what it changes. */
export async function convergedCluster(shape: Shape = '1+1'): Promise<HarnessCluster> {
  return startHarnessCluster({restoreFrom: await savedCluster(shape)})
}

/** The shape's `init --json` run: its exit, its result on stdout, its events on stderr. */
export async function convergedInit(shape: Shape = '1+1'): Promise<CliRun> {
  return JSON.parse(readFileSync(join(await savedCluster(shape), 'init.json'), 'utf8')) as CliRun
}

/** The canonical dump (dump.ts) of the shape's cluster as `init` left it, taken before it was saved. */
export async function convergedDump(shape: Shape = '1+1'): Promise<unknown> {
  return JSON.parse(readFileSync(join(await savedCluster(shape), 'dump.json'), 'utf8')) as unknown
}

/**
 * The saved folder of the shape, made on first use. A lock folder keeps two workers from making
 * the same shape; the folder appears whole (renamed into place) or not at all.
 */
async function savedCluster(shape: Shape): Promise<string> {
  const dir = join(inject('convergedDir'), shape)
  const lock = `${dir}.lock`
  const deadline = Date.now() + CONVERGED_TIMEOUT_MS
  for (;;) {
    if (existsSync(join(dir, SAVED_MANIFEST))) return dir
    try {
      mkdirSync(lock)
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
      if (Date.now() > deadline) throw new Error(`the converged ${shape} cluster was not made within ${CONVERGED_TIMEOUT_MS} ms (${lock} is held)`)
      await sleep(200)
      continue
    }
    try {
      if (!existsSync(join(dir, SAVED_MANIFEST))) await makeConverged(shape, dir)
    } finally {
      rmSync(lock, {recursive: true, force: true})
    }
  }
}

async function makeConverged(shape: Shape, dir: string): Promise<void> {
  const {initArgs = [], ...options} = SHAPES[shape]
  const h = await startHarnessCluster(options)
  const partial = `${dir}.partial`
  try {
    const init = await runIchor([...h.initArgs, ...initArgs, '--json'], h.env)
    if (init.code !== 0)
      throw new Error(
        `init of the converged ${shape} cluster failed (exit ${init.code ?? init.signal}):\n${init.stderr.slice(-4000)}\n${h.nodes.describeManifestRuns()}`,
      )
    await h.nodes.manifestRunsDone()
    const kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
    const dump = await canonicalDump(kube, h)
    rmSync(partial, {recursive: true, force: true})
    await h.save(partial)
    writeFileSync(join(partial, 'init.json'), JSON.stringify(init))
    writeFileSync(join(partial, 'dump.json'), JSON.stringify(dump))
    renameSync(partial, dir)
  } catch (err) {
    await h.stop().catch(() => undefined)
    rmSync(partial, {recursive: true, force: true})
    throw err
  }
}
