// The operator's own inline manifests in a config patch (issue 38 point 7): a namespace or the
// Gateway API CRDs that must exist before Cilium starts. Talos applies every entry of both forms,
// the v1.14 `KubeInlineManifestConfig` documents and the legacy `cluster.inlineManifests` list
// (config/container K8sInlineManifestConfigs, v1.14.1), so both are judged the same way: an entry
// of another name than ichor's is the operator's; ichor's entry, one the patch cannot name, and a
// second CNI are refused.
import {parseAllDocuments} from 'yaml'
import {MAX_ALIAS_COUNT} from '../values/input.js'
import {DEFAULT_INLINE_MANIFEST_NAME} from './patches.js'

const ICHORS = `the entry named ${DEFAULT_INLINE_MANIFEST_NAME} is ichor's: the inline manifest ichor bootstraps Cilium with before handing it to Helm (accepted: an entry of another name)`
const ACCEPTED_FORMS = 'accepted: a KubeInlineManifestConfig document or a cluster.inlineManifests entry with its name, in a strategic merge patch'

/** Where the node's CNI lives: every CNI copies its plugin into one and its config into the other (kubelet and containerd read nothing else). */
const CNI_DIRS = ['/etc/cni/net.d', '/opt/cni/bin']

/** What is wrong with one entry, in either form; empty when it is the operator's to keep. */
export function inlineManifestEntryProblems(name: unknown, manifest: unknown): string[] {
  if (typeof name !== 'string' || name === '') return ["has no name, so Talos cannot tell it from ichor's cilium entry (accepted: a named entry)"]
  if (name === DEFAULT_INLINE_MANIFEST_NAME) return [ICHORS]
  if (typeof manifest !== 'string') return []
  return secondCni(manifest)
}

/**
 * A second CNI, known by what makes it one rather than by its name (a list of names misses
 * kube-router or Antrea and refuses a namespace called "calico-test"): a pod that can write into
 * the node's CNI folders (a hostPath over or under one, mounted without readOnly by a container).
 * Cilium's agent is the only pod that may; a Multus-style meta plugin is refused too, as Cilium
 * is installed exclusive. A pod that only reads them (or the whole host, as node-exporter) is not.
 */
function secondCni(manifest: string): string[] {
  const problems: string[] = []
  for (const doc of parseAllDocuments(manifest)) {
    if (doc.errors.length > 0) return [`the manifest is not YAML (${doc.errors[0]!.message.split('\n')[0]})`]
    let value: unknown
    try {
      value = doc.toJS({maxAliasCount: MAX_ALIAS_COUNT})
    } catch {
      // yaml throws for aliases that expand past the count: refused as a patch's own would be.
      return ['the manifest is not YAML ichor can check (its aliases expand too much)']
    }
    for (const obj of objects(value)) {
      for (const path of writableHostPaths(podSpec(obj))) {
        const dir = normalise(path)
        if (!CNI_DIRS.some((d) => dir === '/' || d === dir || d.startsWith(`${dir}/`) || dir.startsWith(`${d}/`))) continue
        const meta = (obj.metadata ?? {}) as {name?: unknown; namespace?: unknown}
        const who = `${String(obj.kind)} ${typeof meta.namespace === 'string' ? `${meta.namespace}/` : ''}${String(meta.name)}`
        problems.push(
          `a second CNI: ${who} mounts the node's ${dir}, where a CNI installs itself, and Cilium is the cluster's CNI (accepted: manifests whose pods leave ${CNI_DIRS.join(' and ')} alone)`,
        )
      }
    }
  }
  return problems
}

type Obj = Record<string, unknown>
const isObj = (v: unknown): v is Obj => !!v && typeof v === 'object' && !Array.isArray(v)

function objects(value: unknown): Obj[] {
  if (!isObj(value)) return []
  // kubectl's List (and FooList) carries its objects in items.
  if (typeof value.kind === 'string' && value.kind.endsWith('List') && Array.isArray(value.items)) return value.items.flatMap(objects)
  return [value]
}

/** The pod template of a workload: Pod, CronJob, and everything with spec.template (Deployment, DaemonSet, Job…). */
function podSpec(obj: Obj): Obj | undefined {
  const at = (v: unknown, ...keys: string[]): unknown => keys.reduce<unknown>((o, k) => (isObj(o) ? o[k] : undefined), v)
  const spec =
    obj.kind === 'Pod'
      ? at(obj, 'spec')
      : obj.kind === 'CronJob'
        ? at(obj, 'spec', 'jobTemplate', 'spec', 'template', 'spec')
        : at(obj, 'spec', 'template', 'spec')
  return isObj(spec) ? spec : undefined
}

function writableHostPaths(spec: Obj | undefined): string[] {
  const list = (v: unknown): Obj[] => (Array.isArray(v) ? v.filter(isObj) : [])
  const mounts = [...list(spec?.initContainers), ...list(spec?.containers), ...list(spec?.ephemeralContainers)].flatMap((c) => list(c.volumeMounts))
  const writable = new Set(mounts.filter((m) => m.readOnly !== true).map((m) => m.name))
  return list(spec?.volumes)
    .filter((v) => writable.has(v.name) && isObj(v.hostPath) && typeof v.hostPath.path === 'string')
    .map((v) => (v.hostPath as {path: string}).path)
}

function normalise(path: string): string {
  const out = path.replace(/\/+/g, '/').replace(/\/$/, '')
  return out === '' ? '/' : out
}

/** Why a JSON 6902 operation under cluster.inlineManifests is refused: it names entries by position, not by name. */
export const INDEX_PROBLEM = `is changed through JSON 6902, which picks entries by index and may hit ichor's ${DEFAULT_INLINE_MANIFEST_NAME} entry (its index depends on the order talosctl merges patches in) (${ACCEPTED_FORMS})`

/** Why a change to the whole legacy list is refused. */
export const WHOLE_LIST_PROBLEM = `is set by ichor (the list holds the ${DEFAULT_INLINE_MANIFEST_NAME} entry ichor bootstraps Cilium with; ${ACCEPTED_FORMS})`

/** Why a legacy `$patch: delete` entry is refused when its first key is not its name: Talos picks the entry to delete by that first key (configloader decoder/delete.go). */
export const DELETE_SELECTOR_PROBLEM = (key: string) =>
  `is picked for $patch: delete by its ${key}, not its name, and may be ichor's ${DEFAULT_INLINE_MANIFEST_NAME} entry (accepted: name as the entry's first key)`
