// Cilium operator simulator. The Cilium chart ships no CRDs: in a real cluster the
// cilium-operator registers them when it starts. No operator pod runs on the harness, so
// this registers the two CRDs ichor's policies need, with the real group, names, scope and
// versions but an open schema (the real ones carry Cilium's full OpenAPI schema, which the
// operator embeds in its binary and which is not available here).
import {AppsV1Api, KubeConfig} from '@kubernetes/client-node'
import {request} from 'node:https'
import {waitForCrdEstablished} from './kube.js'

const OPEN_SCHEMA = {openAPIV3Schema: {type: 'object', 'x-kubernetes-preserve-unknown-fields': true}}

/** A CRD as plain JSON, with the API's own key names. */
export interface RawCrd {
  apiVersion: 'apiextensions.k8s.io/v1'
  kind: 'CustomResourceDefinition'
  metadata: {name: string; labels?: Record<string, string>}
  spec: Record<string, unknown>
}

function ciliumCrd(opts: {
  plural: string
  kind: string
  shortNames: string[]
  scope: 'Namespaced' | 'Cluster'
}): RawCrd {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: `${opts.plural}.cilium.io`,
      labels: {'ichor.test/simulated-by': 'cilium-operator-simulator'},
    },
    spec: {
      group: 'cilium.io',
      names: {
        kind: opts.kind,
        listKind: `${opts.kind}List`,
        plural: opts.plural,
        singular: opts.kind.toLowerCase(),
        shortNames: opts.shortNames,
        categories: ['cilium', 'ciliumpolicy'],
      },
      scope: opts.scope,
      versions: [{name: 'v2', served: true, storage: true, schema: OPEN_SCHEMA, subresources: {status: {}}}],
    },
  }
}

/** The CRDs the simulated operator registers. */
export const SIMULATED_CILIUM_CRDS: readonly RawCrd[] = [
  ciliumCrd({plural: 'ciliumnetworkpolicies', kind: 'CiliumNetworkPolicy', shortNames: ['cnp', 'ciliumnp'], scope: 'Namespaced'}),
  ciliumCrd({plural: 'ciliumclusterwidenetworkpolicies', kind: 'CiliumClusterwideNetworkPolicy', shortNames: ['ccnp'], scope: 'Cluster'}),
]

/** Registers the simulated Cilium CRDs (already present is fine) and waits until they are Established. */
export async function installCiliumCrdsSimulated(kubeconfigPath: string, timeoutMs = 30_000): Promise<void> {
  const kc = new KubeConfig()
  kc.loadFromFile(kubeconfigPath)
  for (const crd of SIMULATED_CILIUM_CRDS) await createCrdRaw(kc, crd, {ignoreExisting: true})
  for (const crd of SIMULATED_CILIUM_CRDS) await waitForCrdEstablished(kc, crd.metadata.name, timeoutMs)
}

/**
 * Creates a CRD from plain JSON. Not through client-node's typed API: its serializer drops
 * keys it has no model field under that exact name, such as `x-kubernetes-preserve-unknown-fields`.
 */
export async function createCrdRaw(kc: KubeConfig, crd: object, opts: {ignoreExisting?: boolean} = {}): Promise<void> {
  const cluster = kc.getCurrentCluster()
  if (!cluster) throw new Error('cilium operator simulator: the kubeconfig has no current cluster')
  const url = new URL('/apis/apiextensions.k8s.io/v1/customresourcedefinitions', cluster.server)
  const options: Parameters<typeof request>[1] = {method: 'POST', headers: {'Content-Type': 'application/json', Accept: 'application/json'}}
  await kc.applyToHTTPSOptions(options)
  const body = JSON.stringify(crd)
  const {status, text} = await new Promise<{status: number; text: string}>((resolve, reject) => {
    const req = request(url, options, (res) => {
      let text = ''
      res.on('data', (c: Buffer) => (text += c.toString()))
      res.on('end', () => resolve({status: res.statusCode ?? 0, text}))
    })
    req.on('error', reject)
    req.end(body)
  })
  if (status === 201 || (status === 409 && opts.ignoreExisting)) return
  throw Object.assign(new Error(`creating a CRD answered ${status}: ${text.slice(0, 500)}`), {code: status})
}

export interface CiliumOperatorSimulator {
  /** Resolves once the CRDs are registered and Established; rejects if registering failed. */
  readonly installed: Promise<void>
  stop(): Promise<void>
}

/**
 * Waits for the Deployment `kube-system/cilium-operator` (as the inline manifest or Helm
 * creates it), then registers the Cilium CRDs as the started operator would.
 */
export function startCiliumOperatorSimulator(opts: {kubeconfigPath: string; intervalMs?: number}): CiliumOperatorSimulator {
  const kc = new KubeConfig()
  kc.loadFromFile(opts.kubeconfigPath)
  const apps = kc.makeApiClient(AppsV1Api)
  let stopped = false
  const installed = (async () => {
    while (!stopped) {
      try {
        await apps.readNamespacedDeployment({namespace: 'kube-system', name: 'cilium-operator'})
        await installCiliumCrdsSimulated(opts.kubeconfigPath)
        return
      } catch (err) {
        if ((err as {code?: number}).code !== 404) throw err
      }
      await new Promise((r) => setTimeout(r, opts.intervalMs ?? 300))
    }
  })()
  // A caller that never awaits `installed` must not see an unhandled rejection at stop.
  installed.catch(() => undefined)
  return {
    installed,
    async stop() {
      stopped = true
      await installed.catch(() => undefined)
    },
  }
}
