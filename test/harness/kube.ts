// Small client-node helpers shared by the e2e tests: a KubeConfig from the harness's
// kubeconfig, namespaces, polling waits and a canonical dump of objects for comparing
// end states (e.g. an interrupted run against an uninterrupted one).
import {ApiextensionsV1Api, CoreV1Api, KubeConfig, KubernetesObjectApi, type KubernetesObject} from '@kubernetes/client-node'
import {randomBytes} from 'node:crypto'

/**
 * A KubeConfig of the harness's kubeconfig whose API clients share one keep-alive connection pool.
 * client-node makes a new https.Agent for every request (config.js createAgent, 1.4.0): a TLS
 * handshake on both sides and a CA parsed again per request, which the simulators' polling paid
 * many times a second.
 */
export function loadKubeConfig(kubeconfigPath: string): KubeConfig {
  const kc = new KubeConfig()
  kc.loadFromFile(kubeconfigPath)
  const reusable = kc as unknown as {createAgent(cluster: unknown, options: Record<string, unknown>): unknown}
  const create = reusable.createAgent.bind(kc)
  let agent: unknown
  // The cluster and credentials of a harness kubeconfig never change, so neither do the agent's options.
  reusable.createAgent = (cluster, options) => (agent ??= create(cluster, {...options, keepAlive: true}))
  return kc
}

/** A DNS-1123 name unique to this run, e.g. `t-harness-3f9a1c`. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(3).toString('hex')}`.toLowerCase()
}

/** Creates a namespace (kube-controller-manager gives it its `default` ServiceAccount). */
export async function createNamespace(kc: KubeConfig, name: string, opts: {labels?: Record<string, string>} = {}): Promise<string> {
  const core = kc.makeApiClient(CoreV1Api)
  await core.createNamespace({body: {metadata: {name, labels: opts.labels}}})
  return name
}

/** Polls `check` until it returns a value other than undefined/false, or fails after `timeoutMs`. */
export async function waitUntil<T>(
  what: string,
  check: () => Promise<T | undefined | false>,
  {timeoutMs = 30_000, intervalMs = 100}: {timeoutMs?: number; intervalMs?: number} = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  let lastError: unknown
  for (;;) {
    try {
      const v = await check()
      if (v !== undefined && v !== false) return v
    } catch (err) {
      lastError = err
    }
    if (Date.now() > deadline) {
      const why = lastError ? `: ${(lastError as Error).message}` : ''
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${why}`)
    }
    await new Promise((r) => setTimeout(r, intervalMs))
  }
}

export async function waitForCrdEstablished(kc: KubeConfig, name: string, timeoutMs = 30_000): Promise<void> {
  const ext = kc.makeApiClient(ApiextensionsV1Api)
  await waitUntil(
    `CRD ${name} Established`,
    async () => {
      const crd = await ext.readCustomResourceDefinition({name})
      return crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')
    },
    {timeoutMs},
  )
}

export interface ResourceRef {
  apiVersion: string
  kind: string
}

/** Metadata the apiserver changes on every write; two equal end states differ only in these. */
const VOLATILE_METADATA = ['resourceVersion', 'uid', 'creationTimestamp', 'managedFields', 'generation', 'selfLink']

/**
 * Lists the given kinds (in `namespace`, or everywhere) and returns them sorted by
 * kind/namespace/name, with volatile metadata removed unless `raw` is set, so two dumps
 * of the same end state are deep-equal.
 */
export async function dumpObjects(
  kc: KubeConfig,
  resources: ResourceRef[],
  opts: {namespace?: string; labelSelector?: string; raw?: boolean} = {},
): Promise<KubernetesObject[]> {
  const api = KubernetesObjectApi.makeApiClient(kc)
  const out: KubernetesObject[] = []
  for (const {apiVersion, kind} of resources) {
    const list = await api.list(apiVersion, kind, opts.namespace, undefined, undefined, undefined, undefined, opts.labelSelector)
    for (const item of list.items) {
      const obj = JSON.parse(JSON.stringify({...item, apiVersion, kind})) as KubernetesObject
      if (!opts.raw && obj.metadata) {
        for (const key of VOLATILE_METADATA) delete (obj.metadata as Record<string, unknown>)[key]
      }
      out.push(obj)
    }
  }
  const key = (o: KubernetesObject) => `${o.kind}/${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`
  return out.sort((a, b) => key(a).localeCompare(key(b)))
}
