// Offline `helm template`: values go in as JSON on stdin, never as re-serialised YAML,
// so YAML 1.1/1.2 differences cannot change a type between validation and render.
import {execa} from 'execa'
import {IchorError} from '../errors/errors.js'
import {findHelm} from './binary.js'
import {renderCache} from './render-cache.js'

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
  constructor(readonly helmMessage: string, chart: string) {
    super(`helm could not render ${chart}: ${helmMessage}`, {exitCode: 2})
    this.name = 'HelmRenderError'
  }
}

export async function helmTemplate(opts: TemplateOptions): Promise<string> {
  const helm = await findHelm()
  const args = ['template', opts.releaseName, opts.chartPath, '--namespace', opts.namespace, '--values', '-']
  for (const api of opts.apiVersions ?? []) args.push('--api-versions', api)
  if (opts.kubeVersion) args.push('--kube-version', opts.kubeVersion)
  if (opts.includeCrds) args.push('--include-crds')
  if (opts.noHooks) args.push('--no-hooks')
  const input = JSON.stringify(opts.values ?? {})
  const cache = renderCache(helm.version, opts.chartPath, args, input)
  const hit = cache?.read()
  if (hit !== undefined) return hit
  const result = await execa(helm.path, args, {
    input,
    reject: false,
    maxBuffer: 64 * 1024 * 1024,
    timeout: 120_000,
    cancelSignal: opts.signal,
  })
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
