// `ichor stack values set argocd|kokumi`: a new user layer for one component goes through the
// values engine, is stored in the IchorInstallation, rendered and published as a new bundle
// (new tag and digest), and the component's Order moves to it. Once the Order exists nothing
// is applied directly: Kokumi renders, Argo CD syncs. The same values twice change nothing.
import {storeStackValuesTask} from '../stack/values-tasks.js'
import {isDeepStrictEqual} from 'node:util'
import {ciliumReleaseView} from '../cilium/tasks.js'
import {checkStackValuesInput} from './local-input.js'
import {withSession, type Session} from '../session/session.js'
import {closeRegistryTunnelTask} from '../session/tasks.js'
import {checkStackArtifacts, type StackArtifactSources, type StackRender} from '../stack/from-installation.js'
import {checkEditBase, diffStackValues, editStackValues, renderWithValues, type StackValuesDiff} from '../stack/values.js'
import {newUserLayer, type ReadValuesInput, type ValuesInput} from '../values/layer.js'
import {STACK_COMPONENTS, type StackComponent} from '../state/installation-types.js'
import {ordersTask, publishBundlesTask, waitApplicationsTask} from '../stack/install-tasks.js'
import {rerenderTask} from '../stack/sync-tasks.js'
import {readOrder} from '../stack/delivery.js'
import type {PreparedStack} from '../stack/prepare.js'
import {requireInstallation, type Installation} from '../state/installation.js'
import {recordStatusTask} from './steps/state.js'
import type {OutputMode, RunResult} from '../tasks/types.js'
import type {Later} from '../tasks/types.js'
import type {Values} from '../values/path.js'
import {runOptions, runPlan, type Plan} from './run.js'
import {once} from '../tasks/memo.js'

export interface StackValuesSetOptions {
  component: StackComponent
  /** The -f files, --set and KEY=VALUE arguments, merged onto the stored layer (a null removes a key). */
  input: ValuesInput
  kubeconfig?: string
  context?: string
  registryEndpoint?: string
  sources: StackArtifactSources
  timeoutMs: number
  output: OutputMode
  dryRun: boolean
  breakLock?: boolean
  yes: boolean
  json: boolean
}

export interface StackValuesSetResult extends RunResult {
  component: StackComponent
  tag: string
  digest: string
  /** Promotion Manual: what was published and waits for `ichor stack promote`, one line per component. */
  awaitingApproval: string[]
}

/** `stack values edit` with the buffer left unchanged. */
export interface StackValuesUnchanged {
  changed: false
  component: StackComponent
  awaitingApproval?: undefined
}

/** The stored user layer of one component. */
export async function getStackValues(o: {component: StackComponent; kubeconfig?: string; context?: string}): Promise<Values> {
  return withSession(
    {command: 'stack values get', kubeconfig: o.kubeconfig, context: o.context},
    async (session) => (await requireInstallation(await session.kube())).spec.stack[o.component].values ?? {},
  )
}

/** The stored layer and the new one, read under the Lease, and the stack rendered with it. */
interface Prepared {
  cr: Installation
  values: Values
  stack: StackRender
}

/** What the set plan reads before its steps: the layer and the stack rendered with it (invalid values are exit 2, nothing changed). */
interface SetPreparation {
  /** The stored layer and the new one, read again under the Lease. */
  prepared: Later<Prepared>
  later: Later<StackRender>
}

export function stackValuesSetPlan(o: StackValuesSetOptions): Plan<SetPreparation, StackValuesSetResult, ReadValuesInput> {
  const awaiting = new Map<StackComponent, string>()
  return {
    command: 'stack values set',
    session: {kubeconfig: o.kubeconfig, context: o.context, registryEndpoint: o.registryEndpoint},
    checkLocal: () => checkStackValuesInput(o.component, o.input), // this machine's input first: exit 2 even when the cluster is down
    async prepare({session}, input) {
      const read = async () => {
        const cr = await requireInstallation(await session.kube())
        const stored = cr.spec.stack[o.component].values ?? {}
        if (input.kind === 'layer') checkEditBase(o.component, stored, input.base)
        return {cr, values: dropNulls(newUserLayer(stored, input))}
      }
      // Render before anything is touched: invalid values are exit 2 with nothing changed.
      const first = await read()
      const firstStack = await renderWithValues(session, o.sources, o.component, first.values)
      // What is stored is read again once the Lease is held (its first step): a change another
      // command stored after the read above is merged, not overwritten. The render is reused
      // when the stored desired state did not move.
      const prepared = once((): Promise<Prepared> =>
        read().then(async (now) => ({
          ...now,
          stack: isDeepStrictEqual(now.cr.spec, first.cr.spec) ? firstStack : await renderWithValues(session, o.sources, o.component, now.values),
        })),
      )
      return {prepared, later: async () => (await prepared()).stack}
    },
    consent: () => `Store the new ${o.component} values, publish a new ${o.component} bundle and move Order ${o.component} to it?`,
    steps: ({prepared, later}, {session}) => [
      storeStackValuesTask(session, o.component, prepared),
      publishBundlesTask({session, stack: later}),
      // After a registry wipe the Preparations of Orders this run does not move are gone too:
      // Argo CD could never sync them, so the wait below would only time out. Render them again
      // first (the bundles they pull were just published back, at their digests).
      rerenderTask({session, components: async () => unmovedOrders(session, await later()), timeoutMs: o.timeoutMs}),
      closeRegistryTunnelTask({session}),
      ordersTask({session, stack: later}),
      waitApplicationsTask({session, stack: later, timeoutMs: o.timeoutMs, awaiting}),
      recordStatusTask({session, release: ciliumReleaseView(session), stack: later, artifacts: async () => (await later()).artifacts}),
    ],
    async result(run, {later}) {
      const c = (await later()).components[o.component]
      return {...run, component: o.component, tag: c.bundle.tag, digest: c.bundle.artifact.manifestDigest, awaitingApproval: [...awaiting.values()]}
    },
  }
}

export function runStackValuesSetPlan(o: StackValuesSetOptions): Promise<StackValuesSetResult> {
  return runPlan(stackValuesSetPlan(o), runOptions(o))
}

/** The components whose Order already asks for the tag this run publishes (the Order step leaves them as they are). */
async function unmovedOrders(session: Session, stack: PreparedStack): Promise<StackComponent[]> {
  const kube = await session.kube()
  const out: StackComponent[] = []
  for (const c of STACK_COMPONENTS)
    if (((await readOrder(kube, c))?.spec as {source?: {version?: string}} | undefined)?.source?.version === stack.components[c].bundle.tag) out.push(c)
  return out
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

/** `ichor stack values diff`: opens a session, diffs, closes. Changes nothing. */
export async function runStackValuesDiff(
  o: Pick<StackValuesSetOptions, 'component' | 'input' | 'kubeconfig' | 'context' | 'registryEndpoint' | 'sources'>,
): Promise<StackValuesDiff> {
  const input = checkStackValuesInput(o.component, o.input) // this machine's input first: exit 2 even when the cluster is down
  return withSession({command: 'stack values diff', kubeconfig: o.kubeconfig, context: o.context, registryEndpoint: o.registryEndpoint}, (session) =>
    diffStackValues(session, o.component, input, o.sources),
  )
}

/** `ichor stack values edit`: the set plan with an editor first, in its session (no Lease held while it is open). */
export function runStackValuesEdit(o: Omit<StackValuesSetOptions, 'dryRun'>): Promise<StackValuesSetResult | StackValuesUnchanged> {
  const options = {...o, dryRun: false}
  const plan: Plan<SetPreparation, StackValuesSetResult, ReadValuesInput, StackValuesUnchanged> = {
    ...stackValuesSetPlan(options),
    command: 'stack values edit',
    edit: {
      async open({session}, seed) {
        // Unpinned artifacts are refused before the editor opens, not after the operator's edit.
        await checkStackArtifacts(session, o.sources)
        const edited = await editStackValues(session, o.component, {...o.sources, pinning: undefined}, seed)
        return edited.user && {kind: 'layer', user: edited.user, base: edited.base}
      },
      unchanged: () => ({changed: false, component: o.component}),
    },
  }
  return runPlan(plan, runOptions(options))
}
