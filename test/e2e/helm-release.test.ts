// Helm release operations against the harness: a real kube-apiserver + etcd, the real
// helm binaries (Helm 3 and Helm 4, both built from Go modules; every lifecycle test runs
// on each), the real controllers and scheduler, and kwok machines running the pods (so
// `--wait` can finish). The chart is a tiny one written here.
import {execa} from 'execa'
import {mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {basename, join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it, vi} from 'vitest'
import {parseAllDocuments} from 'yaml'
import {AppsV1Api, CoreV1Api, KubeConfig, KubernetesObjectApi, PatchStrategy, Watch, type KubernetesObject} from '@kubernetes/client-node'
import {isDeepStrictEqual} from 'node:util'
import {canonicalJson, valuesHash} from '../../src/lib/helm/release-record.js'
import {HELM_TIMEOUT_LABEL, helmInvocationPath, installArgs, upgradeArgs, type HelmReleaseError} from '../../src/lib/helm/release.js'
import {connectKube, type Kube} from '../../src/lib/kube/client.js'
import {startControlPlane, type ControlPlane} from '../harness/apiserver.js'
import {testHelms} from '../harness/helm.js'
import {UPSTREAM} from '../support/upstream.js'
import {startMachines, type Machines} from '../harness/machines.js'

const CHART_VERSION = '0.3.1'

/** A chart with one ConfigMap and one Deployment; `port` out of range makes the apiserver refuse the Deployment. */
function writeDemoChart(dir: string): string {
  const chart = join(dir, 'demo')
  mkdirSync(join(chart, 'templates'), {recursive: true})
  writeFileSync(join(chart, 'Chart.yaml'), `apiVersion: v2\nname: demo\nversion: ${CHART_VERSION}\nappVersion: "1.0"\n`)
  writeFileSync(join(chart, 'values.yaml'), 'greeting: hello\nreplicas: 1\nport: 8080\n')
  writeFileSync(
    join(chart, 'templates', 'configmap.yaml'),
    `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
  namespace: {{ .Release.Namespace }}
data:
  greeting: {{ .Values.greeting | quote }}
`,
  )
  writeFileSync(
    join(chart, 'templates', 'deployment.yaml'),
    `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  namespace: {{ .Release.Namespace }}
  labels:
    app: {{ .Release.Name }}
spec:
  replicas: {{ .Values.replicas }}
  selector:
    matchLabels:
      app: {{ .Release.Name }}
  template:
    metadata:
      labels:
        app: {{ .Release.Name }}
    spec:
      containers:
        - name: web
          image: registry.invalid/demo:1.0
          ports:
            - containerPort: {{ .Values.port }}
          env:
            - name: GREETING
              value: {{ .Values.greeting | quote }}
`,
  )
  return chart
}

/**
 * src/lib/helm as loaded for one helm binary: findHelm() detects helm once per module
 * instance, so each version gets fresh modules with ICHOR_HELM pointing at its binary.
 */
async function loadHelmModules(path: string) {
  process.env.ICHOR_HELM = path
  vi.resetModules()
  const release = await import('../../src/lib/helm/release.js')
  const {readReleaseRecord} = await import('../../src/lib/helm/release-record.js')
  const {helmTemplate} = await import('../../src/lib/helm/template.js')
  const {findHelm} = await import('../../src/lib/helm/binary.js')
  return {...release, readReleaseRecord, helmTemplate, findHelm}
}

let h: Awaited<ReturnType<typeof loadHelmModules>>
let cp: ControlPlane
let sim: Machines
let work: string
let chartPath: string
let kc: KubeConfig
/** src/lib/kube's connection, which readReleaseRecord takes. */
let kube: Kube
let core: CoreV1Api
let apps: AppsV1Api
let objects: KubernetesObjectApi

async function createNamespace(name: string): Promise<string> {
  await core.createNamespace({body: {metadata: {name}}})
  return name
}

function managersOf(obj: KubernetesObject): string[] {
  return (obj.metadata?.managedFields ?? []).map((f) => `${f.manager}/${f.operation}`).sort()
}

/** The object as a user would compare it: no resourceVersion, managedFields or timestamps. */
function comparable(obj: KubernetesObject): unknown {
  const copy = JSON.parse(JSON.stringify(obj)) as {metadata: Record<string, unknown>; status?: unknown}
  delete copy.metadata.resourceVersion
  delete copy.metadata.managedFields
  delete copy.status
  return copy
}

/** Which parts of an object differ between two versions (metadata keys one level deep). */
function changedParts(a: KubernetesObject, b: KubernetesObject): string[] {
  const parts: string[] = []
  const ra = a as unknown as Record<string, unknown>
  const rb = b as unknown as Record<string, unknown>
  for (const key of new Set([...Object.keys(ra), ...Object.keys(rb)])) {
    if (key === 'metadata') {
      const ma = (a.metadata ?? {}) as Record<string, unknown>
      const mb = (b.metadata ?? {}) as Record<string, unknown>
      for (const mk of new Set([...Object.keys(ma), ...Object.keys(mb)])) {
        if (mk !== 'resourceVersion' && !isDeepStrictEqual(ma[mk], mb[mk])) parts.push(`metadata.${mk}`)
      }
    } else if (!isDeepStrictEqual(ra[key], rb[key])) parts.push(key)
  }
  return parts
}

/**
 * Records every write to one object after `from` (its current version), so a test can say
 * exactly how many times helm wrote it and what each write changed. The watch starts one
 * etcd revision earlier so that its first event is `from` itself, in the same raw JSON
 * form as the later ones (the typed read models timestamps differently).
 */
async function recordWrites(listPath: string, from: KubernetesObject): Promise<{stop(): Promise<Array<{rv: string; changed: string[]}>>}> {
  const fromRv = Number(from.metadata!.resourceVersion!)
  const writes: Array<{rv: string; changed: string[]}> = []
  let previous: KubernetesObject | undefined
  let baseline!: () => void
  const seenBaseline = new Promise<void>((r) => (baseline = r))
  const request = await new Watch(kc).watch(
    listPath,
    {resourceVersion: String(fromRv - 1), fieldSelector: `metadata.name=${from.metadata!.name!}`},
    (_type: string, obj: KubernetesObject) => {
      const rv = Number(obj.metadata!.resourceVersion!)
      if (rv === fromRv) baseline()
      else if (rv > fromRv && previous) writes.push({rv: String(rv), changed: changedParts(previous, obj)})
      if (rv >= fromRv) previous = obj
    },
    () => {},
  )
  await seenBaseline
  return {
    async stop() {
      await new Promise((r) => setTimeout(r, 300))
      request.abort()
      return writes
    },
  }
}

/** Renders the chart as ichor's bootstrap does and adds Helm's ownership metadata. */
async function renderOwned(release: string, namespace: string, values: unknown, chart = chartPath): Promise<KubernetesObject[]> {
  const text = await h.helmTemplate({chartPath: chart, releaseName: release, namespace, values})
  // YAML 1.1, as helm, kubectl and Talos read manifests: Cilium's `defaultMode: 0400` is
  // octal (256). Read as YAML 1.2 it would be 400, and helm's apply would then conflict.
  return parseAllDocuments(text, {version: '1.1'})
    .map((d) => d.toJS() as KubernetesObject | null)
    .filter((o): o is KubernetesObject => !!o)
    .map((o) => ({
      ...o,
      metadata: {
        ...o.metadata,
        labels: {...o.metadata?.labels, 'app.kubernetes.io/managed-by': 'Helm'},
        annotations: {...o.metadata?.annotations, 'meta.helm.sh/release-name': release, 'meta.helm.sh/release-namespace': namespace},
      },
    }))
}

async function readBoth(release: string, namespace: string) {
  const cm = await core.readNamespacedConfigMap({name: `${release}-config`, namespace})
  const dep = await apps.readNamespacedDeployment({name: release, namespace})
  return {cm, dep}
}

async function waitForDeploymentReady(name: string, namespace: string): Promise<void> {
  const deadline = Date.now() + 30_000
  for (;;) {
    const d = await apps.readNamespacedDeployment({name, namespace})
    if (d.status?.observedGeneration === d.metadata?.generation && d.status?.readyReplicas === d.spec?.replicas) return
    if (Date.now() > deadline) throw new Error(`Deployment ${namespace}/${name} did not roll out`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

async function waitForDaemonSetReady(name: string, namespace: string): Promise<void> {
  const deadline = Date.now() + 30_000
  for (;;) {
    const d = await apps.readNamespacedDaemonSet({name, namespace})
    const s = d.status
    if (
      s &&
      s.observedGeneration === d.metadata?.generation &&
      s.desiredNumberScheduled > 0 &&
      s.numberReady === s.desiredNumberScheduled &&
      s.updatedNumberScheduled === s.desiredNumberScheduled
    )
      return
    if (Date.now() > deadline) throw new Error(`DaemonSet ${namespace}/${name} did not roll out`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

const previousHelm = process.env.ICHOR_HELM

describe.each(testHelms())('Helm $major (built from Go modules)', ({major, path}) => {
  beforeAll(async () => {
    h = await loadHelmModules(path)
    // The modules under test run exactly this binary.
    expect(await h.findHelm()).toMatchObject({path, major})
    cp = await startControlPlane()
    // Two nodes: the Cilium render's two operator replicas require different nodes (anti-affinity).
    sim = await startMachines(cp.kubeconfigPath, {nodes: 2})
    work = mkdtempSync(join(tmpdir(), 'ichor-helm-e2e-'))
    chartPath = writeDemoChart(work)
    kc = new KubeConfig()
    kc.loadFromFile(cp.kubeconfigPath)
    core = kc.makeApiClient(CoreV1Api)
    apps = kc.makeApiClient(AppsV1Api)
    objects = KubernetesObjectApi.makeApiClient(kc)
    kube = await connectKube({kubeconfig: cp.kubeconfigPath})
  })

  afterAll(async () => {
    process.env.ICHOR_HELM = previousHelm
    vi.resetModules()
    await sim?.stop()
    await cp?.stop()
    if (work) rmSync(work, {recursive: true, force: true})
  })

  describe('helm release lifecycle on a real apiserver (real controllers, kwok machines)', () => {
    const release = 'demo'
    let namespace: string
    const v1 = {greeting: 'hello', replicas: 1}
    const v2 = {replicas: 2, greeting: 'bonjour'}

    it('installs a new release at revision 1, deployed, with field manager "helm"', async () => {
      namespace = await createNamespace('helm-lifecycle')
      const target = {kubeconfig: cp.kubeconfigPath}
      expect(await h.helmStatus({...target, release, namespace})).toBeUndefined()

      const installed = await h.helmInstall({...target, release, namespace, chartPath, values: v1, takeOwnership: true, wait: true, timeoutSeconds: 60})
      expect(installed).toEqual({release, namespace, status: 'deployed', revision: 1, chartName: 'demo', chartVersion: CHART_VERSION})
      expect(await h.helmStatus({...target, release, namespace})).toEqual(installed)

      const {cm, dep} = await readBoth(release, namespace)
      expect(cm.data).toEqual({greeting: 'hello'})
      expect(dep.metadata?.annotations?.['meta.helm.sh/release-name']).toBe(release)
      const helm = await h.findHelm()
      // Helm 4 applies server side and names the manager after the binary it was run as.
      if (helm.major >= 4) expect(managersOf(dep)).toContain('helm/Apply')
    })

    it('reads the newest release record straight from its Secret: revision, chart version, values', async () => {
      const record = await h.readReleaseRecord(kube, release, namespace)
      expect(record).toMatchObject({
        secretName: `sh.helm.release.v1.${release}.v1`,
        release,
        namespace,
        revision: 1,
        status: 'deployed',
        chartName: 'demo',
        chartVersion: CHART_VERSION,
        config: v1,
      })
      expect(record!.manifest).toContain('kind: Deployment')
      expect(valuesHash(record!.config)).toBe(valuesHash(v1))
      expect(await h.readReleaseRecord(kube, 'no-such-release', namespace)).toBeUndefined()
    })

    it('upgrades with new values to revision 2 and records exactly those values', async () => {
      const upgraded = await h.helmUpgrade({
        kubeconfig: cp.kubeconfigPath,
        release,
        namespace,
        chartPath,
        values: v2,
        rollbackOnFailure: true,
        wait: true,
        timeoutSeconds: 60,
      })
      expect(upgraded).toMatchObject({status: 'deployed', revision: 2})
      const {cm, dep} = await readBoth(release, namespace)
      expect(cm.data).toEqual({greeting: 'bonjour'})
      expect(dep.spec?.replicas).toBe(2)
      const record = await h.readReleaseRecord(kube, release, namespace)
      expect(record).toMatchObject({revision: 2, status: 'deployed', config: v2})
      expect(valuesHash(record!.config)).toBe(valuesHash(v2))
    })

    it('rolls a failing upgrade back: the release is deployed again at the previous values', async () => {
      // containerPort 99999 passes helm's schema checks but the apiserver refuses it.
      const bad = {greeting: 'broken', replicas: 2, port: 99999}
      const error = await h
        .helmUpgrade({kubeconfig: cp.kubeconfigPath, release, namespace, chartPath, values: bad, rollbackOnFailure: true, wait: true, timeoutSeconds: 60})
        .then(
          () => undefined,
          (e: unknown) => e,
        )
      expect(error).toBeInstanceOf(h.HelmReleaseError)
      expect((error as HelmReleaseError).helmMessage).toMatch(/containerPort|65535/)
      expect((error as HelmReleaseError).hint).toMatch(/rolled the release back/)

      const status = await h.helmStatus({kubeconfig: cp.kubeconfigPath, release, namespace})
      expect(status?.status).toBe('deployed')
      const record = await h.readReleaseRecord(kube, release, namespace)
      expect(record?.status).toBe('deployed')
      expect(record?.config).toEqual(v2)
      // Reported: the failed attempt is revision 3 and the rollback writes revision 4.
      expect(record?.revision).toBe(4)
      const {cm, dep} = await readBoth(release, namespace)
      expect(cm.data).toEqual({greeting: 'bonjour'})
      expect(dep.spec?.template.spec?.containers[0]?.ports?.[0]?.containerPort).toBe(8080)
    })
  })

  describe('adopting objects created outside helm with --take-ownership', () => {
    const values = {greeting: 'from-bootstrap', replicas: 1}

    for (const how of ['create-only (Talos before 1.13)', 'server-side apply by "talos" (Talos 1.13+)'] as const) {
      it(`adopts objects made by ${how}: revision 1, no spec or data change, no new Deployment generation`, async () => {
        const ssa = how.startsWith('server-side')
        const release = ssa ? 'adopt-ssa' : 'adopt-create'
        const namespace = await createNamespace(release)
        for (const obj of await renderOwned(release, namespace, values)) {
          if (ssa) await objects.patch(obj, undefined, undefined, 'talos', true, PatchStrategy.ServerSideApply)
          else await objects.create(obj, undefined, undefined, 'talos')
        }
        await waitForDeploymentReady(release, namespace)
        const before = await readBoth(release, namespace)
        const cmWrites = await recordWrites(`/api/v1/namespaces/${namespace}/configmaps`, before.cm)
        const depWrites = await recordWrites(`/apis/apps/v1/namespaces/${namespace}/deployments`, before.dep)

        const installed = await h.helmInstall({
          kubeconfig: cp.kubeconfigPath,
          release,
          namespace,
          chartPath,
          values,
          takeOwnership: true,
          wait: true,
          timeoutSeconds: 60,
        })
        expect(installed).toMatchObject({status: 'deployed', revision: 1})

        const after = await readBoth(release, namespace)
        const observed = {
          how,
          configMap: await cmWrites.stop(),
          deployment: await depWrites.stop(),
          managers: {configMap: managersOf(after.cm), deployment: managersOf(after.dep)},
        }
        console.log(`adoption observed: ${JSON.stringify(observed)}`)
        // The adoption changes no object: spec, data, labels and annotations are as the
        // bootstrap left them and the Deployment keeps its generation (no rollout). What helm
        // may write is its own field ownership (metadata.managedFields), nothing else.
        expect(comparable(after.cm)).toEqual(comparable(before.cm))
        expect(comparable(after.dep)).toEqual(comparable(before.dep))
        expect(after.dep.metadata?.generation).toBe(before.dep.metadata?.generation)
        for (const write of [...observed.configMap, ...observed.deployment]) expect(write.changed).toEqual(['metadata.managedFields'])
        expect(observed.configMap.length).toBeLessThanOrEqual(1)
        expect(observed.deployment.length).toBeLessThanOrEqual(1)

        // After adoption the bootstrap writer still co-owns every field. Helm 4 applies server
        // side, so changing such a field without --force-conflicts is refused as a conflict
        // (and rolled back); ichor's upgrade forces, because the release is what ichor owns.
        const changed = {...values, greeting: 'from-helm'}
        const helm = await h.findHelm()
        const target = {kubeconfig: cp.kubeconfigPath, release, namespace, chartPath, wait: true, timeoutSeconds: 60}
        let revision = 1
        if (helm.major >= 4) {
          const refused = await h.helmUpgrade({...target, values: changed, forceConflicts: false}).then(
            () => undefined,
            (e: unknown) => e as HelmReleaseError,
          )
          console.log(`upgrade after adoption without --force-conflicts: ${refused?.helmMessage ?? 'succeeded'}`)
          expect(refused?.helmMessage).toMatch(/conflict/i)
          expect((await readBoth(release, namespace)).cm.data).toEqual({greeting: values.greeting})
          revision = (await h.helmStatus({kubeconfig: cp.kubeconfigPath, release, namespace}))!.revision
        }
        const upgraded = await h.helmUpgrade({...target, values: changed})
        expect(upgraded).toMatchObject({status: 'deployed', revision: revision + 1})
        expect((await readBoth(release, namespace)).cm.data).toEqual({greeting: 'from-helm'})
        expect((await h.readReleaseRecord(kube, release, namespace))?.config).toEqual(changed)
      })
    }
  })

  describe('adopting the real Cilium 1.18.0 render', () => {
    it('takes over the bootstrap objects as release revision 1 without changing any of them', async () => {
      // Hubble off keeps the render deterministic without a Job controller: its default TLS
      // method generates new certificates on every render, and the cronJob method adds a
      // post-install hook Job that nothing runs here.
      const values = {hubble: {enabled: false}, kubeProxyReplacement: true, k8sServiceHost: 'localhost', k8sServicePort: 7445}
      const rendered = await renderOwned('cilium', 'kube-system', values, UPSTREAM.ciliumChart)
      expect(rendered.map((o) => o.kind)).toContain('DaemonSet')
      // Namespaces first, as Talos applies them.
      const ordered = [...rendered.filter((o) => o.kind === 'Namespace'), ...rendered.filter((o) => o.kind !== 'Namespace')]
      for (const obj of ordered) await objects.create(obj, undefined, undefined, 'talos')
      for (const d of rendered.filter((o) => o.kind === 'Deployment')) await waitForDeploymentReady(d.metadata!.name!, 'kube-system')

      const read = (o: KubernetesObject) =>
        objects.read({apiVersion: o.apiVersion!, kind: o.kind!, metadata: {name: o.metadata!.name!, namespace: o.metadata!.namespace}})
      // Let the DaemonSet controller settle the DaemonSets' status before the snapshot.
      for (const d of rendered.filter((o) => o.kind === 'DaemonSet')) await waitForDaemonSetReady(d.metadata!.name!, 'kube-system')
      const before = await Promise.all(rendered.map(read))

      const installed = await h.helmInstall({
        kubeconfig: cp.kubeconfigPath,
        release: 'cilium',
        namespace: 'kube-system',
        chartPath: UPSTREAM.ciliumChart,
        values,
        takeOwnership: true,
        wait: true,
        timeoutSeconds: 120,
      })
      expect(installed).toMatchObject({status: 'deployed', revision: 1, chartName: 'cilium', chartVersion: '1.18.0'})

      const after = await Promise.all(rendered.map(read))
      for (const [i, obj] of after.entries()) {
        const name = `${obj.kind}/${obj.metadata?.namespace ?? ''}/${obj.metadata?.name}`
        expect(comparable(obj), name).toEqual(comparable(before[i]!))
        expect(obj.metadata?.generation, name).toBe(before[i]!.metadata?.generation)
        expect(managersOf(obj), name).toEqual(expect.arrayContaining(['talos/Update']))
      }
      const record = await h.readReleaseRecord(kube, 'cilium', 'kube-system')
      expect(record).toMatchObject({revision: 1, status: 'deployed', chartName: 'cilium', chartVersion: '1.18.0', config: values})
      expect(valuesHash(record!.config)).toBe(valuesHash(values))
    })
  })

  describe('invoking helm as "helm" whatever ICHOR_HELM is called', () => {
    it('keeps the field manager "helm" when ICHOR_HELM points at a binary with another name', async () => {
      const helm = await h.findHelm()
      const renamedDir = join(work, 'renamed')
      mkdirSync(renamedDir)
      const renamed = join(renamedDir, 'helm-4-custom')
      symlinkSync(helm.path, renamed)
      expect(basename(helmInvocationPath(renamed))).toBe('helm')
      expect(helmInvocationPath(renamed)).toBe(helmInvocationPath(renamed))
      expect(helmInvocationPath(helm.path)).toBe(helm.path)

      const namespace = await createNamespace('helm-renamed')
      const previous = process.env.ICHOR_HELM
      process.env.ICHOR_HELM = renamed
      try {
        vi.resetModules()
        const fresh = await import('../../src/lib/helm/release.js')
        await fresh.helmInstall({kubeconfig: cp.kubeconfigPath, release: 'via-link', namespace, chartPath, values: {}, wait: true, timeoutSeconds: 60})
      } finally {
        process.env.ICHOR_HELM = previous
        vi.resetModules()
      }
      // The control: the same binary run under its other name. The official helm CLI pins its
      // manager to "helm" (cmd/helm sets kube.ManagedFieldsManager), so this is "helm" too
      // today; only a build that leaves it unset would take the binary's name, which the
      // symlink guards against.
      const direct = await execa(renamed, ['install', 'direct', chartPath, '-n', namespace, '--kubeconfig', cp.kubeconfigPath, '--values', '-'], {
        input: '{}',
        reject: false,
      })
      expect(direct.exitCode, direct.stderr).toBe(0)

      const viaLink = await core.readNamespacedConfigMap({name: 'via-link-config', namespace})
      const viaOtherName = await core.readNamespacedConfigMap({name: 'direct-config', namespace})
      if (helm.major >= 4) {
        expect(managersOf(viaLink)).toEqual(['helm/Apply'])
        expect(managersOf(viaOtherName)).toEqual(['helm/Apply'])
      } else {
        expect(managersOf(viaLink).every((m) => m.startsWith('helm/'))).toBe(true)
      }
    })
  })

  describe('helm flags', () => {
    const flagBase = {kubeconfig: '/k', release: 'cilium', namespace: 'kube-system', chartPath: '/c.tgz', values: {}}

    it('every flag ichor builds exists in this helm and none is deprecated (checked against `helm <verb> --help`)', async () => {
      const helm = await h.findHelm()
      expect(helm).toMatchObject({path, major})
      for (const [verb, args] of [
        ['install', installArgs(helm, {...flagBase, takeOwnership: true, createNamespace: true, kubeContext: 'x'})],
        ['upgrade', upgradeArgs(helm, {...flagBase, takeOwnership: true, kubeContext: 'x'})],
      ] as const) {
        const help = (await execa(helm.path, [verb, '--help'])).stdout
        for (const flag of args.filter((a) => a.startsWith('--')).map((a) => a.split('=')[0]!)) {
          expect(help, `${verb} ${flag}`).toMatch(new RegExp(`\\s${flag}[\\s\\[]`))
        }
        // Nothing deprecated either (Helm 4 still parses --atomic but deprecates it).
        const run = await execa(
          helm.path,
          [verb, ...args.slice(1), '--dry-run=client'].filter((a) => a !== '--output' && a !== 'json'),
          {reject: false, input: '{}'},
        )
        expect(run.stderr).not.toMatch(/deprecated/i)
      }
    })
  })
})

// Issue 21 point 1: a release adopted with one helm major and later changed from a laptop
// with the other. Helm 4's upgrade and rollback default to --server-side=auto, which follows
// the previous revision's apply method, and refuse --force-conflicts when that was
// client-side (every Helm 3 revision). Each combination: adopt over objects Talos applied,
// change, a failing change rolled back, then a change with the first helm again.
describe('one release, both helm majors (adopt with one, change with the other)', () => {
  let helms: Record<3 | 4, string>
  let mod: Awaited<ReturnType<typeof loadHelmModules>>
  const use = (major: 3 | 4) => (process.env.ICHOR_HELM = helms[major])

  beforeAll(async () => {
    helms = Object.fromEntries(testHelms().map((t) => [t.major, t.path])) as Record<3 | 4, string>
    mod = await loadHelmModules(helms[4])
    h = mod
    cp = await startControlPlane()
    sim = await startMachines(cp.kubeconfigPath, {nodes: 1})
    work = mkdtempSync(join(tmpdir(), 'ichor-helm-mixed-'))
    chartPath = writeDemoChart(work)
    kc = new KubeConfig()
    kc.loadFromFile(cp.kubeconfigPath)
    core = kc.makeApiClient(CoreV1Api)
    apps = kc.makeApiClient(AppsV1Api)
    objects = KubernetesObjectApi.makeApiClient(kc)
    kube = await connectKube({kubeconfig: cp.kubeconfigPath})
  })

  afterAll(async () => {
    process.env.ICHOR_HELM = previousHelm
    vi.resetModules()
    await sim?.stop()
    await cp?.stop()
    if (work) rmSync(work, {recursive: true, force: true})
  })

  it.each([
    {adopt: 3, change: 4},
    {adopt: 4, change: 3},
    {adopt: 3, change: 3},
    {adopt: 4, change: 4},
  ] as const)(
    'adopted with Helm $adopt, changed with Helm $change: upgrade, rollback of a failed upgrade, and a change with Helm $adopt again all succeed',
    async ({adopt, change}) => {
      const release = `mixed-${adopt}-${change}`
      const namespace = await createNamespace(release)
      const v1 = {greeting: 'from-bootstrap', replicas: 1}
      for (const obj of await renderOwned(release, namespace, v1)) await objects.patch(obj, undefined, undefined, 'talos', true, PatchStrategy.ServerSideApply)
      await waitForDeploymentReady(release, namespace)
      const target = {kubeconfig: cp.kubeconfigPath, release, namespace, chartPath, wait: true, timeoutSeconds: 60}

      use(adopt)
      expect(await mod.helmInstall({...target, values: v1, takeOwnership: true})).toMatchObject({status: 'deployed', revision: 1})

      use(change)
      const v2 = {greeting: 'changed', replicas: 1}
      const upgraded = await mod.helmUpgrade({...target, values: v2}).catch((e: unknown) => e as HelmReleaseError)
      expect(upgraded, (upgraded as HelmReleaseError).helmMessage).toMatchObject({status: 'deployed', revision: 2})
      expect((await readBoth(release, namespace)).cm.data).toEqual({greeting: 'changed'})

      // A failing upgrade is rolled back by the same helm: helm's own error, release deployed at v2.
      const failed = (await mod.helmUpgrade({...target, values: {...v2, port: 99999}}).catch((e: unknown) => e)) as HelmReleaseError
      expect(failed).toBeInstanceOf(mod.HelmReleaseError)
      expect(failed.helmMessage).toMatch(/containerPort|65535/)
      expect(failed.helmMessage).not.toMatch(/forceConflicts|an error occurred while rolling back/)
      expect(await mod.readReleaseRecord(kube, release, namespace)).toMatchObject({revision: 4, status: 'deployed', config: v2})

      use(adopt)
      const v3 = {greeting: 'back', replicas: 1}
      expect(await mod.helmUpgrade({...target, values: v3})).toMatchObject({status: 'deployed', revision: 5})
      expect((await readBoth(release, namespace)).cm.data).toEqual({greeting: 'back'})
    },
  )
})

describe('helm flags per version', () => {
  const base = {kubeconfig: '/k', release: 'cilium', namespace: 'kube-system', chartPath: '/c.tgz', values: {}}

  it('Helm 4: --rollback-on-failure, --wait=watcher, --force-conflicts; never --atomic', () => {
    const up = upgradeArgs({major: 4}, {...base, takeOwnership: true})
    expect(up).toEqual(
      expect.arrayContaining([
        '--rollback-on-failure',
        '--wait=watcher',
        '--server-side=true',
        '--force-conflicts',
        '--reset-values',
        '--take-ownership',
        '--values',
        '-',
      ]),
    )
    // --force-conflicts never goes without --server-side=true (a Helm 3 revision is client-side).
    expect(upgradeArgs({major: 4}, {...base, forceConflicts: false}).filter((a) => /server-side|force-conflicts/.test(a))).toEqual([])
    expect(up).not.toContain('--atomic')
    const inst = installArgs({major: 4}, {...base, takeOwnership: true, kubeContext: 'admin@c'})
    expect(inst).toEqual(expect.arrayContaining(['--take-ownership', '--force-conflicts', '--wait=watcher', '--kube-context', 'admin@c']))
    expect(installArgs({major: 4}, base)).not.toContain('--force-conflicts')
    expect(inst.filter((a) => /atomic|rollback/.test(a))).toEqual([])
  })

  it('every install and upgrade records the --timeout it gives helm on the release (a rerun reads how long that helm may work)', () => {
    for (const major of [3, 4]) {
      expect(installArgs({major}, {...base, timeoutSeconds: 420}).join(' ')).toContain(`--timeout 420s --labels ${HELM_TIMEOUT_LABEL}=420`)
      expect(upgradeArgs({major}, base).join(' ')).toContain(`--timeout 300s --labels ${HELM_TIMEOUT_LABEL}=300`)
    }
  })

  it('Helm 3: --atomic (which implies --wait); no Helm 4 only flags', () => {
    const up = upgradeArgs({major: 3}, base)
    expect(up).toContain('--atomic')
    expect(up.filter((a) => /rollback-on-failure|force-conflicts|=watcher/.test(a))).toEqual([])
    expect(upgradeArgs({major: 3}, {...base, rollbackOnFailure: false})).toContain('--wait')
    expect(installArgs({major: 3}, base)).toContain('--wait')
    expect(installArgs({major: 3}, {...base, takeOwnership: true})).not.toContain('--force-conflicts')
  })
})

describe('valuesHash', () => {
  it('is stable: same values in any key order hash the same, any change hashes differently', () => {
    const a = {ipam: {mode: 'kubernetes'}, kubeProxyReplacement: true, k8sServicePort: 7445, list: [1, {b: 2, a: 1}]}
    const b = {list: [1, {a: 1, b: 2}], k8sServicePort: 7445, kubeProxyReplacement: true, ipam: {mode: 'kubernetes'}}
    expect(valuesHash(a)).toBe(valuesHash(b))
    expect(valuesHash(a)).toMatch(/^[0-9a-f]{64}$/)
    expect(valuesHash({...a, k8sServicePort: 6443})).not.toBe(valuesHash(a))
    expect(valuesHash({x: [1, 2]})).not.toBe(valuesHash({x: [2, 1]}))
    expect(canonicalJson({b: 1, a: {d: undefined, c: null}})).toBe('{"a":{"c":null},"b":1}')
    expect(valuesHash(undefined)).toBe(valuesHash({}))
    // Pinned, so an accidental change of the canonical form (and of every stored hash) fails here.
    expect(valuesHash({a: 1})).toBe('015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862')
  })
})
