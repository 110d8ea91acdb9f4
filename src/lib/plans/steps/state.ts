// Steps that write ichor's own state into the cluster: the desired state with the Talos
// bundle (so another machine can continue), and at the end the status of what was applied.
// They read every concern (talos, cilium, stack, state), so they live next to the plans.
import {isDeepStrictEqual} from 'node:util'
import {ICHOR_SYSTEM, STATE_SECRETS} from '../../constants.js'
import {readApplication, readOrder} from '../../stack/delivery.js'
import {createIfAbsent} from '../../kube/apply.js'
import {IchorError} from '../../errors/errors.js'
import {EXIT} from '../../errors/exit-codes.js'
import {isReachable} from '../../talos/talosctl.js'
import {otherBundleError} from '../../talos/tasks.js'
import {cniStatusOf, type CiliumReleaseView} from '../../cilium/tasks.js'
import type {Kube} from '../../kube/client.js'
import type {Session} from '../../session/session.js'
import type {PreparedStack} from '../../stack/prepare.js'
import {holds, missing} from '../../tasks/probe.js'
import type {Later, Task} from '../../tasks/types.js'
import {
  readInstallation,
  readTalosBundleSecret,
  writeInstallationSpec,
  writeInstallationStatus,
  type Installation,
  type InstallationSpec,
  type InstallationStatus,
} from '../../state/installation.js'
import {readStateFile, requireStateFile, type LocalState} from '../../state/local.js'
import {bundleOfSecret, sealedBundleSecret, storedFormatOf, TALOS_SECRET_NAME, type SecretWithData, type TalosBundle} from '../../state/sealed-bundle.js'
import type {StateKey} from '../../state/state-key.js'

/** The cluster holds a bundle other than this state folder's: the nodes run that one, never overwrite it. */
function otherStoredBundleError(state: LocalState): IchorError {
  return new IchorError(`the cluster's ${ICHOR_SYSTEM}/${STATE_SECRETS.talos} holds another Talos secrets bundle than ${state.secrets}`, {
    exitCode: EXIT.lease,
    hint: `another machine initialised this cluster: run ichor init with a new --state-dir and the cluster's kubeconfig, and it restores the stored bundle`,
  })
}

/**
 * Throws when the stored bundle is not the local one. `opened` is the bundle the plan already
 * opened before its steps: opening a sealed one again costs a scrypt run (seconds).
 */
async function requireSameBundle(stored: SecretWithData, local: Buffer, key: StateKey, state: LocalState, opened?: TalosBundle): Promise<void> {
  // The key is init's, already refused when short for a new bundle or warned about when it opened this one.
  const bundle =
    opened ??
    (
      await bundleOfSecret(
        stored,
        async () => key,
        () => undefined,
      )
    )?.bundle
  if (bundle && !bundle.secretsYaml.equals(local)) throw otherStoredBundleError(state)
}

export function storeDesiredStateTask(p: {
  session: Session
  spec: Later<InstallationSpec>
  state: LocalState
  stateKey: StateKey | undefined
  clusterBundle?: TalosBundle
  timeoutMs: number
}): Task {
  return {
    id: 'state-in-cluster',
    title: 'Install the IchorInstallation CRD and store the desired state and the Talos secrets (encrypted with age)',
    async probe() {
      const kube = await p.session.kube()
      const cr = await readInstallation(kube)
      if (!cr) return missing('no IchorInstallation yet')
      if (!isDeepStrictEqual(cr.spec, await p.spec())) return missing('the desired state differs from the stored one')
      const stored = await readTalosBundleSecret(kube)
      if (!stored) return missing('the Talos secrets are not in the cluster yet')
      // (A dry run from another machine has no local bundle yet: talos-secrets would restore this one.)
      const local = readStateFile(p.state, 'secrets')
      if (local.status === 'ok' && p.stateKey) await requireSameBundle(stored, Buffer.from(local.text), p.stateKey, p.state, p.clusterBundle)
      return storedFormatOf(stored) === 'sealed'
        ? holds('stored, the Talos secrets encrypted with age')
        : missing(`${TALOS_SECRET_NAME} is in plaintext (an older ichor wrote it): re-writing it encrypted with age`)
    },
    async run(progress) {
      const kube = await p.session.kube()
      if (!p.stateKey) throw new Error('storing the Talos bundle needs the state key (resolved before the plan)')
      const key = p.stateKey
      await writeInstallationSpec(kube, await p.spec(), {crdWait: {timeoutMs: p.timeoutMs}})
      // Never a cut-short bundle into the cluster: another machine would restore it.
      const bundle: TalosBundle = {
        secretsYaml: Buffer.from(requireStateFile(p.state, 'secrets')),
        talosconfig: Buffer.from(requireStateFile(p.state, 'talosconfig')),
      }
      const stored = await readTalosBundleSecret(kube)
      if (!stored) {
        // Only the bundle the nodes run: the first control plane must accept its talosconfig.
        const node = (await p.spec()).talos.controlPlanes[0]!
        const r = await isReachable(node, {talosconfig: p.state.talosconfig})
        if (r.ours !== true)
          throw r.ours === false
            ? otherBundleError(p.state, r)
            : new IchorError(
                `control plane ${node} did not accept the talosconfig in ${p.state.dir} (${r.state}${r.message ? `: ${r.message}` : ''}); the Talos secrets were not stored in the cluster`,
              )
        // Created, never overwritten: the cluster's bundle is the one its nodes trust.
        await createIfAbsent(kube, await sealedBundleSecret(bundle, key))
        const now = await readTalosBundleSecret(kube)
        if (now) await requireSameBundle(now, bundle.secretsYaml, key, p.state)
        return
      }
      await requireSameBundle(stored, bundle.secretsYaml, key, p.state, p.clusterBundle)
      if (storedFormatOf(stored) === 'sealed') return
      // An older ichor's plaintext copy: the same bundle, sealed, replaces it (resourceVersion-guarded).
      const sealed = await sealedBundleSecret(bundle, key)
      await kube.request('PUT', `/api/v1/namespaces/${ICHOR_SYSTEM}/secrets/${STATE_SECRETS.talos}`, {
        body: {...sealed, metadata: {...sealed.metadata, resourceVersion: stored.metadata.resourceVersion}},
      })
      progress(`${TALOS_SECRET_NAME} was in plaintext (an older ichor wrote it): re-written encrypted with age`)
    },
  }
}

async function observedStatus(
  kube: Kube,
  recorded: InstallationStatus | undefined,
  release: CiliumReleaseView,
  stack: PreparedStack,
  installed?: InstallationStatus['artifacts'],
): Promise<InstallationStatus> {
  const record = await release.get()
  const shown = recorded?.kokumiAdminPasswordShown
  // What this command installed, over the record (a command that installs none keeps it).
  const artifacts = installed ? {...recorded?.artifacts, ...installed} : recorded?.artifacts
  const status: InstallationStatus = {
    cni: cniStatusOf(record),
    stack: {},
    // Not observed: kept as recorded (the password is shown once).
    ...(shown === undefined ? {} : {kokumiAdminPasswordShown: shown}),
    ...(artifacts === undefined ? {} : {artifacts}),
    // Recorded by `kubernetes upgrade` only: kept as recorded.
    ...(recorded?.kubernetes === undefined ? {} : {kubernetes: recorded.kubernetes}),
    // Recorded by `talos upgrade` only (an unfinished one's node and cordons too): kept as recorded.
    ...(recorded?.talos === undefined ? {} : {talos: recorded.talos}),
  }
  for (const c of Object.values(stack.components)) {
    const [app, order] = await Promise.all([readApplication(kube, c.component), readOrder(kube, c.component)])
    status.stack[c.component] = {
      publishedTag: c.bundle.tag,
      digest: c.bundle.artifact.manifestDigest,
      orderReady: order?.ready ?? false,
      applicationSync: app?.sync ?? 'Unknown',
      applicationHealth: app?.health ?? 'Unknown',
    }
  }
  return status
}

export function recordStatusTask(p: {
  session: Session
  release: CiliumReleaseView
  stack: Later<PreparedStack>
  artifacts?: Later<InstallationStatus['artifacts']>
}): Task {
  const observed = async (kube: Kube, cr: Installation | undefined) => observedStatus(kube, cr?.status, p.release, await p.stack(), await p.artifacts?.())
  return {
    id: 'record-status',
    title: 'Record what was applied in the IchorInstallation status',
    async probe() {
      const kube = await p.session.kube()
      const cr = await readInstallation(kube)
      return isDeepStrictEqual(cr?.status, await observed(kube, cr)) ? holds('status is current') : missing('status is out of date')
    },
    async run() {
      const kube = await p.session.kube()
      const cr = await readInstallation(kube)
      if (!cr) throw new IchorError('the IchorInstallation is gone')
      // Over the version read: what another writer recorded meanwhile (the password shown, a
      // Kubernetes version) is a conflict (exit 3), not dropped.
      await writeInstallationStatus(kube, await observed(kube, cr), {readAt: cr})
    },
  }
}
