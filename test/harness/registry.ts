// Starts the real CNCF distribution registry (Debian package `docker-registry`) on a free
// loopback port with its own temp storage, for tests that push and pull bundles.
// Not a simulator: the real distribution registry (2.8 from Debian; Kokumi ships its 3.x line).
import {spawn, type ChildProcess} from 'node:child_process'
import {accessSync, constants, cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {createServer} from 'node:net'
import {tmpdir} from 'node:os'
import {delimiter, join} from 'node:path'
import {GO_GC_TUNING} from './apiserver.js'

export interface RunningRegistry {
  /** `http://127.0.0.1:<port>` */
  endpoint: string
  /** `127.0.0.1:<port>` */
  host: string
  /**
   * What a restarted registry pod with an emptyDir gives: the process stopped, its storage
   * wiped, the same registry started again on the same port with an empty folder.
   */
  restartEmpty(): Promise<void>
  stop(): Promise<void>
  /** Stops the registry and copies its storage to `dir` (for `startRegistry({restoreFrom})`), then removes its files. */
  save(dir: string): Promise<void>
}

const APT_HINT = 'install the Debian package: apt-get update && apt-get install -y docker-registry (or set ICHOR_REGISTRY_BIN)'

/** The registry binary: ICHOR_REGISTRY_BIN, else `docker-registry` on PATH. Missing is a loud error. */
export function findRegistryBinary(): string {
  const override = process.env.ICHOR_REGISTRY_BIN
  const candidates = override
    ? [override]
    : (process.env.PATH ?? '')
        .split(delimiter)
        .filter(Boolean)
        .map((dir) => join(dir, 'docker-registry'))
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK)
      return candidate
    } catch {
      // Try the next one.
    }
  }
  throw new Error(`the OCI registry binary ${override ?? 'docker-registry'} was not found${override ? '' : ' on PATH'}: ${APT_HINT}`)
}

/** `restoreFrom`: a folder `save()` wrote; the registry serves a copy of it (the folder is never changed). */
export async function startRegistry(opts: {restoreFrom?: string} = {}): Promise<RunningRegistry> {
  const binary = findRegistryBinary()
  // The port can be taken between picking and binding; a couple of tries cover that race.
  let lastError: unknown
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return await startOnce(binary, await freeLoopbackPort(), opts.restoreFrom)
    } catch (error) {
      lastError = error
    }
  }
  throw lastError
}

async function startOnce(binary: string, port: number, restoreFrom?: string): Promise<RunningRegistry> {
  const dir = mkdtempSync(join(tmpdir(), 'ichor-registry-'))
  const host = `127.0.0.1:${port}`
  const endpoint = `http://${host}`
  const config = join(dir, 'config.yml')
  const data = join(dir, 'data')
  writeFileSync(
    config,
    [
      'version: 0.1',
      'log:',
      '  level: warn',
      '  accesslog:',
      '    disabled: true',
      'storage:',
      '  filesystem:',
      `    rootdirectory: ${data}`,
      '  delete:',
      '    enabled: true',
      'http:',
      `  addr: ${host}`,
      '',
    ].join('\n'),
  )
  if (restoreFrom) cpSync(restoreFrom, data, {recursive: true})
  let running: {stop(): Promise<void>}
  try {
    running = await serve(binary, config, endpoint)
  } catch (error) {
    rmSync(dir, {recursive: true, force: true})
    throw error
  }
  return {
    endpoint,
    host,
    async restartEmpty() {
      await running.stop()
      rmSync(data, {recursive: true, force: true})
      running = await serve(binary, config, endpoint)
    },
    async stop() {
      await running.stop()
      rmSync(dir, {recursive: true, force: true})
    },
    async save(to: string) {
      await running.stop()
      mkdirSync(to, {recursive: true})
      if (existsSync(data)) cpSync(data, to, {recursive: true})
      rmSync(dir, {recursive: true, force: true})
    },
  }
}

/** Starts the registry process and waits until /v2/ answers. */
async function serve(binary: string, config: string, endpoint: string): Promise<{stop(): Promise<void>}> {
  // REGISTRY_* variables override the config file; keep the run hermetic.
  const env = {...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('REGISTRY_'))), ...GO_GC_TUNING}
  const child = spawn(binary, ['serve', config], {env, stdio: ['ignore', 'ignore', 'pipe']})
  let stderr = ''
  child.stderr!.on('data', (c: Buffer) => {
    stderr = (stderr + c.toString()).slice(-4000)
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  const killOnExit = () => child.kill('SIGKILL')
  process.once('exit', killOnExit)

  const stop = async () => {
    process.removeListener('exit', killOnExit)
    await terminate(child, exited)
  }

  const deadline = Date.now() + 15_000
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      await stop()
      throw new Error(`docker-registry exited (${child.exitCode ?? child.signalCode}) before answering on ${endpoint}:\n${stderr}`)
    }
    try {
      const res = await fetch(`${endpoint}/v2/`, {signal: AbortSignal.timeout(1000)})
      await res.body?.cancel()
      if (res.status === 200) break
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) {
      await stop()
      throw new Error(`docker-registry did not answer on ${endpoint}/v2/ within 15 s:\n${stderr}`)
    }
    await new Promise((r) => setTimeout(r, 50))
  }
  return {stop}
}

async function terminate(child: ChildProcess, exited: Promise<unknown>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  child.kill('SIGTERM')
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000)
  await exited
  clearTimeout(timer)
}

/** A port the kernel just handed out on 127.0.0.1. */
export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      const port = typeof address === 'object' && address ? address.port : 0
      server.close(() => resolve(port))
    })
  })
}
