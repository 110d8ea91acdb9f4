// The generated passwords live twice: ichor's copy in ichor-system (so a rerun never mints a
// new one) and the component's own Secret (`kokumi/kokumi-server-auth` holds the bcrypt hash of
// the Kokumi admin password, `argocd/argocd-redis` the redis password). When ichor's copy is
// deleted or no longer matches, a rerun must not mint and show a password the running component
// does not accept: the mismatch is found here, reported, and repaired by one command that
// writes a new password to both sides.
import {randomBytes} from 'node:crypto'
import {FIELD_MANAGER, ICHOR_SYSTEM, MANAGED_BY, STATE_SECRETS, ARGOCD_NAMESPACE} from '../constants.js'
import {IchorError} from '../errors/errors.js'
import {serverSideApply} from '../kube/apply.js'
import type {Kube} from '../kube/client.js'
import {getObject, listObjects, type KubeObject} from '../kube/objects.js'
import {deploymentRolloutState, statefulSetRolloutState, waitForDeploymentRollout, waitForStatefulSetReady, type Observation} from '../kube/wait.js'
import type {Session} from '../session/session.js'
import {holds, missing} from '../tasks/probe.js'
import type {Task} from '../tasks/types.js'
import {bcryptHash, bcryptVerify, bindingHolds, deriveSalt, hashBinding} from './bcrypt.js'
import {KOKUMI_OBJECTS} from './kokumi.js'
import type {StackComponent} from '../state/installation-types.js'

const REPAIR_SECRETS_COMMAND = 'ichor stack repair-secrets'

type SecretObject = KubeObject & {data?: Record<string, string>}

/** One generated Secret whose two sides disagree. */
export interface SecretMismatch {
  component: StackComponent
  /** `ichor-system/ichor-kokumi-admin` */
  secret: string
  /** The component's side, `kokumi/kokumi-server-auth`. */
  componentSecret: string
  message: string
}

const PAIRS = {
  kokumi: {ichor: STATE_SECRETS.kokumiAdmin, namespace: 'kokumi', name: KOKUMI_OBJECTS.serverAuthSecret},
  argocd: {ichor: STATE_SECRETS.argocdRedis, namespace: ARGOCD_NAMESPACE, name: 'argocd-redis'},
} as const

async function readStrings(kube: Kube, namespace: string, name: string): Promise<Record<string, string> | undefined> {
  const s = await getObject<SecretObject>(kube, {apiVersion: 'v1', kind: 'Secret', name, namespace})
  return s && Object.fromEntries(Object.entries(s.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]))
}

/** Whether ichor's copy opens the component's Secret; undefined when the component has none yet (init creates both). */
async function checkPair(kube: Kube, component: StackComponent): Promise<SecretMismatch | undefined> {
  const pair = PAIRS[component]
  const [held, live] = await Promise.all([readStrings(kube, ICHOR_SYSTEM, pair.ichor), readStrings(kube, pair.namespace, pair.name)])
  const secret = `${ICHOR_SYSTEM}/${pair.ichor}`
  const componentSecret = `${pair.namespace}/${pair.name}`
  const liveValue = component === 'kokumi' ? live?.['password-hash'] : live?.auth
  if (!liveValue) return undefined
  const mismatch = (why: string): SecretMismatch => ({
    component,
    secret,
    componentSecret,
    message: `Secret ${secret} ${why}: ichor will not mint a password ${componentSecret} does not accept; run ${REPAIR_SECRETS_COMMAND} to set a new one on both sides`,
  })
  if (!held?.password)
    return mismatch(`is missing while ${componentSecret} holds the running ${component === 'kokumi' ? 'Kokumi admin' : 'Argo CD redis'} password`)
  const matches = component === 'kokumi' ? opensKokumiHash(held, liveValue).matches : held.password === liveValue
  return matches ? undefined : mismatch(`does not match ${componentSecret}`)
}

/**
 * Whether ichor's copy (`held`) opens the hash Kokumi holds. The hash ichor wrote, kept bound
 * to the password in its copy (bcrypt.ts hashBinding), answers without bcrypt when Kokumi still
 * holds exactly it; anything else (an older copy without it, a password edited by hand, a hash
 * Kokumi got elsewhere) is decided by bcrypt itself.
 */
export function opensKokumiHash(held: Record<string, string>, liveHash: string): {matches: boolean; by: 'binding' | 'bcrypt'} {
  const password = held.password ?? ''
  const stored = held['password-hash']
  const binding = held['password-hash-binding']
  if (stored && binding && stored === liveHash && bindingHolds(password, stored, binding)) return {matches: true, by: 'binding'}
  try {
    return {matches: bcryptVerify(password, liveHash), by: 'bcrypt'}
  } catch {
    return {matches: false, by: 'bcrypt'} // not a bcrypt hash: certainly not ichor's
  }
}

/** Every generated Secret whose two sides disagree (read-only). */
export async function findSecretMismatches(kube: Kube, components: readonly StackComponent[] = ['kokumi', 'argocd']): Promise<SecretMismatch[]> {
  const found = await Promise.all(components.map((c) => checkPair(kube, c)))
  return found.filter((m): m is SecretMismatch => m !== undefined)
}

/** The error a run stops with when a generated Secret no longer matches its component. */
export function secretMismatchError(mismatches: SecretMismatch[]): IchorError {
  return new IchorError(mismatches.map((m) => m.message).join('\n'), {
    hint: `run ${REPAIR_SECRETS_COMMAND} (it writes a new password to both sides and shows the Kokumi admin password once), then rerun`,
  })
}

/** What the repair wrote, for the summary: the Kokumi admin password only on the run that set it. */
export interface RepairOutcome {
  kokumiAdminPassword?: string
  repaired: string[]
}

/** `kubectl rollout restart`'s annotation: the consumers read the password at start. */
const RESTARTED_AT = 'kubectl.kubernetes.io/restartedAt'

/** Deployments and StatefulSets of `namespace` whose pods read Secret `name`. */
async function consumersOf(kube: Kube, namespace: string, name: string): Promise<KubeObject[]> {
  const out: KubeObject[] = []
  for (const kind of ['Deployment', 'StatefulSet']) {
    for (const w of await listObjects(kube, {apiVersion: 'apps/v1', kind, namespace})) {
      const pod = (w as KubeObject & {spec?: {template?: {spec?: unknown}}}).spec?.template?.spec
      if (pod && JSON.stringify(pod).includes(`"${name}"`)) out.push(w)
    }
  }
  return out
}

/**
 * Writes a new password to both sides of one generated Secret, then restarts what reads it.
 * ichor's copy is written last: a run killed before it leaves the mismatch detectable, and the
 * rerun simply sets another password.
 */
async function repairPair(kube: Kube, component: StackComponent, outcome: RepairOutcome): Promise<void> {
  const pair = PAIRS[component]
  const password = randomBytes(component === 'kokumi' ? 18 : 24).toString('base64url')
  const live = (await readStrings(kube, pair.namespace, pair.name)) ?? {}
  const held = (await readStrings(kube, ICHOR_SYSTEM, pair.ichor)) ?? {}
  let ichorData: Record<string, string>
  let liveData: Record<string, string>
  if (component === 'kokumi') {
    const signingKey = live['signing-key'] || held['signing-key'] || randomBytes(32).toString('base64url')
    const hash = bcryptHash(password, deriveSalt(password, signingKey))
    liveData = {'password-hash': hash, 'signing-key': signingKey}
    ichorData = {
      username: live.username || 'admin',
      password,
      'signing-key': signingKey,
      'password-hash': hash,
      'password-hash-binding': hashBinding(password, hash),
    }
  } else {
    liveData = {auth: password}
    ichorData = {password}
  }
  const encode = (d: Record<string, string>) => Object.fromEntries(Object.entries(d).map(([k, v]) => [k, Buffer.from(v, 'utf8').toString('base64')]))
  await kube.request('PATCH', `/api/v1/namespaces/${pair.namespace}/secrets/${pair.name}`, {
    body: {data: encode(liveData)},
    contentType: 'application/merge-patch+json',
    query: {fieldManager: FIELD_MANAGER, fieldValidation: 'Strict'},
  })
  await serverSideApply(
    kube,
    [
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: {name: pair.ichor, namespace: ICHOR_SYSTEM, labels: {...MANAGED_BY}},
        type: 'Opaque',
        data: encode(ichorData),
      } as KubeObject,
    ],
    {force: true},
  )
  const now = new Date().toISOString()
  for (const w of await consumersOf(kube, pair.namespace, pair.name)) {
    const plural = w.kind === 'Deployment' ? 'deployments' : 'statefulsets'
    await kube.request('PATCH', `/apis/apps/v1/namespaces/${pair.namespace}/${plural}/${w.metadata.name}`, {
      body: {spec: {template: {metadata: {annotations: {[RESTARTED_AT]: now}}}}},
      contentType: 'application/strategic-merge-patch+json',
      query: {fieldManager: FIELD_MANAGER},
    })
  }
  if (component === 'kokumi') outcome.kokumiAdminPassword = password
  outcome.repaired.push(`${ICHOR_SYSTEM}/${pair.ichor}`)
}

export function repairSecretTask(p: {session: Session; component: StackComponent; outcome: RepairOutcome}): Task {
  const pair = PAIRS[p.component]
  return {
    id: `repair-${pair.ichor}`,
    title: `Make ${ICHOR_SYSTEM}/${pair.ichor} and ${pair.namespace}/${pair.name} agree (a new password on both sides)`,
    async probe() {
      const [m] = await findSecretMismatches(await p.session.kube(), [p.component])
      return m
        ? missing(`${m.secret} does not open ${m.componentSecret}`)
        : holds(`${ICHOR_SYSTEM}/${pair.ichor} matches ${pair.namespace}/${pair.name} (or the component has none yet)`)
    },
    async run() {
      await repairPair(await p.session.kube(), p.component, p.outcome)
    },
  }
}

/** The rollout of one consumer, read once (`kubectl rollout status`'s rules, ../kube/wait.ts). */
function consumerRollout(w: KubeObject): Observation {
  const rule = w.kind === 'Deployment' ? deploymentRolloutState : statefulSetRolloutState
  try {
    return rule(w as Parameters<typeof rule>[0])
  } catch (error) {
    return {done: false, state: (error as Error).message}
  }
}

/**
 * After the repair restarted the consumers (`restartedAt` on their pod templates), wait for their
 * rollouts: until then the old pods still hold the old password, and Argo CD reads the
 * Applications Progressing. The probe only reads the workloads.
 */
export function waitSecretConsumersTask(p: {session: Session; timeoutMs: number; components?: readonly StackComponent[]}): Task {
  const components = p.components ?? (['kokumi', 'argocd'] as const)
  const consumers = async (kube: Kube) => (await Promise.all(components.map((c) => consumersOf(kube, PAIRS[c].namespace, PAIRS[c].name)))).flat()
  return {
    id: 'wait-secret-consumers',
    title: 'Wait for the workloads that read the generated Secrets to roll out',
    mutating: false,
    async probe() {
      const all = await consumers(await p.session.kube())
      for (const w of all) {
        const o = consumerRollout(w)
        if (!o.done) return missing(`${w.kind} ${w.metadata.namespace}/${w.metadata.name}: ${o.state}`)
      }
      return holds(`${all.length} workloads rolled out`)
    },
    async run(progress) {
      const kube = await p.session.kube()
      const deadline = Date.now() + p.timeoutMs
      for (const w of await consumers(kube)) {
        const wait = w.kind === 'Deployment' ? waitForDeploymentRollout : waitForStatefulSetReady
        await wait(kube, w.metadata.namespace!, w.metadata.name, {
          timeoutMs: Math.max(deadline - Date.now(), 1000),
          onProgress: (m) => progress(`${w.kind} ${w.metadata.namespace}/${w.metadata.name}: ${m}`),
        })
      }
    },
  }
}
