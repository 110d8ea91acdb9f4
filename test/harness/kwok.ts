// The harness's machines: kwok (sigs.k8s.io/kwok, built from the Go module in test/envtest by
// scripts/build-kwok.sh) plays the kubelet of every Node that carries its annotation: it keeps
// the Node Ready with lease heartbeats and takes the pods the real scheduler binds there through
// their lifecycle with Stages. The Stages are kwok's own node ones (node/fast, node/heartbeat-
// with-lease, shipped in its module and copied beside the binary) and pod ones written here, so
// that:
// - a pod becomes Running and Ready only after the pod-start simulator (./pod-start-simulator.ts)
//   has admitted it, as a kubelet starts a pod only once it has read what the pod mounts, and
//   `podReadyMs` later (a short start-up, so waits really wait);
// - a test can keep pods unready, crash-looping or failing their image pull: the pod-start
//   simulator labels them `harness.ichor.test/fault` and the fault Stages below write the status
//   a kubelet would;
// - pods of Jobs complete, and deleted pods go away (kwok's pod/fast behaviour).
// With `nodeIps`, it also serves the kubelet API's port-forward, so that the API server's
// pods/portforward reaches it as it reaches a kubelet (kubeletPortForward below).
import {ApiextensionsV1Api, CoordinationV1Api, CoreV1Api, CustomObjectsApi, setHeaderOptions, type KubeConfig, type V1Node} from '@kubernetes/client-node'
import {execFile} from 'node:child_process'
import {createConnection, createServer, type Server} from 'node:net'
import {existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {promisify} from 'node:util'
import {startProcess, stopProcess, type Proc} from './apiserver.js'
import {loadKubeConfig, waitForCrdEstablished} from './kube.js'
import {PROJECT_ROOT} from '../support/upstream.js'

/** The annotation kwok selects the Nodes it plays by (`--manage-nodes-with-annotation-selector`). */
export const KWOK_NODE_ANNOTATION = 'kwok.x-k8s.io/node'
/** Set by the pod-start simulator once it admitted a pod; the ready Stage waits for it. */
export const ADMITTED_ANNOTATION = 'harness.ichor.test/admitted'
/** The fault a test asked for: `unready`, `crashloop` or `image-pull`. */
export const FAULT_LABEL = 'harness.ichor.test/fault'
export type PodFault = 'unready' | 'crashloop' | 'image-pull'

export interface Kwok {
  stop(): Promise<void>
  logPath: string
}

let located: Promise<string> | undefined

/** The folder holding kwok and its stages (ICHOR_KWOK_DIR, else scripts/build-kwok.sh builds it). */
export function kwokDir(): Promise<string> {
  const fromEnv = process.env.ICHOR_KWOK_DIR
  located ??= fromEnv
    ? Promise.resolve(fromEnv)
    : promisify(execFile)('bash', [join(PROJECT_ROOT, 'scripts', 'build-kwok.sh')], {maxBuffer: 1 << 20}).then(({stdout}) => stdout.trim().split('\n').pop()!)
  return located.then((dir) => {
    if (!existsSync(join(dir, 'kwok')))
      throw new Error(`kwok: ${join(dir, 'kwok')} is missing; build it with scripts/build-kwok.sh (or point ICHOR_KWOK_DIR at its folder)`)
    return dir
  })
}

/** How long after admission a pod turns Ready (ICHOR_HARNESS_POD_READY_MS, default 300 ms). */
export function podReadyMs(): number {
  return Number(process.env.ICHOR_HARNESS_POD_READY_MS ?? 300)
}

export async function startKwok(opts: {kubeconfigPath: string; podReadyMs?: number; restored?: KubeConfig; nodeIps?: string[]}): Promise<Kwok> {
  const dir = await kwokDir()
  const kubelet = opts.nodeIps?.length ? await kubeletPortForward(opts.kubeconfigPath, opts.nodeIps) : undefined
  // A restored cluster's Node Leases name the kwok that saved it (hostname_uuid, kwok v0.8.0
  // pkg/kwok/controllers/controller.go Identity); a new kwok plays a Node only once its Lease
  // has expired (node_lease_controller.go tryAcquireOrRenew), 40 s in which no pod starts or
  // goes. That kwok is gone: its Leases go with it, and the new one creates its own at once.
  if (opts.restored) await opts.restored.makeApiClient(CoordinationV1Api).deleteCollectionNamespacedLease({namespace: 'kube-node-lease'})
  const work = mkdtempSync(join(tmpdir(), 'ichor-kwok-'))
  const nodeStages = ['node/fast', 'node/heartbeat-with-lease'].flatMap((sub) =>
    readdirSync(join(dir, 'stage', sub))
      .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
      .map((f) => readFileSync(join(dir, 'stage', sub, f), 'utf8')),
  )
  const config = join(work, 'kwok.yaml')
  writeFileSync(config, [...nodeStages, ...podStages(opts.podReadyMs ?? podReadyMs())].join('\n---\n'))
  const proc: Proc = startProcess(
    join(dir, 'kwok'),
    [
      `--kubeconfig=${opts.kubeconfigPath}`,
      `--config=${config}`,
      '--manage-all-nodes=false',
      `--manage-nodes-with-annotation-selector=${KWOK_NODE_ANNOTATION}=fake`,
      // Pod IPs from a range of their own, never an address a test uses.
      '--cidr=10.244.0.0/16',
      '--node-lease-duration-seconds=40',
      ...(kubelet ? kubelet.kwokArgs : ['--server-address=127.0.0.1:0']),
      '--v=WARN',
    ],
    work,
    'kwok.log',
  )
  // kwok has no readiness endpoint worth waiting on: a Node it plays turns Ready within
  // milliseconds of its creation, and the harness's first Node comes much later.
  await new Promise((r) => setTimeout(r, 50))
  if (proc.child.exitCode !== null) throw new Error(`kwok exited at start:\n${readFileSync(proc.logPath, 'utf8').slice(-3000)}`)
  // Restored Nodes name the kubelet port of the kwok that saved them.
  if (kubelet && opts.restored) await kubelet.stampNodes(opts.restored)
  return {
    logPath: proc.logPath,
    async stop() {
      await kubelet?.close()
      await stopProcess(proc)
      rmSync(work, {recursive: true, force: true})
    },
  }
}

/**
 * The kubelet API's port-forward, served by kwok (v0.8.0 pkg/kwok/server/debugging_port_forword.go:
 * `/portForward/{ns}/{pod}` answers as a kubelet's, and a kwok.x-k8s.io PortForward object says
 * where a pod's port goes: `forwardPodPort` below). The API server reaches a Node's kubelet at
 * its address (`--kubelet-preferred-address-types=InternalIP`, apiserver.ts) and
 * `status.daemonEndpoints.kubeletEndpoint.Port`, which kwok's node-initialize Stage writes from
 * `--node-port` (kustomize/stage/node/fast/node-initialize.yaml). kwok listens on one address, the
 * Nodes have one each (127.0.0.x): a relay on every Node address, all on the same port, hands
 * the connections to kwok on 127.0.0.1. Nothing listens beyond the loopback.
 */
async function kubeletPortForward(kubeconfigPath: string, nodeIps: string[]) {
  const kc = loadKubeConfig(kubeconfigPath)
  await installPortForwardCrd(kc)
  const kwokPort = await freePort('127.0.0.1')
  const relays = await relayOnSamePort(nodeIps, kwokPort)
  const nodePort = (relays[0]!.address() as {port: number}).port
  return {
    kwokArgs: [`--server-address=127.0.0.1:${kwokPort}`, `--node-port=${nodePort}`, '--enable-crds=PortForward'],
    async stampNodes(restored: KubeConfig) {
      const core = restored.makeApiClient(CoreV1Api)
      for (const node of (await core.listNode()).items) {
        if (node.metadata?.annotations?.[KWOK_NODE_ANNOTATION] !== 'fake') continue
        await core.patchNodeStatus(
          {name: node.metadata.name!, body: {status: {daemonEndpoints: {kubeletEndpoint: {Port: nodePort}}}}},
          setHeaderOptions('Content-Type', 'application/merge-patch+json'),
        )
      }
    },
    close: () => Promise.all(relays.map((r) => new Promise<void>((resolve) => r.close(() => resolve())))).then(() => undefined),
  }
}

/** Where the pod's ports go when the API server port-forwards to it: a TCP server of the test's. */
export async function forwardPodPort(kc: KubeConfig, pod: {namespace: string; name: string}, target: {address: string; port: number}): Promise<void> {
  await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    group: 'kwok.x-k8s.io',
    version: 'v1alpha1',
    namespace: pod.namespace,
    plural: 'portforwards',
    // No `ports`: every port of the pod goes to the target.
    body: {apiVersion: 'kwok.x-k8s.io/v1alpha1', kind: 'PortForward', metadata: {name: pod.name, namespace: pod.namespace}, spec: {forwards: [{target}]}},
  })
}

/**
 * kwok's PortForward CRD, reduced to what kwok reads (the full schema is kwok v0.8.0
 * kustomize/crd/bases/kwok.x-k8s.io_portforwards.yaml). Already there is fine.
 */
async function installPortForwardCrd(kc: KubeConfig): Promise<void> {
  const api = kc.makeApiClient(ApiextensionsV1Api)
  try {
    await api.createCustomResourceDefinition({
      body: {
        metadata: {name: 'portforwards.kwok.x-k8s.io'},
        spec: {
          group: 'kwok.x-k8s.io',
          names: {kind: 'PortForward', listKind: 'PortForwardList', plural: 'portforwards', singular: 'portforward'},
          scope: 'Namespaced',
          versions: [
            {
              name: 'v1alpha1',
              served: true,
              storage: true,
              subresources: {status: {}},
              schema: {openAPIV3Schema: {type: 'object', x_kubernetes_preserve_unknown_fields: true}},
            },
          ],
        },
      },
    })
  } catch (err) {
    if ((err as {code?: number}).code !== 409) throw err
  }
  await waitForCrdEstablished(kc, 'portforwards.kwok.x-k8s.io')
}

async function freePort(host: string): Promise<number> {
  const server = await listenOn(createServer(), host, 0)
  const {port} = server.address() as {port: number}
  await new Promise((r) => server.close(r))
  return port
}

function listenOn(server: Server, host: string, port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen({host, port}, () => {
      server.off('error', reject)
      resolve(server)
    })
  })
}

/** A relay to 127.0.0.1:`to` on each address, one port for all (a free one on every address). */
async function relayOnSamePort(addresses: string[], to: number): Promise<Server[]> {
  const relay = () =>
    createServer((socket) => {
      const upstream = createConnection({host: '127.0.0.1', port: to})
      socket.pipe(upstream).pipe(socket)
      socket.on('error', () => upstream.destroy())
      upstream.on('error', () => socket.destroy())
    })
  for (let attempt = 0; attempt < 20; attempt++) {
    const servers: Server[] = [await listenOn(relay(), addresses[0]!, 0)]
    const port = (servers[0]!.address() as {port: number}).port
    try {
      for (const address of addresses.slice(1)) servers.push(await listenOn(relay(), address, port))
      for (const s of servers) s.unref()
      return servers
    } catch {
      await Promise.all(servers.map((s) => new Promise((r) => s.close(r))))
    }
  }
  throw new Error(`no port free on every one of ${addresses.join(', ')}`)
}

/**
 * Registers a machine's kubelet: a Node kwok plays, with the labels, taints and address given
 * (Talos's for its nodes: see test/sim/kubelet-registration.mjs). Already there is fine.
 */
export async function registerNode(
  kc: KubeConfig,
  node: {
    name: string
    ip: string
    labels?: Record<string, string>
    taints?: V1Node['spec'] extends infer S ? (S extends {taints?: infer T} ? T : never) : never
  },
): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api)
  try {
    await core.createNode({
      body: {
        metadata: {
          name: node.name,
          labels: {'kubernetes.io/hostname': node.name, 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64', ...node.labels},
          annotations: {[KWOK_NODE_ANNOTATION]: 'fake'},
        },
        spec: {taints: node.taints},
        status: {
          addresses: [
            {type: 'InternalIP', address: node.ip},
            {type: 'Hostname', address: node.name},
          ],
        },
      },
    })
  } catch (err) {
    if ((err as {code?: number}).code !== 409) throw err
  }
}

// The pod Stages. Every one skips pods being deleted (kwok's pod-delete Stage removes them).
function podStages(readyMs: number): string[] {
  const notDeleted = `    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'`
  const pending = `    - key: '.status.phase'
      operator: 'In'
      values: ['Pending']`
  const fault = (value: PodFault) => `    - key: '.metadata.labels["${FAULT_LABEL}"]'
      operator: 'In'
      values: ['${value}']`
  const admitted = `    - key: '.metadata.annotations["${ADMITTED_ANNOTATION}"]'
      operator: 'Exists'`
  // The status of a started pod; `ready` decides the Ready conditions and container readiness.
  // A pod started again (a lifted fault) keeps its IP: the patch merges podIPs, and the API
  // server allows one IP per family.
  const started = (ready: boolean, containerState: string, restartCount: number, phase = 'Running') => `
      {{ $now := Now }}
      conditions:
      - {type: Initialized, status: "True", lastTransitionTime: {{ $now | Quote }}}
      - {type: Ready, status: "${ready ? 'True' : 'False'}", lastTransitionTime: {{ $now | Quote }}}
      - {type: ContainersReady, status: "${ready ? 'True' : 'False'}", lastTransitionTime: {{ $now | Quote }}}
      - {type: PodScheduled, status: "True", lastTransitionTime: {{ $now | Quote }}}
      {{ range .spec.readinessGates }}
      - {type: {{ .conditionType | Quote }}, status: "${ready ? 'True' : 'False'}", lastTransitionTime: {{ $now | Quote }}}
      {{ end }}
      containerStatuses:
      {{ range .spec.containers }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        imageID: ""
        ready: ${ready}
        started: ${containerState === 'running'}
        restartCount: ${restartCount}
        state:${
          containerState === 'running'
            ? `
          running: {startedAt: {{ $now | Quote }}}`
            : `
          waiting: ${containerState}`
        }
      {{ end }}
      initContainerStatuses:
      {{ range .spec.initContainers }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        imageID: ""
        ready: true
        restartCount: 0
        state:
          terminated: {exitCode: 0, reason: Completed, startedAt: {{ $now | Quote }}, finishedAt: {{ $now | Quote }}}
      {{ end }}
      {{ with NodeIPWith .spec.nodeName }}
      hostIP: {{ . | Quote }}
      hostIPs: [{ip: {{ . | Quote }}}]
      {{ end }}
      {{ if not .status.podIP }}
      {{ with PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
      podIP: {{ . | Quote }}
      podIPs: [{ip: {{ . | Quote }}}]
      {{ end }}
      {{ end }}
      phase: ${phase}
      startTime: {{ $now | Quote }}`
  // A Job's pod once its containers exited 0.
  const completed = `
      {{ $now := Now }}
      containerStatuses:
      {{ range .spec.containers }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        imageID: ""
        ready: false
        started: false
        restartCount: 0
        state:
          terminated: {exitCode: 0, reason: Completed, startedAt: {{ $now | Quote }}, finishedAt: {{ $now | Quote }}}
      {{ end }}
      phase: Succeeded`
  // `next` is the status template to write, or 'delete' (the pod object goes).
  const stage = (name: string, selector: string[], next: string, delayMs = 0) => `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: ${name}
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
${selector.join('\n')}
${delayMs ? `  delay:\n    durationMilliseconds: ${delayMs}\n` : ''}  next:
${next === 'delete' ? '    delete: true' : `    statusTemplate: |${next.replace(/\n/g, '\n  ')}`}
`
  return [
    // Admitted, no fault, not Ready yet (Pending, or Running after a lifted fault): started and Ready.
    stage(
      'harness-pod-ready',
      [
        notDeleted,
        admitted,
        `    - key: '.metadata.labels["${FAULT_LABEL}"]'
      operator: 'DoesNotExist'`,
        `    - key: '.status.phase'
      operator: 'In'
      values: ['Pending', 'Running']`,
        `    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values: ['True']`,
      ],
      started(true, 'running', 0),
      readyMs,
    ),
    // Running but never Ready, as a pod whose readiness probe keeps failing.
    stage('harness-pod-unready', [notDeleted, admitted, pending, fault('unready')], started(false, 'running', 0), readyMs),
    // The container exits at once, again and again: kubelet's back-off (CrashLoopBackOff).
    stage(
      'harness-pod-crashloop',
      [notDeleted, admitted, pending, fault('crashloop')],
      started(false, '{reason: CrashLoopBackOff, message: "back-off restarting failed container"}', 3),
      readyMs,
    ),
    // The image cannot be pulled: the pod stays Pending with ImagePullBackOff.
    stage(
      'harness-pod-image-pull',
      [
        notDeleted,
        admitted,
        pending,
        fault('image-pull'),
        `    - key: '.status.containerStatuses'
      operator: 'DoesNotExist'`,
      ],
      started(false, '{reason: ImagePullBackOff, message: "Back-off pulling image"}', 0, 'Pending'),
      readyMs,
    ),
    // kwok's pod/fast behaviour for the rest: a Job's pods complete, a deleted pod goes away.
    stage(
      'harness-pod-complete',
      [
        notDeleted,
        `    - key: '.status.phase'
      operator: 'In'
      values: ['Running']`,
        `    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'In'
      values: ['True']`,
        `    - key: '.metadata.ownerReferences.[].kind'
      operator: 'In'
      values: ['Job']`,
      ],
      completed,
    ),
    stage(
      'harness-pod-delete',
      [
        `    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'`,
      ],
      'delete',
    ),
  ]
}
