// Offline `helm template`: values go in as JSON on stdin, never as re-serialised YAML,
// so YAML 1.1/1.2 differences cannot change a type between validation and render.
import {IchorError} from '../errors/errors.js'
import {runProcess, startError} from '../exec/run.js'
import {findHelm, helmPath} from './binary.js'
import {helmEnv} from './env.js'
import {helmCacheIdentity, renderCache} from './render-cache.js'
import {EXIT} from '../errors/exit-codes.js'

export interface TemplateOptions {
  chartPath: string
  releaseName: string
  namespace: string
  values: unknown
  /** Kubernetes version the render targets (Capabilities.KubeVersion). */
  kubeVersion?: string
  /** Extra API versions to declare present (Capabilities.APIVersions). */
  apiVersions?: string[]
  includeCrds?: boolean
  /** Render hooks too (helm template includes them unless --no-hooks). */
  noHooks?: boolean
  /** Cancels the helm process. */
  signal?: AbortSignal
}

export class HelmRenderError extends IchorError {
  constructor(
    readonly helmMessage: string,
    chart: string,
  ) {
    super(`helm could not render ${chart}: ${helmMessage}`, {exitCode: EXIT.usage})
    this.name = 'HelmRenderError'
  }
}

export async function helmTemplate(opts: TemplateOptions): Promise<string> {
  const args = ['template', opts.releaseName, opts.chartPath, '--namespace', opts.namespace, '--values', '-']
  for (const api of opts.apiVersions ?? []) args.push('--api-versions', api)
  if (opts.kubeVersion) args.push('--kube-version', opts.kubeVersion)
  if (opts.includeCrds) args.push('--include-crds')
  if (opts.noHooks) args.push('--no-hooks')
  const input = JSON.stringify(opts.values ?? {})
  // A hit needs no helm process at all: the key names the binary by its file identity, and
  // an entry exists only when that binary passed the version check and rendered it.
  const cache = renderCache(helmCacheIdentity(helmPath()), opts.chartPath, args, input)
  const hit = cache?.read()
  if (hit !== undefined) return hit
  // The version check and the render run side by side (a cold `cni values validate` waited
  // for `helm version` first); the render counts only once the check passed, else it is stopped.
  const path = helmPath()
  const checked = findHelm()
  const stop = new AbortController()
  const forward = () => stop.abort()
  if (opts.signal?.aborted) stop.abort()
  opts.signal?.addEventListener('abort', forward, {once: true})
  const rendering = runProcess(path, args, {input, env: helmEnv(), maxBuffer: 64 * 1024 * 1024, timeoutMs: 120_000, signal: stop.signal}).catch(
    (error: unknown) => {
      throw startError('helm', path, error)
    },
  )
  let result
  try {
    await checked.catch((error: unknown) => {
      stop.abort()
      rendering.catch(() => {}) // the version error is the one to report
      throw error
    })
    result = await rendering
  } finally {
    opts.signal?.removeEventListener('abort', forward)
  }
  if (result.canceled) throw new HelmRenderError('the render was cancelled', opts.chartPath)
  if (result.timedOut) throw new HelmRenderError('helm did not finish within 120s', opts.chartPath)
  if (result.overflowed) throw new HelmRenderError('the rendered output is larger than 64 MiB', opts.chartPath)
  if (result.exitCode !== 0) throw new HelmRenderError(cleanHelmError(result.stderr || result.stdout), opts.chartPath)
  cache?.write(result.stdout)
  return result.stdout
}

/** Helm's message without its "Error: " prefix and the "--debug" advice. */
export function cleanHelmError(stderr: string): string {
  return stderr
    .split('\n')
    .filter((line) => line.trim() !== '' && !/Use --debug flag/.test(line))
    .map((line) => line.replace(/^Error:\s*/, ''))
    .join('\n')
    .trim()
}
