// Steps that write ichor's own state into the cluster: the desired state with the Talos
// bundle (so another machine can continue), and at the end the status of what was applied.
import {isDeepStrictEqual} from 'node:util'
import {ICHOR_SYSTEM, STATE_SECRETS} from '../constants.js'
import {readApplication, readOrder} from '../health/reads.js'
import {createIfAbsent} from '../kube/apply.js'
import {getObject} from '../kube/objects.js'
import {cniStatusOf, type CiliumReleaseView} from '../cilium/tasks.js'
import type {Session} from '../session/session.js'
import type {PreparedStack} from '../stack/prepare.js'
import {holds, missing} from '../tasks/probe.js'
import type {Later, Task} from '../tasks/types.js'
import {readInstallation, readTalosBundleSecret, writeInstallationSpec, writeInstallationStatus, type InstallationSpec, type InstallationStatus} from './installation.js'
import {requireStateFile, type LocalState} from './local.js'
import {bundleOfSecret, sealedBundleSecret, storedFormatOf, TALOS_SECRET_NAME} from './sealed-bundle.js'
import type {StateKey} from './state-key.js'

export function storeDesiredStateTask(p: {session: Session; spec: Later<InstallationSpec>; state: LocalState; stateKey: StateKey | undefined; timeoutMs: number}): Task {
  return {
    id: 'state-in-cluster',
    title: 'Install the IchorInstallation CRD and store the desired state and the Talos secrets (encrypted with age)',
    async probe() {
      const kube = await p.session.kube()
      const cr = await readInstallation(kube)
      if (!cr) return missing('no IchorInstallation yet')
      if (!isDeepStrictEqual(cr.spec, await p.spec())) return missing('the desired state differs from the stored one')
      const secret = await getObject(kube, {apiVersion: 'v1', kind: 'Secret', name: STATE_SECRETS.talos, namespace: ICHOR_SYSTEM}, {metadataOnly: true})
      if (!secret) return missing('the Talos secrets are not in the cluster yet')
      return storedFormatOf(secret) === 'sealed' ? holds('stored, the Talos secrets encrypted with age') : missing(`${TALOS_SECRET_NAME} is in plaintext (an older ichor wrote it): re-writing it encrypted with age`)
    },
    async run(progress) {
      const kube = await p.session.kube()
      if (!p.stateKey) throw new Error('storing the Talos bundle needs the state key (resolved before the plan)')
      const key = p.stateKey
      await writeInstallationSpec(kube, await p.spec(), {crdWait: {timeoutMs: p.timeoutMs}})
      const stored = await readTalosBundleSecret(kube)
      if (!stored) {
        // Never a cut-short bundle into the cluster: another machine would restore it.
        const bundle = {secretsYaml: Buffer.from(requireStateFile(p.state, 'secrets')), talosconfig: Buffer.from(requireStateFile(p.state, 'talosconfig'))}
        // Created, never overwritten: the cluster's bundle is the one its nodes trust.
        await createIfAbsent(kube, await sealedBundleSecret(bundle, key))
        return
      }
      if (storedFormatOf(stored) === 'sealed') return
      // An older ichor's plaintext copy: the same bundle, sealed, replaces it (resourceVersion-guarded).
      const opened = await bundleOfSecret(stored, async () => key)
      if (!opened) throw new Error(`${TALOS_SECRET_NAME} holds no whole bundle; delete it so that this run stores the local one`)
      const sealed = await sealedBundleSecret(opened.bundle, key)
      await kube.request('PUT', `/api/v1/namespaces/${ICHOR_SYSTEM}/secrets/${STATE_SECRETS.talos}`, {
        body: {...sealed, metadata: {...sealed.metadata, resourceVersion: stored.metadata.resourceVersion}},
      })
      progress(`${TALOS_SECRET_NAME} was in plaintext (an older ichor wrote it): re-written encrypted with age`)
    },
  }
}

async function observedStatus(session: Session, release: CiliumReleaseView, stack: PreparedStack): Promise<InstallationStatus> {
  const kube = await session.kube()
  const record = await release.get()
  const shown = (await readInstallation(kube))?.status?.kokumiAdminPasswordShown
  const status: InstallationStatus = {
    cni: cniStatusOf(record),
    stack: {},
    // Not observed: kept as recorded (the password is shown once).
    ...(shown === undefined ? {} : {kokumiAdminPasswordShown: shown}),
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

export function recordStatusTask(p: {session: Session; release: CiliumReleaseView; stack: Later<PreparedStack>}): Task {
  return {
    id: 'record-status',
    title: 'Record what was applied in the IchorInstallation status',
    async probe() {
      const cr = await readInstallation(await p.session.kube())
      return isDeepStrictEqual(cr?.status, await observedStatus(p.session, p.release, await p.stack())) ? holds('status is current') : missing('status is out of date')
    },
    async run() {
      await writeInstallationStatus(await p.session.kube(), await observedStatus(p.session, p.release, await p.stack()))
    },
  }
}
