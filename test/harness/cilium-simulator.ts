// Cilium operator simulator. The Cilium chart ships no CRDs: in a real cluster the
// cilium-operator registers them when it starts. No operator pod runs on the harness, so
// this registers the two CRDs ichor's policies need, and they are the real ones: Cilium's
// own CiliumNetworkPolicy and CiliumClusterwideNetworkPolicy CRDs (full OpenAPI schema) from
// the Cilium Go module pinned in test/cilium-crds/go.mod (v1.18.0), wrapped as the operator
// does (github.com/cilium/cilium pkg/k8s/apis/cilium.io/client/register.go: the go:embed-ed
// crds/v2 YAMLs, GetPregeneratedCRD, constructV1CRD). So the real apiserver validates every
// policy ichor applies against Cilium's schema. What is simulated is only when they appear:
// once kube-system/cilium-operator exists.
import {AppsV1Api, KubeConfig} from '@kubernetes/client-node'
import {execFileSync} from 'node:child_process'
import {readFileSync} from 'node:fs'
import {request} from 'node:https'
import {join} from 'node:path'
import {parse as parseYaml} from 'yaml'
import {PROJECT_ROOT} from '../support/upstream.js'
import {waitForCrdEstablished} from './kube.js'

/** A CRD as plain JSON, with the API's own key names. */
export interface RawCrd {
  apiVersion: 'apiextensions.k8s.io/v1'
  kind: 'CustomResourceDefinition'
  metadata: {name: string; labels?: Record<string, string>}
  spec: Record<string, unknown>
}

let moduleDir: string | undefined

/**
 * The Cilium module's folder, from scripts/fetch-cilium-crds.sh (downloaded on first use; a
 * failure throws, so a test that needs it fails loudly). ICHOR_CILIUM_MODULE names another folder.
 */
export function ciliumModuleDir(): string {
  moduleDir ??= process.env.ICHOR_CILIUM_MODULE || execFileSync('bash', [join(PROJECT_ROOT, 'scripts', 'fetch-cilium-crds.sh')], {encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit']}).trim()
  return moduleDir
}

const CLIENT_PACKAGE = join('pkg', 'k8s', 'apis', 'cilium.io')
const POLICY_CRD_FILES = ['ciliumnetworkpolicies.yaml', 'ciliumclusterwidenetworkpolicies.yaml']
const SCHEMA_VERSION_LABEL = 'io.cilium.k8s.crd.schema.version'

let crds: readonly RawCrd[] | undefined

/** Cilium's real policy CRDs as its operator creates them (constructV1CRD: its name, the schema-version label, names without listKind). */
export function ciliumPolicyCrds(): readonly RawCrd[] {
  if (crds) return crds
  const dir = ciliumModuleDir()
  const register = readFileSync(join(dir, CLIENT_PACKAGE, 'register.go'), 'utf8')
  const schemaVersion = /CustomResourceDefinitionSchemaVersion = "([^"]+)"/.exec(register)?.[1]
  if (!schemaVersion) throw new Error(`cilium operator simulator: no CustomResourceDefinitionSchemaVersion in ${join(dir, CLIENT_PACKAGE, 'register.go')}`)
  crds = POLICY_CRD_FILES.map((file) => {
    const generated = parseYaml(readFileSync(join(dir, CLIENT_PACKAGE, 'client', 'crds', 'v2', file), 'utf8')) as RawCrd & {spec: {names: Record<string, unknown>}}
    const {listKind: _defaulted, ...names} = generated.spec.names
    const {group, scope, versions, conversion} = generated.spec
    return {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: {name: generated.metadata.name, labels: {[SCHEMA_VERSION_LABEL]: schemaVersion}},
      spec: {group, names, scope, versions, ...(conversion ? {conversion} : {})},
    }
  })
  return crds
}

/** Registers Cilium's policy CRDs as its operator does (already present is fine) and waits until they are Established. */
export async function installCiliumCrdsSimulated(kubeconfigPath: string, timeoutMs = 30_000): Promise<void> {
  const kc = new KubeConfig()
  kc.loadFromFile(kubeconfigPath)
  for (const crd of ciliumPolicyCrds()) await createCrdRaw(kc, crd, {ignoreExisting: true})
  for (const crd of ciliumPolicyCrds()) await waitForCrdEstablished(kc, crd.metadata.name, timeoutMs)
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
  // Read (downloaded if missing) now: a missing module fails the harness start, not a later wait.
  ciliumPolicyCrds()
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
