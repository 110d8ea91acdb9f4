// Security points of issue 13 on one harness cluster (see test/harness/README.md for what is
// real and what is simulated): the Kokumi admin password shown once, after all; the
// registry's network policies in place before the registry can answer; the Talos admin bundle
// kept in the cluster sealed with age (an older ichor's plaintext copy re-sealed by a rerun,
// another state folder restored with the passphrase, a wrong passphrase refused).
import {existsSync, readFileSync, statSync, writeFileSync} from 'node:fs'
import {dirname, join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {parse as parseYaml} from 'yaml'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {getObject, listObjects, type KubeObject} from '../../src/lib/kube/objects.js'
import {untarSync} from '../../src/lib/chart/archive.js'
import {buildBundle} from '../../src/lib/oci/bundle.js'
import {OciClient} from '../../src/lib/oci/client.js'
import {publishBundle} from '../../src/lib/oci/publish.js'
import {policiesFor} from '../../src/lib/stack/policies.js'
import {jsonEvents, jsonResult, runIchor, startHarnessCluster, type CliRun, type HarnessCluster} from '../harness/cluster.js'
import {ownedBy} from '../harness/pod-start-simulator.js'
import {bundleOfSecret, sealedBundleSecret} from '../../src/lib/state/sealed-bundle.js'
import {readStateKeyFile, StateKey} from '../../src/lib/state/state-key.js'

type Obj = KubeObject & {data?: Record<string, string>; status?: Record<string, unknown>}

const withTimeout = (args: string[], seconds: number) => args.map((a, i) => (args[i - 1] === '--timeout' ? String(seconds) : a))
const endEvent = (run: CliRun) => jsonEvents(run).find((e) => e.event === 'end') as {ok: boolean} | undefined

describe('issue 13 on one harness: the admin password shown once, policies before the registry', () => {
  let h: HarnessCluster
  let kube: Kube
  let failed: CliRun
  let second: CliRun
  let third: CliRun
  let policiesBeforeRegistry: string[] | undefined
  let sealedByFirstRun: Obj | undefined
  const talosSecret = () => getObject<Obj>(kube, {apiVersion: 'v1', kind: 'Secret', name: 'ichor-talos', namespace: 'ichor-system'})

  beforeAll(async () => {
    // A passphrase (age's scrypt), not the harness's default identity: these tests are about passphrases.
    h = await startHarnessCluster({stateKey: 'passphrase'})
    // Given a first run that mints the password and then fails (Argo CD's server never gets ready)
    const lift = h.pods.hold((pod) => ownedBy(pod, 'ReplicaSet', /^argocd-server-/))
    // The registry is held unready (unreachable) until the policies in kokumi have been listed.
    kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
    let listing: Promise<void> | undefined
    let listed = false
    const liftRegistry = h.pods.hold((pod) => {
      if (!ownedBy(pod, 'ReplicaSet', /^kokumi-registry-/) || listed) return false
      listing ??= listObjects(kube, {apiVersion: 'cilium.io/v2', kind: 'CiliumNetworkPolicy', namespace: 'kokumi'})
        .then(
          (list) => void (policiesBeforeRegistry = list.map((p) => p.metadata.name).sort()),
          () => void (policiesBeforeRegistry = []),
        )
        .finally(() => void (listed = true))
      return true
    })
    failed = await runIchor([...withTimeout(h.initArgs, 15), '--json'], h.env)
    await lift()
    await liftRegistry()
    // And the Talos bundle put back as an older ichor kept it: plaintext keys, no format annotation
    sealedByFirstRun = await talosSecret()
    if (sealedByFirstRun) {
      const data = {
        'secrets.yaml': readFileSync(join(h.stateDir, 'secrets.yaml')).toString('base64'),
        talosconfig: readFileSync(join(h.stateDir, 'talosconfig')).toString('base64'),
      }
      await kube.request('PUT', '/api/v1/namespaces/ichor-system/secrets/ichor-talos', {
        body: {
          apiVersion: 'v1',
          kind: 'Secret',
          type: 'Opaque',
          metadata: {name: 'ichor-talos', namespace: 'ichor-system', resourceVersion: sealedByFirstRun.metadata.resourceVersion},
          data,
        },
      })
    }
    // When it is run again, and then a third time
    second = await runIchor([...h.initArgs, '--json'], h.env)
    third = await runIchor([...h.initArgs, '--json'], h.env)
  }, 900_000)
  afterAll(async () => h?.stop())

  const password = async () => {
    const s = await getObject<Obj>(kube, {apiVersion: 'v1', kind: 'Secret', name: 'ichor-kokumi-admin', namespace: 'ichor-system'})
    return Buffer.from(s!.data!.password!, 'base64').toString('utf8')
  }

  it("Kokumi's network policies are in place before its registry can get ready", () => {
    expect(policiesBeforeRegistry).toEqual(
      policiesFor('kokumi')
        .map((p) => p.metadata.name)
        .sort(),
    )
  })

  it('the failed run created the password but could not show it', async () => {
    expect(failed.code, failed.stderr).toBe(1)
    expect(endEvent(failed)).toMatchObject({ok: false})
    expect(jsonEvents(failed).some((e) => e.event === 'task' && e.id === 'stack-secrets' && e.status === 'done')).toBe(true)
    expect(`${failed.stdout}${failed.stderr}`).not.toContain(await password())
  })

  it('the rerun succeeds and shows it, and records that in the IchorInstallation status', async () => {
    expect(second.code, `${second.stderr}\n${second.stdout.slice(-2000)}`).toBe(0)
    expect(jsonResult<{kokumiAdminPassword?: string}>(second).kokumiAdminPassword).toBe(await password())
    const cr = await getObject<Obj>(kube, {apiVersion: 'ichor.maesh.dev/v1alpha1', kind: 'IchorInstallation', name: 'ichor'})
    expect(cr?.status?.kokumiAdminPasswordShown).toBe(true)
  })

  it('a third run does not show it', async () => {
    expect(third.code, third.stderr).toBe(0)
    expect(jsonResult<{kokumiAdminPassword?: string}>(third).kokumiAdminPassword).toBeUndefined()
    expect(`${third.stdout}${third.stderr}`).not.toContain(await password())
  })

  it('ichor stack password kokumi prints it on stdout and nothing else', async () => {
    const r = await runIchor(['stack', 'password', 'kokumi', '--kubeconfig', `${h.stateDir}/kubeconfig`], h.env)
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toBe(`${await password()}\n`)
    expect(r.stderr).not.toContain(await password())
  })

  const passphrase = () => readFileSync(h.stateKeyFile, 'utf8').trim()
  const talosValues = () => {
    const secrets = parseYaml(readFileSync(join(h.stateDir, 'secrets.yaml'), 'utf8')) as {
      cluster: {secret: string}
      secrets: {bootstraptoken: string}
      trustdinfo: {token: string}
    }
    return [secrets.trustdinfo.token, secrets.secrets.bootstraptoken, secrets.cluster.secret]
  }
  const expectSealed = (secret: Obj | undefined) => {
    expect(secret?.metadata.annotations?.['ichor.maesh.dev/bundle-format']).toBe('age-armor-v1')
    expect(Object.keys(secret?.data ?? {})).toEqual(['bundle.age'])
    const decoded = Buffer.from(secret!.data!['bundle.age']!, 'base64').toString('utf8')
    expect(decoded).toMatch(/^-----BEGIN AGE ENCRYPTED FILE-----\n[A-Za-z0-9+/=\n]+-----END AGE ENCRYPTED FILE-----\n$/)
    for (const needle of ['BEGIN ED25519', 'BEGIN EC', 'BEGIN RSA', 'key:', 'crt:', ...talosValues()]) expect(decoded).not.toContain(needle)
  }

  it('the first run keeps the Talos bundle in the cluster sealed with age: ciphertext only, no Talos key material', () => {
    expectSealed(sealedByFirstRun)
    expect(`${failed.stdout}${failed.stderr}`).not.toContain(passphrase())
  })

  it("an older ichor's plaintext copy is read without the passphrase and re-written sealed by the next run, which says so", async () => {
    const progress = jsonEvents(second)
      .filter((e) => e.event === 'progress' && e.id === 'state-in-cluster')
      .map((e) => e.message)
    expect(progress).toEqual(['ichor-system/ichor-talos was in plaintext (an older ichor wrote it): re-written encrypted with age'])
    expectSealed(await talosSecret())
    expect(jsonEvents(third).find((e) => e.event === 'task' && e.id === 'state-in-cluster' && e.status === 'skipped')).toBeDefined()
    for (const run of [second, third]) expect(`${run.stdout}${run.stderr}`).not.toContain(passphrase())
  })

  it('another state folder continues with the kubeconfig and the passphrase; a wrong passphrase is exit 2 and changes nothing', async () => {
    const laptop = join(dirname(h.stateDir), 'laptop-2')
    const args = [...h.initArgs.map((a) => (a === h.stateDir ? laptop : a)), '--kubeconfig', join(h.stateDir, 'kubeconfig'), '--json']
    const before = await talosSecret()
    const lease = () => getObject(kube, {apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', name: 'ichor-lock', namespace: 'ichor-system'})
    const leaseBefore = await lease()
    const wrongFile = join(dirname(h.stateDir), 'wrong-passphrase')
    writeFileSync(wrongFile, 'not the passphrase\n', {mode: 0o600})
    // Given a wrong passphrase, Then exit 2 naming the Secret, nothing written anywhere
    const wrong = await runIchor(args, {...h.env, ICHOR_STATE_PASSPHRASE_FILE: wrongFile})
    expect(wrong.code, wrong.stderr).toBe(2)
    expect(`${wrong.stdout}${wrong.stderr}`).toContain(
      `the passphrase from ICHOR_STATE_PASSPHRASE_FILE=${wrongFile} does not decrypt ichor-system/ichor-talos; nothing was changed`,
    )
    expect(`${wrong.stdout}${wrong.stderr}`).not.toContain('not the passphrase')
    expect(existsSync(laptop)).toBe(false)
    expect((await talosSecret())?.metadata.resourceVersion).toBe(before?.metadata.resourceVersion)
    expect((await lease())?.metadata.resourceVersion).toBe(leaseBefore?.metadata.resourceVersion)
    // Given the passphrase (as the flag this time), Then the state folder is restored from the cluster
    const right = await runIchor([...args, '--state-passphrase-file', h.stateKeyFile], {...h.env, ICHOR_STATE_PASSPHRASE_FILE: wrongFile})
    expect(right.code, `${right.stderr}\n${right.stdout.slice(-2000)}`).toBe(0)
    expect(
      jsonEvents(right)
        .filter((e) => e.event === 'progress' && e.id === 'talos-secrets')
        .map((e) => e.message),
    ).toEqual(['restored from the cluster'])
    // The same secrets; the talosconfig is re-issued by talosctl gen config from them, under the same CA.
    expect(readFileSync(join(laptop, 'secrets.yaml'), 'utf8')).toBe(readFileSync(join(h.stateDir, 'secrets.yaml'), 'utf8'))
    const caOf = (dir: string) => (parseYaml(readFileSync(join(dir, 'talosconfig'), 'utf8')) as {contexts: Record<string, {ca: string}>}).contexts.e2e?.ca
    expect(caOf(laptop)).toBe(caOf(h.stateDir))
    for (const file of ['secrets.yaml', 'talosconfig']) expect(statSync(join(laptop, file)).mode & 0o777).toBe(0o600)
    expect((await talosSecret())?.metadata.resourceVersion).toBe(before?.metadata.resourceVersion)
    expect(`${right.stdout}${right.stderr}`).not.toContain(passphrase())
  }, 600_000)

  it('cni kube-proxy without a local talosconfig opens the sealed copy first: no passphrase or a wrong one is exit 2 before any step', async () => {
    const empty = join(dirname(h.stateDir), 'laptop-3')
    const args = ['cni', 'kube-proxy', 'restore', '--yes', '--json', '--kubeconfig', join(h.stateDir, 'kubeconfig'), '--state-dir', empty]
    const {ICHOR_STATE_PASSPHRASE_FILE: _, ...noPassphrase} = h.env
    const none = await runIchor(args, noPassphrase)
    expect(none.code, none.stderr).toBe(2)
    expect(`${none.stdout}${none.stderr}`).toContain('no passphrase for the Talos admin bundle, and no terminal to ask on')
    const wrongFile = join(dirname(h.stateDir), 'wrong-passphrase')
    const wrong = await runIchor([...args, '--state-passphrase-file', wrongFile], noPassphrase)
    expect(wrong.code, wrong.stderr).toBe(2)
    expect(`${wrong.stdout}${wrong.stderr}`).toContain(
      `the passphrase from --state-passphrase-file ${wrongFile} does not decrypt ichor-system/ichor-talos; nothing was changed`,
    )
    for (const run of [none, wrong]) expect(jsonEvents(run).filter((e) => e.event === 'task' && e.status !== 'checking')).toEqual([])
  })

  it('kubernetes upgrade and cni kube-proxy opening a copy sealed with a passphrase under 12 characters warn, in the --json warnings too', async () => {
    type Cr = Obj & {spec: {talos: {kubernetesVersion: string}}}
    // Given the cluster's copy sealed with a short passphrase (an older ichor did not refuse one)
    const original = (await talosSecret())!
    const harnessKey = await readStateKeyFile(h.stateKeyFile, 'the harness key')
    const opened = (await bundleOfSecret(
      original,
      async () => harnessKey,
      () => undefined,
    ))!.bundle
    const shortFile = join(dirname(h.stateDir), 'short-passphrase')
    writeFileSync(shortFile, 'pw-11-chars\n', {mode: 0o600})
    const resealed = await sealedBundleSecret(opened, StateKey.passphrase('pw-11-chars', 'test'))
    const put = (data: Record<string, string>, annotations: Record<string, string> | undefined, resourceVersion: string | undefined) =>
      kube.request('PUT', '/api/v1/namespaces/ichor-system/secrets/ichor-talos', {
        body: {...original, metadata: {...original.metadata, annotations, resourceVersion}, data},
      })
    await put(resealed.data!, resealed.metadata.annotations, original.metadata.resourceVersion)
    try {
      // When each command opens it from a machine with no talosconfig (a dry run: nothing changes)
      const cr = (await getObject<Cr>(kube, {apiVersion: 'ichor.maesh.dev/v1alpha1', kind: 'IchorInstallation', name: 'ichor'}))!
      const common = ['--dry-run', '--json', '--kubeconfig', join(h.stateDir, 'kubeconfig'), '--state-dir', join(dirname(h.stateDir), 'laptop-4')]
      const runs = [
        await runIchor(['cni', 'kube-proxy', 'restore', ...common, '--state-passphrase-file', shortFile], h.env),
        await runIchor(['kubernetes', 'upgrade', '--to', cr.spec.talos.kubernetesVersion, ...common, '--state-passphrase-file', shortFile], h.env),
      ]
      // Then each warns in its result, naming where the key came from, never the key
      for (const run of runs) {
        expect(run.code, run.stderr).toBe(0)
        expect(jsonResult<{warnings: string[]}>(run).warnings).toEqual([
          `--state-passphrase-file ${shortFile}: the passphrase of the Talos admin bundle is shorter than 12 characters; whoever can read its Secret can try to guess it offline`,
        ])
        expect(`${run.stdout}${run.stderr}`).not.toContain('pw-11-chars')
      }
    } finally {
      const now = (await talosSecret())!
      await put(original.data!, original.metadata.annotations, now.metadata.resourceVersion)
    }
  }, 300_000)

  it('a tag moved in the registry after ichor pushed is detected, never reported as delivered', async () => {
    type Order = Obj & {spec: {source: {oci: string; version: string}}; status?: {latestArtifactDigest?: string}}
    type App = Obj & {status?: {sync?: {status?: string; revision?: string}; health?: {status?: string}}}
    const readOrder = () => getObject<Order>(kube, {apiVersion: 'delivery.kokumi.dev/v1alpha1', kind: 'Order', name: 'kokumi', namespace: 'kokumi'})
    const readApp = () => getObject<App>(kube, {apiVersion: 'argoproj.io/v1alpha1', kind: 'Application', name: 'kokumi', namespace: 'argocd'})
    const order = (await readOrder())!
    const servedBefore = (await readApp())?.status?.sync?.revision
    const oci = new OciClient(h.registry.endpoint)
    const pushed = (await oci.headManifest('ichor/kokumi', order.spec.source.version))!.digest
    // Given someone moves ichor's tag to their own bundle, and Kokumi renders it (as after a registry loss).
    // Theirs keeps Kokumi's objects and adds one: Argo CD prunes what a bundle drops (Kokumi's
    // Applications ask for it), so a bundle of the ConfigMap alone would delete Kokumi itself.
    const layerDigest = ((await oci.getManifest('ichor/kokumi', order.spec.source.version)).manifest as {layers: {digest: string}[]}).layers[0]!.digest
    const ours = untarSync(await oci.getBlob('ichor/kokumi', layerDigest), 'kokumi bundle')
      .get('manifest.yaml')!
      .toString('utf8')
    const foreign = buildBundle([
      {path: 'manifest.yaml', content: `${ours.replace(/\n*$/, '\n')}---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: foreign\n  namespace: kokumi\n`},
    ])
    const moved = await publishBundle(oci, {
      repository: 'ichor/kokumi',
      tag: order.spec.source.version,
      layer: foreign.layer,
      layerDigest: foreign.layerDigest,
      annotations: {source: order.spec.source.oci, version: order.spec.source.version},
    })
    expect(moved.manifestDigest).not.toBe(pushed)
    await kube.request('PATCH', '/apis/delivery.kokumi.dev/v1alpha1/namespaces/kokumi/orders/kokumi/status', {
      body: {status: {latestConfigHash: null}},
      contentType: 'application/merge-patch+json',
    })
    const deadline = Date.now() + 180_000
    for (;;) {
      const [o, app] = [await readOrder(), await readApp()]
      const served = app?.status?.sync?.revision
      if (
        served &&
        served !== servedBefore &&
        served === o?.status?.latestArtifactDigest &&
        app?.status?.sync?.status === 'Synced' &&
        app.status.health?.status === 'Healthy'
      )
        break
      if (Date.now() > deadline) throw new Error(`Kokumi did not serve the foreign render: Application at ${served}`)
      await new Promise((resolve) => setTimeout(resolve, 500))
    }
    // When ichor init runs again, Then it fails naming both digests instead of reporting success
    const r = await runIchor([...h.initArgs, '--json'], h.env)
    expect(r.code, r.stdout.slice(-2000)).toBe(1)
    const end = jsonEvents(r).find((e) => e.event === 'end') as {error?: string}
    expect(end.error).toContain(`rendered from ${moved.manifestDigest}, not from the bundle ichor pushed (${pushed})`)
  }, 600_000)
})
