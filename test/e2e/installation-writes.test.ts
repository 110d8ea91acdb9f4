// Every step that writes the IchorInstallation writes over the version it read: a change landing
// between its read and its write (another ichor that broke the Lease, a kubectl edit) is a
// conflict (exit 3) naming what changed, never silently overwritten. Against the real
// kube-apiserver, which enforces the resourceVersion precondition of a server-side apply.
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {startControlPlane, type ControlPlane} from '../harness/apiserver.js'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {INSTALLATION} from '../../src/lib/constants.js'
import {EXIT} from '../../src/lib/errors/exit-codes.js'
import type {Session} from '../../src/lib/session/session.js'
import {installationCrd, readInstallation, writeInstallationSpec, writeInstallationStatus, type InstallationSpec} from '../../src/lib/state/installation.js'
import {serverSideApply} from '../../src/lib/kube/apply.js'
import type {KubeObject} from '../../src/lib/kube/objects.js'
import {recordKubeProxyModeTask} from '../../src/lib/cilium/kube-proxy.js'
import {recordStatusTask} from '../../src/lib/plans/steps/state.js'
import type {CiliumReleaseView} from '../../src/lib/cilium/tasks.js'
import type {PreparedStack} from '../../src/lib/stack/prepare.js'

let cp: ControlPlane
let kube: Kube

const spec: InstallationSpec = {
  talos: {clusterName: 'c', endpoint: 'https://10.5.0.2:6443', talosVersion: 'v1.11.0', kubernetesVersion: 'v1.34.0', controlPlanes: ['10.5.0.2'], workers: []},
  cni: {kubeProxy: 'kube-proxy', tunnel: 'vxlan', cilium: {values: {}}},
  stack: {promotion: 'Automatic', argocd: {values: {}}, kokumi: {values: {}}},
}

beforeAll(async () => {
  cp = await startControlPlane({controllers: false})
  kube = await connectKube({kubeconfig: cp.kubeconfigPath})
})
afterAll(async () => {
  await cp?.stop()
})

/** A session whose client lets `meanwhile` write (as another writer would) just before this step's first write. */
function racingSession(meanwhile: () => Promise<void>): Session {
  let raced = false
  const racing = new Proxy(kube, {
    get(target, prop, receiver) {
      if (prop !== 'request') return Reflect.get(target, prop, receiver)
      return async (method: string, path: string, options?: unknown) => {
        if (method !== 'GET' && !raced) {
          raced = true
          await meanwhile()
        }
        return target.request(method, path, options as never)
      }
    },
  })
  return {kube: async () => racing} as unknown as Session
}

/** Someone else's change (a node added), made with the plain client (no precondition). */
async function otherWriter(): Promise<void> {
  const cr = await readInstallation(kube)
  await writeInstallationSpec(kube, {...cr!.spec, talos: {...cr!.spec.talos, workers: ['10.5.0.3']}}, {crd: false})
}

async function fresh(): Promise<void> {
  await writeInstallationSpec(kube, spec)
  await writeInstallationStatus(kube, {cni: {}, stack: {}})
}

describe('IchorInstallation writes carry the version they read', () => {
  it('record-mode (the kube-proxy switch) refuses to write over a change made after its read: exit 3, the other change kept', async () => {
    await fresh()
    const task = recordKubeProxyModeTask({session: racingSession(otherWriter), target: 'replaced'})
    const error = await task
      .run(() => {})
      .then(
        () => undefined,
        (e: unknown) => e,
      )
    expect(error, 'the write landed over a change it never saw').toBeDefined()
    expect((error as {exitCode?: number}).exitCode).toBe(EXIT.lease)
    expect(String((error as Error).message)).toMatch(/changed since this command read it.*spec\.talos\.workers/)
    const now = await readInstallation(kube)
    expect(now?.spec.talos.workers).toEqual(['10.5.0.3'])
    expect(now?.spec.cni.kubeProxy).toBe('kube-proxy')
    // Without a race it writes.
    await recordKubeProxyModeTask({session: racingSession(async () => {}), target: 'replaced'}).run(() => {})
    expect((await readInstallation(kube))?.spec.cni.kubeProxy).toBe('replaced')
  })

  it('record-status refuses to write over a status change made after its read: exit 3, the other change kept', async () => {
    await fresh()
    const release = {get: async () => undefined} as unknown as CiliumReleaseView
    const stack = async () => ({components: {}, promotion: 'Automatic', secretRefs: []}) as unknown as PreparedStack
    const shown = async () => {
      await writeInstallationStatus(kube, {cni: {}, stack: {}, kokumiAdminPasswordShown: true})
    }
    const error = await recordStatusTask({session: racingSession(shown), release, stack})
      .run(() => {})
      .then(
        () => undefined,
        (e: unknown) => e,
      )
    expect(error, 'the status write landed over a change it never saw').toBeDefined()
    expect((error as {exitCode?: number}).exitCode).toBe(EXIT.lease)
    expect((await readInstallation(kube))?.status?.kokumiAdminPasswordShown).toBe(true)
    // Without a race it writes, keeping what it read.
    await recordStatusTask({session: racingSession(async () => {}), release, stack}).run(() => {})
    const after = await readInstallation(kube)
    expect(after?.status?.kokumiAdminPasswordShown).toBe(true)
    expect(after?.metadata.name).toBe(INSTALLATION.name)
  })
})

describe('an emptied user layer', () => {
  it('is stored as an empty map when the last key is removed (server-side apply of {} over owned keys)', async () => {
    await fresh()
    const withKey = await readInstallation(kube)
    const written = await writeInstallationSpec(
      kube,
      {...withKey!.spec, cni: {...withKey!.spec.cni, cilium: {values: {debug: {enabled: true}}}}},
      {readAt: withKey},
    )
    await writeInstallationSpec(kube, {...written!.spec, cni: {...written!.spec.cni, cilium: {values: {}}}}, {readAt: written})
    expect((await readInstallation(kube))?.spec.cni.cilium.values).toEqual({})
  })
})

describe('a cluster whose IchorInstallation CRD an older ichor installed', () => {
  /** The CRD as ichor wrote it before its values layers were atomic maps. */
  function olderCrd(): KubeObject {
    return JSON.parse(JSON.stringify(installationCrd()).replaceAll(',"x-kubernetes-map-type":"atomic"', '')) as KubeObject
  }

  it('gets the current CRD with a day-2 write, so emptying a layer is not refused', async () => {
    const older = olderCrd()
    expect(JSON.stringify(older)).not.toContain('atomic') // the fixture really is the older schema
    await serverSideApply(kube, [older], {crdWait: {timeoutMs: 30_000}})
    await writeInstallationSpec(kube, {...spec, cni: {...spec.cni, cilium: {values: {debug: {enabled: true}}}}}, {crd: false})
    const withKey = await readInstallation(kube)
    // A day-2 write (cni values set --replace with an empty file writes this).
    await writeInstallationSpec(kube, {...withKey!.spec, cni: {...withKey!.spec.cni, cilium: {values: {}}}}, {readAt: withKey})
    expect((await readInstallation(kube))?.spec.cni.cilium.values).toEqual({})
  })
})
