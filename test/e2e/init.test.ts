// `ichor init` end to end on the harness: real kube-apiserver + etcd, real registry, real
// helm and talosctl (gen/validate). Simulated: the Talos nodes, kubelet readiness, Cilium's
// operator registering its (real) CRDs, and Kokumi/Argo CD turning Orders into Applications.
import {createHash} from 'node:crypto'
import {existsSync, readdirSync, readFileSync, writeFileSync} from 'node:fs'
import {basename, join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {parseAllDocuments} from 'yaml'
import {pinnedAssets} from '../../src/lib/assets/lock.js'
import {untarSync} from '../../src/lib/chart/archive.js'
import {helmUpgrade} from '../../src/lib/helm/release.js'
import {readReleaseRecord} from '../../src/lib/helm/release-record.js'
import type {ChildProcess} from 'node:child_process'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {acquireLease, breakLease, readLease} from '../../src/lib/kube/lease.js'
import {getObject, type KubeObject} from '../../src/lib/kube/objects.js'
import {OciClient} from '../../src/lib/oci/client.js'
import {CONTROL_PLANE, WORKER, runIchor, startHarnessCluster, type CliRun, type HarnessCluster, jsonEvents, jsonResult} from '../harness/cluster.js'
import {canonicalDump, nodeConfig} from '../harness/dump.js'
import {waitUntil} from '../harness/kill.js'
import {inlineManifestForms} from '../../src/lib/talos/handover.js'
import {DEFAULT_TALOS_VERSION, defaultKubernetesVersion} from '../../src/lib/talos/versions.js'
import {UPSTREAM} from '../support/upstream.js'

type Obj = KubeObject & {spec?: unknown; status?: unknown; data?: Record<string, string>; type?: string}

function endEvent(run: CliRun) {
  return jsonEvents(run).find((e) => e.event === 'end') as {ok: boolean; changed: boolean; error?: string} | undefined
}

async function secretData(kube: Kube, namespace: string, name: string) {
  return (await getObject<Obj>(kube, {apiVersion: 'v1', kind: 'Secret', name, namespace}))?.data
}

describe('ichor init on the harness (2 simulated Talos nodes, real apiserver, helm, registry)', () => {
  let h: HarnessCluster
  let kube: Kube
  let first: CliRun

  // The default: no --cilium-chart (init finds the pinned chart in the mirror) and no --kubernetes-version.
  beforeAll(async () => {
    h = await startHarnessCluster({cilium: 'mirror'})
    first = await runIchor([...h.initArgs, '--json'], h.env)
    kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
  }, 600_000)
  afterAll(async () => h?.stop())

  it('reaches the end state: release cilium at revision 1, inline entry gone, Orders at the pushed digests, Applications healthy', async () => {
    expect(first.code, `${first.stderr}\n${first.stdout.slice(-3000)}`).toBe(0)
    expect(endEvent(first)).toMatchObject({ok: true, changed: true})
    const release = await readReleaseRecord(kube, 'cilium', 'kube-system')
    expect(release).toMatchObject({revision: 1, status: 'deployed', chartVersion: pinnedAssets().cilium.version})
    expect(nodeConfig(h, CONTROL_PLANE)).not.toMatch(/KubeInlineManifestConfig/)
    expect(nodeConfig(h, CONTROL_PLANE)).toMatch(/KubeProxyConfig/)
    const client = new OciClient(h.registry.endpoint)
    for (const c of ['argocd', 'kokumi']) {
      const order = await getObject<Obj & {spec: {source: {oci: string; version: string}}}>(kube, {
        apiVersion: 'delivery.kokumi.dev/v1alpha1',
        kind: 'Order',
        name: c,
        namespace: c,
      })
      expect(order?.spec.source.oci).toBe(`oci://kokumi-registry.kokumi.svc.cluster.local:5000/ichor/${c}`)
      const manifest = await client.getManifest(`ichor/${c}`, order!.spec.source.version)
      const layer = (manifest.manifest as {layers: {digest: string; mediaType: string}[]}).layers[0]!
      expect(layer.mediaType).toBe('application/vnd.cncf.flux.content.v1.tar+gzip')
      const bytes = await client.getBlob(`ichor/${c}`, layer.digest)
      const text = untarSync(bytes, c).get('manifest.yaml')!.toString('utf8')
      const kinds = parseAllDocuments(text).map((d) => (d.toJS() as {kind?: string})?.kind)
      expect(kinds).not.toContain('Secret')
      expect(kinds).toContain('CiliumNetworkPolicy')
      // Neither generated value is in the bundle.
      const admin = Buffer.from((await secretData(kube, 'ichor-system', 'ichor-kokumi-admin'))!.password!, 'base64').toString()
      const redis = Buffer.from((await secretData(kube, 'ichor-system', 'ichor-argocd-redis'))!.password!, 'base64').toString()
      expect(text).not.toContain(admin)
      expect(text).not.toContain(redis)
      const app = await getObject<Obj & {status: {sync: {status: string}; health: {status: string}}}>(kube, {
        apiVersion: 'argoproj.io/v1alpha1',
        kind: 'Application',
        name: c,
        namespace: 'argocd',
      })
      expect(app?.status).toMatchObject({sync: {status: 'Synced'}, health: {status: 'Healthy'}})
    }
    const cr = await getObject<Obj>(kube, {apiVersion: 'ichor.maesh.dev/v1alpha1', kind: 'IchorInstallation', name: 'ichor'})
    expect(cr?.status).toMatchObject({cni: {chartVersion: pinnedAssets().cilium.version, releaseRevision: 1}, stack: {argocd: {applicationHealth: 'Healthy'}}})
    // What was installed, and that two of the three are not the pins (the run had --allow-unpinned).
    const digest = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex')
    expect((cr?.status as {artifacts?: unknown}).artifacts).toEqual({
      cilium: {file: basename(pinnedAssets().cilium.file), version: pinnedAssets().cilium.version, sha256: pinnedAssets().cilium.sha256, pinned: true},
      argocd: {file: 'argo-cd-10.1.1.tgz', version: '10.1.1', sha256: digest(UPSTREAM.argocdChart), pinned: false},
      kokumi: {file: 'install.yaml', version: '0.14.0', sha256: digest(UPSTREAM.kokumiManifest), pinned: false},
    })
    // The default Kubernetes is one the pinned chart is tested on: the run warns of nothing.
    expect((cr?.spec as {talos?: {kubernetesVersion?: string}}).talos?.kubernetesVersion).toBe(defaultKubernetesVersion())
    expect(first.stderr).not.toMatch(/warning:/i)
    expect(jsonResult<{warnings?: string[]}>(first).warnings ?? []).toEqual([])
    const dump = await canonicalDump(kube, h)
    expect(dump.inventoryKeys).toEqual([])
    expect(dump.policies.length).toBeGreaterThan(10)
  })

  // Issue 36: a default init is the default set, so an upgrade plan right after it has nothing to do.
  it('ichor upgrade plan right after the default init: nothing to upgrade, exit 0', async () => {
    const args = ['upgrade', 'plan', '--kubeconfig', join(h.stateDir, 'kubeconfig'), '--state-dir', h.stateDir]
    const json = await runIchor([...args, '--json'], h.env)
    expect(json.code, json.stderr).toBe(0)
    expect(JSON.parse(json.stdout)).toMatchObject({
      current: {talos: {lowest: DEFAULT_TALOS_VERSION}, kubernetes: {lowest: defaultKubernetesVersion()}, cilium: pinnedAssets().cilium.version},
      hops: [],
      upToDate: true,
    })
    const text = await runIchor(args, h.env)
    expect(text.stdout).toContain('Nothing to upgrade: the cluster runs the target combination')
  })

  // Issue 12 point 3: applying the local controlplane.yaml later (adding a control plane) must not bring Cilium's inline manifest back.
  it("the state folder's controlplane.yaml carries no Cilium inline manifest after the hand-over, and the result says so", () => {
    const local = readFileSync(join(h.stateDir, 'controlplane.yaml'), 'utf8')
    expect(inlineManifestForms(local)).toEqual([])
    expect(local).toMatch(/KubeProxyConfig/) // the rest of the config is kept
    expect(jsonResult<{controlPlaneConfig: {path: string; inlineManifest: boolean}}>(first).controlPlaneConfig).toEqual({
      path: join(h.stateDir, 'controlplane.yaml'),
      inlineManifest: false,
    })
  })

  it('shows the Kokumi admin password once, on the run that created it', () => {
    const result = jsonResult<{kokumiAdminPassword?: string}>(first)
    expect(result.kokumiAdminPassword).toMatch(/^[\w-]{20,}$/)
  })

  it('a rerun on the converged cluster changes nothing and is much faster', async () => {
    const before = await canonicalDump(kube, h)
    const rvs = async () => {
      const ids = [
        {apiVersion: 'v1', kind: 'Secret', name: 'ichor-kokumi-admin', namespace: 'ichor-system'},
        {apiVersion: 'v1', kind: 'Secret', name: 'kokumi-server-auth', namespace: 'kokumi'},
        {apiVersion: 'v1', kind: 'Secret', name: 'argocd-redis', namespace: 'argocd'},
        {apiVersion: 'delivery.kokumi.dev/v1alpha1', kind: 'Order', name: 'argocd', namespace: 'argocd'},
        {apiVersion: 'delivery.kokumi.dev/v1alpha1', kind: 'Order', name: 'kokumi', namespace: 'kokumi'},
        {apiVersion: 'ichor.maesh.dev/v1alpha1', kind: 'IchorInstallation', name: 'ichor'},
      ]
      return Promise.all(ids.map(async (id) => (await getObject(kube, id))?.metadata.resourceVersion))
    }
    const rvBefore = await rvs()
    const again = await runIchor([...h.initArgs, '--json'], h.env)
    expect(again.code, again.stderr).toBe(0)
    expect(endEvent(again)).toMatchObject({ok: true, changed: false})
    expect(
      jsonEvents(again)
        .filter((e) => e.event === 'task' && e.status === 'done')
        .map((e) => e.id),
    ).toEqual([])
    expect(await rvs()).toEqual(rvBefore)
    expect(await canonicalDump(kube, h)).toEqual(before)
    expect(jsonResult<{kokumiAdminPassword?: string}>(again).kokumiAdminPassword).toBeUndefined()
    expect(again.ms).toBeLessThan(first.ms / 2)
  })

  // Issue 25: a no-op rerun asks each node one thing (its machine config, shared by every step that reads it).
  it('a no-op rerun makes at most one talosctl call per node (-v names each one)', async () => {
    const again = await runIchor([...h.initArgs, '--json', '-v'], h.env)
    expect(again.code, again.stderr).toBe(0)
    expect(endEvent(again)).toMatchObject({ok: true, changed: false})
    const calls = jsonEvents(again)
      .filter((e) => e.event === 'command' && /talosctl/.test(String((e.argv as string[] | undefined)?.[0] ?? '')))
      .map((e) => (e.argv as string[]).slice(1).join(' '))
    const nodes = [CONTROL_PLANE, WORKER]
    expect(calls.length, calls.join('\n')).toBeLessThanOrEqual(nodes.length)
    for (const node of nodes) expect(calls.filter((c) => c.includes(`--nodes ${node} `)).length, calls.join('\n')).toBeLessThanOrEqual(1)
  })

  // Issue 12 point 10: drift is said on every run (not once, then "converged"), with the command that restores it.
  it('after an out-of-band helm upgrade, every rerun reports the drift and `ichor cni values set`, and changes nothing back', async () => {
    const release = (await readReleaseRecord(kube, 'cilium', 'kube-system'))!
    await helmUpgrade({
      kubeconfig: h.cp.kubeconfigPath,
      release: 'cilium',
      namespace: 'kube-system',
      chartPath: UPSTREAM.pinnedCiliumChart,
      values: {...release.config, debug: {enabled: true}},
      wait: true,
      timeoutSeconds: 300,
    })
    const drifted = (await readReleaseRecord(kube, 'cilium', 'kube-system'))!.revision
    // The first rerun records the release's status; the second is the one that used to say "converged".
    const json = await runIchor([...h.initArgs, '--json'], h.env)
    expect(json.code, json.stderr).toBe(0)
    expect(jsonResult<{drift: unknown[]}>(json).drift).toEqual([
      {subject: 'kube-system/cilium', message: expect.stringMatching(/differ from the IchorInstallation's/), restore: 'ichor cni values set'},
    ])
    const plain = await runIchor(h.initArgs, h.env)
    expect(plain.code, plain.stderr).toBe(0)
    expect(plain.stdout).toMatch(/Drift: the values of release kube-system\/cilium differ .*; restore the stored values with `ichor cni values set`/)
    expect(plain.stdout).not.toMatch(/already converged/)
    expect(plain.stdout).toMatch(/Cilium inline manifest removed from the control planes and from .*controlplane\.yaml/)
    expect((await readReleaseRecord(kube, 'cilium', 'kube-system'))!.revision).toBe(drifted)
  }, 900_000)
})

describe('ichor init refuses bad input before touching any node', () => {
  let h: HarnessCluster
  beforeAll(async () => {
    h = await startHarnessCluster()
  }, 600_000)
  afterAll(async () => h?.stop())

  // The simulator writes a node's file on its first change: no file means untouched.
  const untouched = () => {
    for (const ip of [CONTROL_PLANE, '127.0.0.12']) {
      const file = join(h.nodes.stateDir, `node-${ip}.json`)
      expect(existsSync(file) ? JSON.parse(readFileSync(file, 'utf8')).mode : 'maintenance').toBe('maintenance')
    }
    expect(existsSync(join(h.nodes.stateDir, 'bootstrapped'))).toBe(false)
  }

  it('an unreachable node: exit 1, as an API server that does not answer (not bad input)', async () => {
    const args = h.initArgs.map((a) => (a === '127.0.0.12' ? '127.0.0.99' : a))
    const r = await runIchor(args, h.env)
    expect(r.code).toBe(1)
    expect(`${r.stdout}${r.stderr}`).toMatch(/--worker: 127\.0\.0\.99 does not answer as a Talos node/)
    untouched()
  })

  it('invalid Cilium values', async () => {
    const file = join(h.stateDir, '..', 'bad-values.yaml')
    writeFileSync(file, 'kubeProxyReplacement: false\nhubble:\n  relay:\n    enabled: yes\n')
    const r = await runIchor([...h.initArgs, '--cilium-values', file], h.env)
    expect(r.code).toBe(2)
    expect(`${r.stdout}${r.stderr}`).toMatch(/kubeProxyReplacement: is owned by ichor/)
    expect(`${r.stdout}${r.stderr}`).toMatch(/hubble\.relay\.enabled: must be boolean \(got string "yes"\)/)
    untouched()
  })

  it('a missing artifact', async () => {
    const args = h.initArgs.map((a) => (a === h.kokumiManifest ? '/nonexistent/install.yaml' : a))
    const r = await runIchor(args, h.env)
    expect(r.code).toBe(2)
    expect(`${r.stdout}${r.stderr}`).toMatch(/--kokumi-manifest: no such file \/nonexistent\/install\.yaml/)
    untouched()
  })

  it('artifacts that are not the pinned ones, without --allow-unpinned', async () => {
    const r = await runIchor(
      h.initArgs.filter((a) => a !== '--allow-unpinned'),
      h.env,
    )
    expect(r.code).toBe(2)
    expect(`${r.stdout}${r.stderr}`).toMatch(
      /--argocd-chart: .*argo-cd 10\.1\.1 \(argo-cd-10\.1\.1\.tgz, sha256 [0-9a-f]{64}, from flag\) is not the pinned argo-cd 10\.11\.6 .*pass --allow-unpinned/,
    )
    expect(`${r.stdout}${r.stderr}`).toMatch(/--kokumi-manifest: .*kokumi 0\.14\.0 .*is not the pinned kokumi 0\.17\.0/)
    untouched()
  })

  it('a wrong Talos version string', async () => {
    const args = h.initArgs.map((a) => (a === 'v1.14.1' ? '1.14' : a))
    const r = await runIchor(args, h.env)
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(/--talos-version: "1\.14" is not a Talos release version/)
    untouched()
  })

  it("a --kubeconfig whose server does not answer is exit 1 (not bad input) in kubectl's words, naming it, and no state is written", async () => {
    const dead = join(h.stateDir, '..', 'dead-kubeconfig')
    const stateDir = join(h.stateDir, '..', 'state-dead')
    writeFileSync(
      dead,
      `apiVersion: v1\nkind: Config\ncurrent-context: dead\nclusters: [{name: dead, cluster: {server: 'https://127.0.0.1:9'}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: dead, context: {cluster: dead, user: u}}]\n`,
    )
    const args = h.initArgs.map((a) => (a === h.stateDir ? stateDir : a))
    const r = await runIchor([...args, '--kubeconfig', dead], h.env)
    expect(r.code, r.stderr).toBe(1)
    expect(r.stderr).toMatch(/The connection to the server 127\.0\.0\.1:9 was refused - did you specify the right host or port\?/)
    expect(r.stderr).toContain(`--kubeconfig ${dead}`)
    expect(existsSync(join(stateDir, 'secrets.yaml'))).toBe(false)
    untouched()
  })

  it('no passphrase for the sealed Talos bundle and no terminal: exit 2 naming the flag and the variable; a key file others can read is refused', async () => {
    const stateDir = join(h.stateDir, '..', 'state-no-passphrase')
    const args = h.initArgs.map((a) => (a === h.stateDir ? stateDir : a))
    const {ICHOR_STATE_PASSPHRASE_FILE: _, ...noPassphrase} = h.env
    const r = await runIchor(args, noPassphrase)
    expect(r.code, r.stderr).toBe(2)
    expect(r.stderr).toContain('ichor init: no passphrase for the Talos admin bundle, and no terminal to ask on')
    expect(r.stderr).toMatch(/--state-passphrase-file FILE.*ICHOR_STATE_PASSPHRASE_FILE=FILE/)
    const open = join(h.stateDir, '..', 'open-passphrase')
    writeFileSync(open, 'readable by all\n', {mode: 0o644})
    const shared = await runIchor([...args, '--state-passphrase-file', open], noPassphrase)
    expect(shared.code, shared.stderr).toBe(2)
    expect(shared.stderr).toContain(`--state-passphrase-file ${open}: ${open} is accessible by group or others (mode 0644)`)
    expect(`${shared.stdout}${shared.stderr}`).not.toContain('readable by all')
    expect(existsSync(stateDir)).toBe(false)
    untouched()
  })

  // Issue 12 point 11: two machines (two state folders) race on the same fresh nodes. Both runs
  // probe every node in maintenance mode; the simulator then holds every apply until both runs
  // are past their probes (TALOS_SIM_APPLY_GATE) and slows the second machine's link to the
  // control plane and the first machine's to the worker, so configuring nodes in any order but
  // "first control plane first" would leave one node on each bundle.
  it('two inits from two machines on the same fresh nodes: one goes on; the other stops at the first control plane and configures no node', async () => {
    const gate = join(h.stateDir, '..', 'apply-gate')
    const otherDir = join(h.stateDir, '..', 'second-machine')
    const otherArgs = h.initArgs.map((a, i) => (h.initArgs[i - 1] === '--state-dir' ? otherDir : a))
    const inside: Promise<void>[] = []
    // The winner is stopped as it reaches the bootstrap, so the tests below still start on unbootstrapped nodes.
    const start = (args: string[], delay: string) => {
      let reached!: () => void
      inside.push(new Promise<void>((r) => (reached = r)))
      const env = {...h.env, TALOS_SIM_APPLY_GATE: gate, TALOS_SIM_APPLY_DELAY: delay}
      return runIchor([...args, '--json'], env, {
        killOn: (e) => {
          if (e.event === 'task' && e.id === 'apply-configs' && e.status === 'running') reached()
          return e.event === 'task' && e.id === 'bootstrap-etcd' && e.status === 'checking'
        },
      })
    }
    const first = start(h.initArgs, `${WORKER}=4000`)
    const second = start(otherArgs, `${CONTROL_PLANE}=4000`)
    await Promise.all(inside)
    // Both runs have an apply held at the gate; a run that applies to several nodes at once has them
    // all there a moment later.
    const waiters = () =>
      readdirSync(join(gate, '..'))
        .filter((f) => f.startsWith('apply-gate.waiting-'))
        .map((f) => readFileSync(join(gate, '..', f), 'utf8'))
    await waitUntil(
      'both runs held at the apply gate',
      async () => [`${WORKER}=4000`, `${CONTROL_PLANE}=4000`].every((d) => waiters().some((w) => w.endsWith(d))),
      60_000,
    )
    await new Promise((r) => setTimeout(r, 1_000))
    writeFileSync(gate, '')
    const [a, b] = await Promise.all([first, second])
    expect(b.code, b.stderr).toBe(3)
    expect(a.signal, `${a.stdout}${a.stderr}`).toBe('SIGKILL')
    expect(jsonEvents(a)).toContainEqual(expect.objectContaining({event: 'task', id: 'apply-configs', status: 'done'}))
    expect(`${b.stdout}${b.stderr}`).toMatch(
      /node 127\.0\.0\.11 is already configured from another Talos secrets bundle: it refuses the talosconfig in \S*second-machine/,
    )
    // Every node runs the winner's bundle (its machine CA), and the cluster keeps that bundle.
    const machineCa = (yamlText: string) =>
      parseAllDocuments(yamlText)
        .map((d) => d.toJS() as {machine?: {ca?: {crt?: string}}})
        .find((d) => d?.machine?.ca)?.machine?.ca?.crt
    const winnerCa = machineCa(readFileSync(join(h.stateDir, 'worker.yaml'), 'utf8'))
    expect(winnerCa).toBeTruthy()
    expect(machineCa(readFileSync(join(otherDir, 'worker.yaml'), 'utf8'))).not.toBe(winnerCa)
    for (const ip of [CONTROL_PLANE, WORKER]) expect(machineCa(nodeConfig(h, ip)), ip).toBe(winnerCa)
    expect(existsSync(join(h.nodes.stateDir, 'bootstrapped'))).toBe(false)
  }, 600_000)

  it('a run whose Lease is broken and taken while it is paused (SIGSTOP) starts no action after SIGCONT and exits 3 naming the new holder', async () => {
    const kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
    let child!: ChildProcess
    let paused!: () => void
    const isPaused = new Promise<void>((r) => (paused = r))
    let eventsAtPause = -1
    let seen = 0
    const run = runIchor([...h.initArgs, '--json'], h.env, {
      onStart: (c) => (child = c),
      killOn: (e) => {
        seen++
        if (e.event === 'task' && e.id === 'lease' && (e.status === 'done' || e.status === 'skipped') && eventsAtPause < 0) {
          child.kill('SIGSTOP')
          eventsAtPause = seen
          paused()
        }
        return false
      },
    })
    await isPaused
    await breakLease(kube)
    const other = await acquireLease(kube, {command: 'other laptop'})
    child.kill('SIGCONT')
    const r = await run
    await other.release()
    expect(r.code, r.stderr).toBe(3)
    expect(`${r.stdout}${r.stderr}`).toMatch(/lost the lock \(Lease ichor-system\/ichor-lock\): it is now held by \S+ pid \d+ \(other laptop\)/)
    // Events after the pause: no action started (a step already acting may finish; none begins).
    const after = jsonEvents(r).slice(eventsAtPause)
    expect(after.filter((e) => e.event === 'task' && e.status === 'running')).toEqual([])
  }, 600_000)

  it('SIGINT during a run frees the Lease: exit 130, and the next run starts at once without --break-lock', async () => {
    const kube = await connectKube({kubeconfig: h.cp.kubeconfigPath})
    let child!: ChildProcess
    const r = await runIchor([...h.initArgs, '--json'], h.env, {
      onStart: (c) => (child = c),
      killOn: (e) => (e.event === 'task' && e.id === 'stack-secrets' && e.status === 'checking' && child.kill('SIGINT'), false),
    })
    expect(r.code, r.stderr).toBe(130)
    expect((await readLease(kube))?.holder).toBeUndefined()
  }, 600_000)

  // On one machine the state folder's lock refuses the second run before the Lease does (two runs
  // would both generate Talos secrets before the cluster, and its Lease, exist); the Lease holder
  // message for runs from two machines is tested in cni-values.test.ts.
  it('a second init started while one runs is refused, naming the run that holds the state folder (after the refusals above, on the same fresh cluster)', async () => {
    // A first run on this fresh cluster; the second starts once the first holds the Lease.
    let inside!: () => void
    const firstInside = new Promise<void>((r) => (inside = r))
    const firstRun = runIchor([...h.initArgs, '--json'], h.env, {
      killOn: (e) => (e.event === 'task' && e.id === 'lease' && (e.status === 'done' || e.status === 'skipped') && inside(), false),
    })
    await firstInside
    const second = await runIchor([...h.initArgs], h.env)
    expect((await firstRun).code).toBe(0)
    expect(second.code).toBe(3)
    expect(second.stderr).toMatch(/another ichor init \(pid \d+, since [^)]+\) is using the state folder/)
    expect(second.stderr).toMatch(/wait for it to finish/)
  }, 600_000)
})
