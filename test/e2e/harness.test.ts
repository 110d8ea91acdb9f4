// The harness itself, on the real kube-apiserver + etcd and the real helm binary.
// Real controllers and scheduler; simulated: the machines (kwok Nodes and the pod-start simulator).
import {ApiextensionsV1Api, AppsV1Api, CoreV1Api, CustomObjectsApi, VersionApi, type KubeConfig} from '@kubernetes/client-node'
import {execFile, spawn} from 'node:child_process'
import {existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {connect} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {promisify} from 'node:util'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {envtestBinDir, startControlPlane, type ControlPlane} from '../harness/apiserver.js'
import {createNamespace, dumpObjects, loadKubeConfig, uniqueName, waitForCrdEstablished, waitUntil} from '../harness/kube.js'
import {registerNode} from '../harness/kwok.js'
import {startMachines, type Machines} from '../harness/machines.js'

const run = promisify(execFile)

function helmBinary(): string {
  const helm = process.env.ICHOR_HELM
  if (!helm || !existsSync(helm))
    throw new Error(
      `real helm not found at ${helm ?? '(ICHOR_HELM unset)'}: vitest.config.ts points ICHOR_HELM at the Helm 4 scripts/get-helm.sh puts in place`,
    )
  return helm
}

function portIsClosed(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({host: '127.0.0.1', port})
    socket.once('connect', () => {
      socket.destroy()
      resolve(false)
    })
    socket.once('error', () => resolve(true))
  })
}

function helmEnv(dir: string): NodeJS.ProcessEnv {
  return {...process.env, HELM_CACHE_HOME: join(dir, 'helm-cache'), HELM_CONFIG_HOME: join(dir, 'helm-config'), HELM_DATA_HOME: join(dir, 'helm-data')}
}

function writeTinyChart(dir: string): string {
  const chart = join(dir, 'tiny')
  mkdirSync(join(chart, 'templates'), {recursive: true})
  writeFileSync(join(chart, 'Chart.yaml'), 'apiVersion: v2\nname: tiny\nversion: 0.1.0\n')
  const podSpec = `
    metadata:
      labels: {app: tiny}
    spec:
      containers:
        - name: main
          image: registry.invalid/never-pulled:1`
  writeFileSync(
    join(chart, 'templates', 'workloads.yaml'),
    `apiVersion: apps/v1
kind: Deployment
metadata:
  name: tiny
spec:
  replicas: 2
  selector:
    matchLabels: {app: tiny}
  template:${podSpec}
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: tiny-agent
spec:
  selector:
    matchLabels: {app: tiny}
  template:${podSpec}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: tiny-config
data:
  release: {{ .Release.Name | quote }}
`,
  )
  return chart
}

describe('harness: real control plane (apiserver, etcd, controller-manager, scheduler), kwok machines, real helm', () => {
  let cp: ControlPlane
  let kc: KubeConfig
  let machines: Machines
  let ns: string
  const scratch = mkdtempSync(join(tmpdir(), 'ichor-harness-test-'))

  beforeAll(async () => {
    cp = await startControlPlane()
    console.log(`control plane ready in ${cp.startMs} ms at ${cp.server}`)
    kc = loadKubeConfig(cp.kubeconfigPath)
    ns = await createNamespace(kc, uniqueName('harness'))
    machines = await startMachines(cp.kubeconfigPath, {nodes: 2})
  })

  afterAll(async () => {
    await machines?.stop()
    await cp?.stop()
    rmSync(scratch, {recursive: true, force: true})
  })

  it('fails loudly, naming the build command, when the binaries are missing', async () => {
    await expect(envtestBinDir(join(scratch, 'nothing-here'))).rejects.toThrow(/scripts\/build-envtest\.sh/)
  })

  it('serves a verified TLS endpoint as an admin in system:masters, reporting the pinned version', async () => {
    // build-envtest.sh stamps the version; charts' kubeVersion checks depend on it.
    const version = await kc.makeApiClient(VersionApi).getCode()
    expect(version.gitVersion).toMatch(/^v1\.36\.\d+$/)
    // The kubeconfig carries the CA, not insecure-skip-tls-verify.
    expect(cp.kubeconfig).toContain('certificate-authority-data')
    expect(cp.kubeconfig).not.toContain('insecure-skip-tls-verify')
    const res = await fetch(`${cp.server}/version`).catch((err: Error) => err)
    expect(res).toBeInstanceOf(Error) // no CA given to fetch: the serving cert is not publicly trusted
    const {stdout} = await run(helmBinary(), ['version', '--short'])
    expect(stdout).toMatch(/^v\d+\./)
  })

  it('has created a namespace, issues service-account tokens and establishes a CRD', async () => {
    const core = kc.makeApiClient(CoreV1Api)
    // TokenRequest proves the --service-account-* flags (issuer and signing key) work.
    const tr = await core.createNamespacedServiceAccountToken({name: 'default', namespace: ns, body: {spec: {audiences: []}}})
    expect(tr.status?.token?.split('.')).toHaveLength(3)

    const ext = kc.makeApiClient(ApiextensionsV1Api)
    await ext.createCustomResourceDefinition({
      body: {
        metadata: {name: 'widgets.harness.ichor.test'},
        spec: {
          group: 'harness.ichor.test',
          names: {kind: 'Widget', plural: 'widgets', singular: 'widget'},
          scope: 'Namespaced',
          versions: [
            {
              name: 'v1',
              served: true,
              storage: true,
              schema: {openAPIV3Schema: {type: 'object', properties: {spec: {type: 'object', properties: {size: {type: 'integer'}}}}}},
            },
          ],
        },
      },
    })
    await waitForCrdEstablished(kc, 'widgets.harness.ichor.test')
    const custom = kc.makeApiClient(CustomObjectsApi)
    // The new API may take a moment to be served after Established.
    await waitUntil('Widget creatable', () =>
      custom
        .createNamespacedCustomObject({
          group: 'harness.ichor.test',
          version: 'v1',
          namespace: ns,
          plural: 'widgets',
          body: {apiVersion: 'harness.ichor.test/v1', kind: 'Widget', metadata: {name: 'w'}, spec: {size: 3}},
        })
        .then(() => true),
    )
    const dump = await dumpObjects(kc, [{apiVersion: 'harness.ichor.test/v1', kind: 'Widget'}], {namespace: ns})
    expect(dump).toEqual([{apiVersion: 'harness.ichor.test/v1', kind: 'Widget', metadata: {name: 'w', namespace: ns}, spec: {size: 3}}])
  })

  it('the real controllers roll out a Deployment, a StatefulSet and a DaemonSet on 2 kwok nodes', async () => {
    const apps = kc.makeApiClient(AppsV1Api)
    const template = {
      metadata: {labels: {app: 'demo'}},
      spec: {containers: [{name: 'main', image: 'registry.invalid/never-pulled:1'}]},
    }
    const selector = {matchLabels: {app: 'demo'}}
    await apps.createNamespacedDeployment({namespace: ns, body: {metadata: {name: 'demo'}, spec: {replicas: 3, selector, template}}})
    await apps.createNamespacedStatefulSet({
      namespace: ns,
      body: {metadata: {name: 'demo-db'}, spec: {replicas: 2, serviceName: 'demo-db', selector, template}},
    })
    await apps.createNamespacedDaemonSet({namespace: ns, body: {metadata: {name: 'demo-agent'}, spec: {selector, template}}})

    const d = await waitUntil('Deployment demo rolled out', async () => {
      const d = await apps.readNamespacedDeploymentStatus({name: 'demo', namespace: ns})
      return d.status?.observedGeneration === d.metadata?.generation && d.status?.readyReplicas === 3 ? d : undefined
    })
    expect(d.status?.conditions?.find((c) => c.type === 'Available')?.status).toBe('True')
    expect(d.status?.updatedReplicas).toBe(3)
    const s = await waitUntil('StatefulSet demo-db rolled out', async () => {
      const s = await apps.readNamespacedStatefulSetStatus({name: 'demo-db', namespace: ns})
      return s.status?.readyReplicas === 2 ? s : undefined
    })
    expect(s.status?.currentRevision).toBe(s.status?.updateRevision)
    const ds = await waitUntil('DaemonSet demo-agent ready', async () => {
      const ds = await apps.readNamespacedDaemonSetStatus({name: 'demo-agent', namespace: ns})
      return ds.status?.numberReady === 2 ? ds : undefined
    })
    expect(ds.status).toMatchObject({desiredNumberScheduled: 2, updatedNumberScheduled: 2, numberAvailable: 2})

    // A spec change bumps the generation; the deployment controller scales the ReplicaSet.
    const cur = await apps.readNamespacedDeployment({name: 'demo', namespace: ns})
    await apps.replaceNamespacedDeployment({name: 'demo', namespace: ns, body: {...cur, spec: {...cur.spec!, replicas: 5}}})
    await waitUntil('Deployment demo scaled to 5', async () => {
      const d = await apps.readNamespacedDeploymentStatus({name: 'demo', namespace: ns})
      return d.status?.observedGeneration === d.metadata?.generation && d.status?.availableReplicas === 5
    })
  })

  it('with pods that never turn ready, helm install --wait times out (the wait is real)', async () => {
    const other = await createNamespace(kc, uniqueName('unready'))
    const lift = machines.pods.hold((pod) => pod.metadata?.namespace === other)
    const chart = writeTinyChart(scratch)
    const common = ['--kubeconfig', cp.kubeconfigPath, '--namespace', other]
    const failed = await run(helmBinary(), ['install', 'tiny', chart, ...common, '--wait', '--timeout', '3s'], {env: helmEnv(scratch)}).catch(
      (err: Error & {stderr?: string}) => err,
    )
    expect(failed).toBeInstanceOf(Error)
    expect((failed as {stderr?: string}).stderr).toMatch(/context deadline exceeded|timed out|timeout/i)
    const {stdout} = await run(helmBinary(), ['status', 'tiny', ...common, '-o', 'json'], {env: helmEnv(scratch)})
    expect((JSON.parse(stdout) as {info: {status: string}}).info.status).toBe('failed')
    await lift()
  })

  it('helm install --wait of a chart with a Deployment and a DaemonSet finishes and reports deployed', async () => {
    const helm = helmBinary()
    const chart = writeTinyChart(scratch)
    const env = helmEnv(scratch)
    const common = ['--kubeconfig', cp.kubeconfigPath, '--namespace', ns]
    const t0 = Date.now()
    await run(helm, ['install', 'tiny', chart, ...common, '--wait', '--timeout', '60s'], {env})
    const waited = Date.now() - t0
    const {stdout} = await run(helm, ['status', 'tiny', ...common, '-o', 'json'], {env})
    const status = JSON.parse(stdout) as {info: {status: string}; version: number}
    expect(status.info.status).toBe('deployed')
    expect(status.version).toBe(1)
    expect(waited).toBeLessThan(30_000)
    const apps = kc.makeApiClient(AppsV1Api)
    const ds = await apps.readNamespacedDaemonSet({name: 'tiny-agent', namespace: ns})
    expect(ds.status?.numberReady).toBe(2)
    const ran = machines.pods.admitted.filter((p) => p.pod.startsWith(`${ns}/tiny-`)).map((p) => p.owner?.replace(/-[a-z0-9]+$/, ''))
    expect(ran.filter((o) => o === 'DaemonSet/tiny')).toHaveLength(2)
    expect(ran.filter((o) => o === 'ReplicaSet/tiny')).toHaveLength(2)
  })

  it('the real scheduler honours taints: on a control-plane Node tainted as Talos taints it, a DaemonSet tolerating everything runs and a Deployment without a toleration stays Pending', async () => {
    const core = kc.makeApiClient(CoreV1Api)
    const apps = kc.makeApiClient(AppsV1Api)
    const tainted = await createNamespace(kc, uniqueName('tainted'))
    await registerNode(kc, {
      name: 'control-plane-0',
      ip: '127.0.2.1',
      labels: {'node-role.kubernetes.io/control-plane': ''},
      taints: [{key: 'node-role.kubernetes.io/control-plane', effect: 'NoSchedule'}],
    })
    const onlyThere = {nodeSelector: {'kubernetes.io/hostname': 'control-plane-0'}, containers: [{name: 'main', image: 'registry.invalid/never-pulled:1'}]}
    await apps.createNamespacedDaemonSet({
      namespace: tainted,
      body: {
        metadata: {name: 'agent'},
        spec: {
          selector: {matchLabels: {app: 'agent'}},
          template: {metadata: {labels: {app: 'agent'}}, spec: {...onlyThere, tolerations: [{operator: 'Exists'}]}},
        },
      },
    })
    await apps.createNamespacedDeployment({
      namespace: tainted,
      body: {
        metadata: {name: 'web'},
        spec: {replicas: 1, selector: {matchLabels: {app: 'web'}}, template: {metadata: {labels: {app: 'web'}}, spec: onlyThere}},
      },
    })
    await waitUntil('the DaemonSet pod Running on the control plane', async () => {
      const pods = await core.listNamespacedPod({namespace: tainted, labelSelector: 'app=agent'})
      return pods.items.some((p) => p.spec?.nodeName === 'control-plane-0' && p.status?.phase === 'Running')
    })
    const web = await waitUntil('the Deployment pod refused by the scheduler', async () => {
      const pods = await core.listNamespacedPod({namespace: tainted, labelSelector: 'app=web'})
      const pod = pods.items[0]
      return pod?.status?.conditions?.find((c) => c.type === 'PodScheduled' && c.status === 'False') ? pod : undefined
    })
    expect(web.status?.phase).toBe('Pending')
    expect(web.spec?.nodeName).toBeUndefined()
    expect(web.status?.conditions?.find((c) => c.type === 'PodScheduled')?.message).toMatch(/1 node\(s\) had untolerated taint/)
    await core.deleteNode({name: 'control-plane-0'})
  })

  it('pods a test holds start crash-looping or failing their image pull, as a kubelet reports them, and start normally once lifted', async () => {
    const core = kc.makeApiClient(CoreV1Api)
    const apps = kc.makeApiClient(AppsV1Api)
    const faulty = await createNamespace(kc, uniqueName('faulty'))
    const crash = machines.pods.hold((pod) => pod.metadata?.namespace === faulty && pod.metadata.labels?.app === 'crash', 'crashloop')
    const pull = machines.pods.hold((pod) => pod.metadata?.namespace === faulty && pod.metadata.labels?.app === 'pull', 'image-pull')
    for (const app of ['crash', 'pull']) {
      await apps.createNamespacedDeployment({
        namespace: faulty,
        body: {
          metadata: {name: app},
          spec: {
            replicas: 1,
            selector: {matchLabels: {app}},
            template: {metadata: {labels: {app}}, spec: {containers: [{name: 'main', image: 'registry.invalid/never-pulled:1'}]}},
          },
        },
      })
    }
    const podOf = async (app: string) => (await core.listNamespacedPod({namespace: faulty, labelSelector: `app=${app}`})).items[0]
    const crashing = await waitUntil('a crash-looping pod', async () => {
      const p = await podOf('crash')
      return p?.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'CrashLoopBackOff' ? p : undefined
    })
    expect(crashing.status?.phase).toBe('Running')
    expect(crashing.status?.containerStatuses?.[0]?.restartCount).toBeGreaterThan(0)
    expect(crashing.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('False')
    const pulling = await waitUntil('a pod failing its image pull', async () => {
      const p = await podOf('pull')
      return p?.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'ImagePullBackOff' ? p : undefined
    })
    expect(pulling.status?.phase).toBe('Pending')
    await crash()
    await pull()
    for (const app of ['crash', 'pull']) {
      await waitUntil(`${app} ready once lifted`, async () => (await apps.readNamespacedDeployment({name: app, namespace: faulty})).status?.readyReplicas === 1)
    }
  })

  it('a test process killed with SIGKILL leaves no etcd, kube-apiserver or temp dir behind', async () => {
    const script = join(scratch, 'orphan.mts')
    writeFileSync(
      script,
      `import {startControlPlane} from ${JSON.stringify(new URL('../harness/apiserver.ts', import.meta.url).href)}
const cp = await startControlPlane()
console.log(JSON.stringify({...cp.ports, kubeconfigPath: cp.kubeconfigPath}))
setInterval(() => {}, 1000)
`,
    )
    const child = spawn(process.execPath, ['--import', 'tsx', script], {stdio: ['ignore', 'pipe', 'inherit']})
    const {kubeconfigPath, ...ports} = await new Promise<ControlPlane['ports'] & {kubeconfigPath: string}>((resolve, reject) => {
      child.stdout.once('data', (chunk: Buffer) => resolve(JSON.parse(chunk.toString()) as ControlPlane['ports'] & {kubeconfigPath: string}))
      child.once('exit', (code) => reject(new Error(`orphan script exited early (${code})`)))
    })
    expect(await portIsClosed(ports.apiServer)).toBe(false)
    child.kill('SIGKILL')
    await waitUntil(
      'the orphaned control plane to die',
      async () => {
        const closed = await Promise.all(Object.values(ports).map(portIsClosed))
        return closed.every(Boolean) && !existsSync(kubeconfigPath)
      },
      {timeoutMs: 10_000},
    )
  })

  it('stop() kills etcd and kube-apiserver and closes their ports', async () => {
    await machines.stop()
    const {apiServer, etcdClient, etcdPeer} = cp.ports
    expect(await portIsClosed(apiServer)).toBe(false)
    await cp.stop()
    expect(await portIsClosed(apiServer)).toBe(true)
    expect(await portIsClosed(etcdClient)).toBe(true)
    expect(await portIsClosed(etcdPeer)).toBe(true)
    expect(existsSync(cp.kubeconfigPath)).toBe(false)
  })
})
