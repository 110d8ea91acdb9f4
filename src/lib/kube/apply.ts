// Server-side apply under ichor's field manager, and create-only writes for objects
// that must never be regenerated (generated passwords, Talos secrets).
import {FIELD_MANAGER} from '../constants.js'
import {IchorError} from '../errors/errors.js'
import {isAlreadyExists, isConflict, isNotFound, KubeApiError, type Kube} from './client.js'
import {describeObject, KindNotServedError, PARTIAL_OBJECT_METADATA, type KubeObject, refOf, resolvePath} from './objects.js'
import {waitForCrdEstablished, type WaitOptions} from './wait.js'

export type ApplyOutcome = 'created' | 'configured' | 'unchanged'

export interface ApplyResult {
  apiVersion: string
  kind: string
  namespace?: string
  name: string
  result: ApplyOutcome
}

export interface ApplyOptions {
  fieldManager?: string
  /**
   * Take over fields another manager set. Only for fields ichor owns by design;
   * everything else must surface as a FieldConflictError.
   */
  force?: boolean
  /** Ask the server what would change, persist nothing. */
  dryRun?: boolean
  /** Namespace for namespaced objects that carry none (like `kubectl apply -n`). */
  namespace?: string
  /** Called after each object, e.g. to print progress. */
  onApplied?: (result: ApplyResult) => void
  /** Options of the wait for CRDs of this batch to be Established. */
  crdWait?: WaitOptions
}

export interface FieldConflict {
  field: string
  manager: string
  message: string
}

/** A server-side apply refused because other field managers own some of the fields. */
export class FieldConflictError extends IchorError {
  readonly object: string
  readonly conflicts: FieldConflict[]
  constructor(object: string, fieldManager: string, conflicts: FieldConflict[], cause: unknown) {
    const managers = [...new Set(conflicts.map((c) => c.manager))]
    super(
      `${object}: ${conflicts.length} field${conflicts.length === 1 ? '' : 's'} ichor (field manager "${fieldManager}") would change ${
        conflicts.length === 1 ? 'is' : 'are'
      } owned by ${managers.map((m) => `"${m}"`).join(', ')}:\n${conflicts.map((c) => `  - ${c.field}: set by "${c.manager}"`).join('\n')}`,
      {
        cause,
        hint:
          `another tool changed these fields. To let ichor take them over, run again with --force-conflicts ` +
          `(as \`kubectl apply --server-side --force-conflicts --field-manager=${fieldManager}\` would); ` +
          `to keep the other value, put it into ichor's input instead so both agree.`,
      },
    )
    this.name = 'FieldConflictError'
    this.object = object
    this.conflicts = conflicts
  }
}

function parseConflicts(error: KubeApiError): FieldConflict[] {
  const causes = error.status.details?.causes ?? []
  return causes.map((cause) => {
    // The API server words each cause as: conflict with "<manager>" [using <apiVersion>]: <field>
    const manager = /conflict with "([^"]+)"/.exec(cause.message ?? '')?.[1] ?? 'another field manager'
    return {field: cause.field ?? '(unknown field)', manager, message: cause.message ?? ''}
  })
}

const CRD_KIND = 'CustomResourceDefinition'

/** What a dry-run apply of a CRD can change, read from its metadata. */
function crdMeta(o: KubeObject) {
  return {generation: o.metadata.generation, labels: o.metadata.labels ?? {}, annotations: o.metadata.annotations ?? {}}
}

/**
 * Server-side applies each object in order. A CRD applied here is waited for
 * (Established) before the next non-CRD object, so a batch may hold a CRD and its
 * objects. Each result says whether the object was created, changed (its
 * resourceVersion moved) or left unchanged.
 */
export async function serverSideApply(kube: Kube, objects: KubeObject[], options: ApplyOptions = {}): Promise<ApplyResult[]> {
  const fieldManager = options.fieldManager ?? FIELD_MANAGER
  const results: ApplyResult[] = []
  const pendingCrds: string[] = []
  // Kinds (group/Kind) defined by CRDs of this batch, to tell "CRD not served yet" in a dry run.
  const batchKinds = new Set(
    objects
      .filter((o) => o.kind === CRD_KIND)
      .map((o) => {
        const spec = o.spec as {group?: string; names?: {kind?: string}} | undefined
        return `${spec?.group}/${spec?.names?.kind}`
      }),
  )

  for (const input of objects) {
    if (input.kind !== CRD_KIND && pendingCrds.length > 0 && !options.dryRun) {
      for (const name of pendingCrds.splice(0)) await waitForCrdEstablished(kube, name, options.crdWait)
    }
    const object = withNamespace(input, options.namespace)
    const result = await applyOne(kube, object, fieldManager, options, batchKinds)
    // Also when unchanged: a run killed right after creating the CRD may find it not yet Established.
    if (object.kind === CRD_KIND) pendingCrds.push(object.metadata.name)
    results.push(result)
    options.onApplied?.(result)
  }
  if (!options.dryRun) for (const name of pendingCrds) await waitForCrdEstablished(kube, name, options.crdWait)
  return results
}

function withNamespace(object: KubeObject, namespace: string | undefined): KubeObject {
  if (object.metadata.namespace || !namespace) return object
  return {...object, metadata: {...object.metadata, namespace}}
}

async function applyOne(kube: Kube, object: KubeObject, fieldManager: string, options: ApplyOptions, batchKinds: Set<string>): Promise<ApplyResult> {
  const label = describeObject(object)
  let path
  try {
    path = await resolvePath(kube, refOf(object))
  } catch (error) {
    const group = object.apiVersion.includes('/') ? object.apiVersion.split('/')[0] : ''
    if (error instanceof KindNotServedError && options.dryRun && batchKinds.has(`${group}/${object.kind}`)) {
      // Its CRD is part of this batch but a dry run does not create it: it would be created.
      return resultOf(object, undefined, 'created')
    }
    throw error
  }
  // Cluster-scoped kinds ignore a namespace in the manifest, as kubectl does.
  const body: KubeObject = path.namespace ? object : {...object, metadata: {...object.metadata, namespace: undefined}}
  // A real apply only compares resourceVersions: fetch the metadata alone (a CRD's schema
  // is hundreds of KB); a dry run compares the whole object.
  // A CRD's spec change moves its generation, so even a dry run compares only metadata.
  const metadataOnly = !options.dryRun || object.kind === CRD_KIND
  const before = await kube.request<KubeObject>('GET', path.item, metadataOnly ? {accept: PARTIAL_OBJECT_METADATA} : {}).catch((error) => {
    if (isNotFound(error)) return undefined
    throw error
  })
  let after: KubeObject
  try {
    after = await kube.request<KubeObject>('PATCH', path.item, {
      body,
      accept: metadataOnly ? PARTIAL_OBJECT_METADATA : undefined,
      // JSON is YAML, so the apply patch can be sent as JSON text.
      contentType: 'application/apply-patch+yaml',
      // Strict: a field the server does not know is an error naming it, never silently dropped.
      query: {fieldManager, force: options.force ? true : undefined, dryRun: options.dryRun ? 'All' : undefined, fieldValidation: 'Strict'},
    })
  } catch (error) {
    if (isConflict(error)) {
      const conflicts = parseConflicts(error as KubeApiError)
      if (conflicts.length > 0) throw new FieldConflictError(label, fieldManager, conflicts, error)
    }
    if (error instanceof KubeApiError) {
      throw new IchorError(`cannot apply ${label}: ${error.status.message ?? error.message}`, {cause: error})
    }
    throw error
  }
  if (!before) return resultOf(body, path.namespace, 'created')
  const moved = !options.dryRun
    ? before.metadata.resourceVersion !== after.metadata.resourceVersion
    : object.kind === CRD_KIND
      ? JSON.stringify(crdMeta(before)) !== JSON.stringify(crdMeta(after))
      : JSON.stringify(withoutVersion(before)) !== JSON.stringify(withoutVersion(after))
  return resultOf(body, path.namespace, moved ? 'configured' : 'unchanged')
}

function withoutVersion(object: KubeObject): KubeObject {
  return {...object, metadata: {...object.metadata, resourceVersion: undefined}}
}

function resultOf(object: KubeObject, namespace: string | undefined, result: ApplyOutcome): ApplyResult {
  return {
    apiVersion: object.apiVersion,
    kind: object.kind,
    ...((namespace ?? object.metadata.namespace) ? {namespace: namespace ?? object.metadata.namespace} : {}),
    name: object.metadata.name,
    result,
  }
}

/**
 * Creates the object unless one of that name exists; never updates it. For Secrets
 * holding generated values that a rerun must not replace.
 */
export async function createIfAbsent(kube: Kube, object: KubeObject, options: {fieldManager?: string; dryRun?: boolean} = {}): Promise<'created' | 'exists'> {
  const path = await resolvePath(kube, {...refOf(object), name: undefined})
  try {
    await kube.request('POST', path.collection, {
      body: object,
      query: {fieldManager: options.fieldManager ?? FIELD_MANAGER, dryRun: options.dryRun ? 'All' : undefined, fieldValidation: 'Strict'},
    })
    return 'created'
  } catch (error) {
    if (isAlreadyExists(error)) return 'exists'
    if (error instanceof KubeApiError) {
      throw new IchorError(`cannot create ${describeObject(object)}: ${error.status.message ?? error.message}`, {cause: error})
    }
    throw error
  }
}
