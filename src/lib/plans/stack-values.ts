// `ichor stack values set argocd|kokumi`: a new user layer for one component goes through the
// values engine, is stored in the IchorInstallation, rendered and published as a new bundle
// (new tag and digest), and the component's Order moves to it. Once the Order exists nothing
// is applied directly: Kokumi renders, Argo CD syncs. The same values twice change nothing.
import {isDeepStrictEqual} from 'node:util'
import {ciliumReleaseView} from '../cilium/tasks.js'
import {ValidationError} from '../errors/errors.js'
import {serverSideApply} from '../kube/apply.js'
import {FIELD_MANAGER, INSTALLATION} from '../constants.js'
import {openSession, type Session} from '../session/session.js'
import {closeRegistryTunnelTask, leaseTask} from '../session/tasks.js'
import {renderStackFromInstallation, requireInstallation, type StackArtifactSources} from '../stack/from-installation.js'
import type {StackComponent} from '../stack/policies.js'
import {ordersTask, publishBundlesTask, waitApplicationsTask} from '../stack/tasks.js'
import {recordStatusTask} from '../state/tasks.js'
import {runTasks, type OutputMode, type RunResult} from '../tasks/engine.js'
import {holds, missing} from '../tasks/probe.js'
import type {Task} from '../tasks/types.js'
import {deepMerge} from '../values/merge.js'
import type {Values} from '../values/path.js'

export interface StackValuesSetOptions {
  component: StackComponent
  /** The layer from -f/--set, merged onto the stored one (a null removes a key). */
  values: Values
  kubeconfig?: string
  context?: string
  registryEndpoint?: string
  sources: StackArtifactSources
  timeoutMs: number
  output: OutputMode
  dryRun: boolean
  breakLock?: boolean
}

export interface StackValuesSetResult extends RunResult {
  component: StackComponent
  tag: string
  digest: string
}

/** The stored user layer of one component. */
export async function getStackValues(o: {component: StackComponent; kubeconfig?: string; context?: string}): Promise<Values> {
  const session = openSession({command: 'stack values get', kubeconfig: o.kubeconfig, context: o.context})
  try {
    await session.clusterAnswers()
    return (await requireInstallation(session)).spec.stack[o.component].values ?? {}
  } finally {
    await session.close()
  }
}

function storeValuesTask(session: Session, component: StackComponent, values: Values): Task {
  return {
    id: 'store-values',
    title: `Store the ${component} values in the IchorInstallation`,
    async probe() {
      const cr = await requireInstallation(session)
      return isDeepStrictEqual(cr.spec.stack[component].values ?? {}, values) ? holds('stored') : missing('the stored values differ')
    },
    async run() {
      const cr = await requireInstallation(session)
      const kube = await session.kube()
      // Server-side apply alone cannot remove a key from this free-form subtree: a map it empties
      // is stored as null, which the schema refuses. The layer is replaced exactly first (a JSON
      // patch `add` replaces a member that exists), then applied, so ichor's apply owns it all.
      await kube.request('PATCH', `/apis/${INSTALLATION.apiVersion}/${INSTALLATION.plural}/${INSTALLATION.name}`, {
        body: [{op: 'add', path: `/spec/stack/${component}/values`, value: values}],
        contentType: 'application/json-patch+json',
        query: {fieldManager: FIELD_MANAGER, fieldValidation: 'Strict'},
      })
      const spec = {...cr.spec, stack: {...cr.spec.stack, [component]: {values}}}
      await serverSideApply(kube, [{apiVersion: INSTALLATION.apiVersion, kind: INSTALLATION.kind, metadata: {name: INSTALLATION.name}, spec}])
    },
  }
}

export async function runStackValuesSetPlan(o: StackValuesSetOptions): Promise<StackValuesSetResult> {
  const session = openSession({command: 'stack values set', kubeconfig: o.kubeconfig, context: o.context, registryEndpoint: o.registryEndpoint})
  try {
    await session.clusterAnswers()
    const stored = (await requireInstallation(session)).spec.stack[o.component].values ?? {}
    const values = dropNulls(deepMerge(stored, o.values))
    // Render before anything is touched: invalid values are exit 2 with nothing changed.
    const stack = await renderStackFromInstallation(session, o.sources, {component: o.component, values}).catch((error: unknown) => {
      if (error instanceof ValidationError) throw new ValidationError(`${o.component} values are invalid, nothing was changed`, error.issues)
      throw error
    })
    const later = async () => stack
    const steps = [
      leaseTask({session, breakLock: o.breakLock}),
      storeValuesTask(session, o.component, values),
      publishBundlesTask({session, stack: later}),
      closeRegistryTunnelTask({session}),
      ordersTask({session, stack: later}),
      waitApplicationsTask({session, stack: later, timeoutMs: o.timeoutMs}),
      recordStatusTask({session, release: ciliumReleaseView(session), stack: later}),
    ]
    const result = await runTasks(steps, {output: o.output, dryRun: o.dryRun, guard: () => session.guard()})
    const c = stack.components[o.component]
    return {...result, component: o.component, tag: c.bundle.tag, digest: c.bundle.artifact.manifestDigest}
  } finally {
    await session.close()
  }
}

/** `--set a.b=null` removes a key from the stored layer (it stays a user layer, not a chart override). */
function dropNulls(v: Values): Values {
  const out: Values = {}
  for (const [k, x] of Object.entries(v)) {
    if (x === null) continue
    out[k] = x && typeof x === 'object' && !Array.isArray(x) ? dropNulls(x as Values) : x
  }
  return out
}
