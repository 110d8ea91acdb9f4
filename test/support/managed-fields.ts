// Which fields of a Helm release's rendered objects the field manager "helm" owns on the API
// server. The field set of a rendered object is the API server's own: a server-side apply dry run
// of the rendered document under a probe manager returns the probe's Apply entry, which lists
// exactly the fields of that document (structured-merge-diff computes it, not this file). The
// document is the one Helm sends: the render plus the ownership label and annotations Helm adds
// to every object (helm v3.18.0 and v4.1.4 pkg/action/validate.go setMetadataVisitor), which
// also turn a rendered `annotations:` without entries into a map.
import {parseAllDocuments} from 'yaml'
import type {Kube} from '../../src/lib/kube/client.js'
import {resolvePath, type KubeObject} from '../../src/lib/kube/objects.js'

type Entry = {manager?: string; operation?: string; subresource?: string; fieldsV1?: Record<string, unknown>}
type Live = KubeObject & {metadata: KubeObject['metadata'] & {managedFields?: Entry[]}}

const PROBE_MANAGER = 'e2e-render-probe'

/** A fieldsV1 trie as path strings: a node is a member when it is `{}` or holds ".". */
export function fieldPaths(trie: Record<string, unknown> | undefined, prefix = ''): Set<string> {
  const out = new Set<string>()
  for (const [key, child] of Object.entries(trie ?? {})) {
    if (key === '.') continue
    const path = `${prefix}/${key}`
    const node = (child ?? {}) as Record<string, unknown>
    if (Object.keys(node).length === 0 || '.' in node) out.add(path)
    for (const p of fieldPaths(node, path)) out.add(p)
  }
  return out
}

/**
 * For each object the release manifest renders: `<Kind> <name>` and the fields of its rendered
 * document that no entry of the manager `manager` owns (empty when it owns them all).
 */
export async function renderedFieldsNotOwnedBy(
  kube: Kube,
  release: {release: string; namespace: string; manifest: string},
  manager = 'helm',
): Promise<Record<string, string[]>> {
  const {manifest, namespace} = release
  const missing: Record<string, string[]> = {}
  for (const doc of parseAllDocuments(manifest)) {
    const obj = doc.toJS() as KubeObject | null
    if (!obj?.kind || !obj.metadata?.name) continue
    const path = await resolvePath(kube, {apiVersion: obj.apiVersion, kind: obj.kind, name: obj.metadata.name, namespace: obj.metadata.namespace ?? namespace})
    const item = path.item
    const metadata = {
      ...obj.metadata,
      ...(path.namespace ? {namespace: path.namespace} : {}),
      labels: {...obj.metadata.labels, 'app.kubernetes.io/managed-by': 'Helm'},
      annotations: {...obj.metadata.annotations, 'meta.helm.sh/release-name': release.release, 'meta.helm.sh/release-namespace': release.namespace},
    }
    const body = {...obj, metadata}
    const [dry, live] = await Promise.all([
      kube.request<Live>('PATCH', item, {
        body,
        contentType: 'application/apply-patch+yaml',
        query: {fieldManager: PROBE_MANAGER, force: 'true', dryRun: 'All'},
      }),
      kube.request<Live>('GET', item),
    ])
    const rendered = fieldPaths(dry.metadata.managedFields?.find((e) => e.manager === PROBE_MANAGER)?.fieldsV1)
    const owned = new Set(
      (live.metadata.managedFields ?? []).filter((e) => e.manager === manager && !e.subresource).flatMap((e) => [...fieldPaths(e.fieldsV1)]),
    )
    const notOwned = [...rendered].filter((p) => !owned.has(p))
    if (notOwned.length > 0) missing[`${obj.kind} ${obj.metadata.name}`] = notOwned
  }
  return missing
}

/** Per workload (`<Kind> <name>`), per container: its environment variable names. */
type EnvNames = Record<string, Record<string, string[]>>

/** The environment variable names of every container of the rendered workloads, live and as rendered. */
export async function workloadEnv(kube: Kube, manifest: string, namespace: string): Promise<{live: EnvNames; rendered: EnvNames}> {
  const live: EnvNames = {}
  const rendered: EnvNames = {}
  type Workload = KubeObject & {
    spec?: {
      template?: {spec?: {containers?: Array<{name: string; env?: Array<{name: string}>}>; initContainers?: Array<{name: string; env?: Array<{name: string}>}>}}
    }
  }
  const names = (w: Workload | undefined): Record<string, string[]> => {
    const spec = w?.spec?.template?.spec
    return Object.fromEntries([...(spec?.initContainers ?? []), ...(spec?.containers ?? [])].map((c) => [c.name, (c.env ?? []).map((e) => e.name).sort()]))
  }
  for (const doc of parseAllDocuments(manifest)) {
    const obj = doc.toJS() as Workload | null
    if (!obj || !['DaemonSet', 'Deployment'].includes(obj.kind)) continue
    const {item} = await resolvePath(kube, {
      apiVersion: obj.apiVersion,
      kind: obj.kind,
      name: obj.metadata.name,
      namespace: obj.metadata.namespace ?? namespace,
    })
    const key = `${obj.kind} ${obj.metadata.name}`
    rendered[key] = names(obj)
    live[key] = names(await kube.request<Workload>('GET', item))
  }
  return {live, rendered}
}
