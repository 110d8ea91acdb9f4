// Helm's ownership metadata on every object of a rendered manifest, so the objects Talos
// creates from the inline manifest can later be adopted by `helm install --take-ownership`
// without a single field changing (DESIGN.md, init step 2 and 4).
//
// Documents are edited in place through yaml's node API, not re-serialised from plain
// data: each scalar keeps its original style and quoting, so a value such as `on` or an
// octal-looking string reads back exactly as helm wrote it.
import {isMap, isSeq, parseAllDocuments, YAMLMap, type Document} from 'yaml'
import {IchorError} from '../errors/errors.js'

export const HELM_RELEASE_NAME_ANNOTATION = 'meta.helm.sh/release-name'
export const HELM_RELEASE_NAMESPACE_ANNOTATION = 'meta.helm.sh/release-namespace'
export const HELM_MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by'

/** Fixed stringify options: the same input always gives the same bytes; no line folding. */
const STRINGIFY = {lineWidth: 0, minContentWidth: 0} as const

export function addHelmOwnership(manifest: string, release = 'cilium', namespace = 'kube-system'): string {
  const out: string[] = []
  // YAML 1.1, as helm and Kubernetes read it: `0400` is octal and must be written back as `0400`.
  parseAllDocuments(manifest, {version: '1.1'}).forEach((doc, index) => {
    if (doc.errors.length > 0) {
      throw new IchorError(`manifest document ${index + 1} is not valid YAML: ${doc.errors[0]!.message}`)
    }
    if (isEmptyDocument(doc)) return
    markObject(doc.contents, index, release, namespace)
    doc.directives.docStart = null
    out.push(doc.toString(STRINGIFY))
  })
  return out.join('---\n')
}

function isEmptyDocument(doc: Document): boolean {
  const value: unknown = doc.toJS()
  return value === null || value === undefined
}

function markObject(node: unknown, index: number, release: string, namespace: string): void {
  if (!isMap(node) || !node.has('kind') || !node.has('apiVersion')) {
    throw new IchorError(`manifest document ${index + 1} is not a Kubernetes object (a map with apiVersion and kind)`)
  }
  // A v1 List is flattened by helm before it checks ownership: mark its items instead.
  const kind = String(node.get('kind'))
  const items = node.get('items', true)
  if (kind.endsWith('List') && isSeq(items)) {
    for (const item of items.items) markObject(item, index, release, namespace)
    return
  }
  const metadata = blockMap(node, 'metadata')
  const annotations = blockMap(metadata, 'annotations')
  annotations.set(HELM_RELEASE_NAME_ANNOTATION, release)
  annotations.set(HELM_RELEASE_NAMESPACE_ANNOTATION, namespace)
  blockMap(metadata, 'labels').set(HELM_MANAGED_BY_LABEL, 'Helm')
}

/** The map at `key`, created when missing or null; `{}` becomes a block map so new keys read cleanly. */
function blockMap(parent: YAMLMap, key: string): YAMLMap {
  const current = parent.get(key, true)
  if (isMap(current)) {
    current.flow = false
    return current
  }
  if (current !== undefined && current !== null && !isNullScalar(current)) {
    throw new IchorError(`manifest object has a ${key} that is not a map`)
  }
  const created = new YAMLMap()
  parent.set(key, created)
  return created
}

function isNullScalar(node: unknown): boolean {
  return typeof node === 'object' && node !== null && 'value' in node && (node as {value: unknown}).value === null
}

/**
 * The manifest without Helm hook objects (`helm.sh/hook`, e.g. the post-install
 * hubble-generate-certs Job). They never go into the Talos inline manifest: Helm runs,
 * deletes and recreates hooks itself, without its ownership metadata, so an inline entry for
 * one would leave Talos an object to prune or re-create behind Helm's back.
 */
export function withoutHelmHooks(manifest: string): string {
  const out: string[] = []
  for (const doc of parseAllDocuments(manifest, {version: '1.1'})) {
    const value = doc.toJS() as {metadata?: {annotations?: Record<string, unknown>}} | null
    if (value?.metadata?.annotations?.['helm.sh/hook'] !== undefined) continue
    doc.directives.docStart = null
    out.push(doc.toString(STRINGIFY))
  }
  return out.join('---\n')
}
