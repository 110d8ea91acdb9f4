// `ichor open`: which Service each UI is behind, and the pod and port a port-forward reaches, as
// `kubectl port-forward svc/NAME` resolves them: the Service's selector picks the pods, a running
// and ready one is taken, and the Service port's targetPort is a number or a container port's name.
import {ARGOCD_NAMESPACE, CILIUM_RELEASE} from '../constants.js'
import {IchorError} from '../errors/errors.js'
import type {KubeObject} from '../kube/objects.js'
import {KOKUMI_OBJECTS} from '../stack/kokumi.js'

export const OPEN_COMPONENTS = ['argocd', 'kokumi', 'hubble'] as const
export type OpenComponent = (typeof OPEN_COMPONENTS)[number]

export interface OpenTarget {
  title: string
  namespace: string
  service: string
  /** The Service port to reach: its name, else its number; the Service's first port when neither is there. */
  servicePort: {name: string; port: number}
  scheme: 'http' | 'https'
  /** The local port without --port: the one the component's own docs port-forward to. */
  defaultPort: number
  /** Who logs in, and the command that prints the password (never the password itself). */
  login?: {user: string; passwordCommand: string}
  /** What to say when the Service is not there. */
  missingHint: string
}

export const OPEN_TARGETS: Record<OpenComponent, OpenTarget> = {
  // argo-cd chart: Service argocd-server, ports http 80 and https 443, both to the server's 8080,
  // which answers TLS with its own certificate (ichor does not set server.insecure).
  argocd: {
    title: 'Argo CD',
    namespace: ARGOCD_NAMESPACE,
    service: 'argocd-server',
    servicePort: {name: 'https', port: 443},
    scheme: 'https',
    defaultPort: 8080,
    login: {user: 'admin', passwordCommand: 'ichor stack password argocd'},
    missingHint: 'ichor init installs Argo CD; ichor stack status shows the stack',
  },
  // Kokumi's install.yaml: Service kokumi-server (made ClusterIP by ichor), port 80.
  kokumi: {
    title: 'Kokumi',
    namespace: 'kokumi',
    service: KOKUMI_OBJECTS.serverService,
    servicePort: {name: 'http', port: 80},
    scheme: 'http',
    defaultPort: 8081,
    login: {user: 'admin', passwordCommand: 'ichor stack password kokumi'},
    missingHint: 'ichor init installs Kokumi; ichor stack status shows the stack',
  },
  // Cilium chart, hubble.ui.enabled: Service hubble-ui in kube-system, port 80 to the frontend's 8081.
  hubble: {
    title: 'Hubble UI',
    namespace: CILIUM_RELEASE.namespace,
    service: 'hubble-ui',
    servicePort: {name: 'http', port: 80},
    scheme: 'http',
    // `cilium hubble ui` forwards to 12000.
    defaultPort: 12000,
    missingHint:
      'the Hubble UI is off: Cilium installs it with the values hubble.ui.enabled=true and hubble.relay.enabled=true, e.g. ichor cni values set hubble.ui.enabled=true hubble.relay.enabled=true',
  },
}

export interface ServicePort {
  name?: string
  port: number
  targetPort?: number | string
}
export type Service = KubeObject & {spec?: {selector?: Record<string, string>; ports?: ServicePort[]}}
export type Pod = KubeObject & {
  metadata: KubeObject['metadata'] & {deletionTimestamp?: string}
  spec?: {containers?: Array<{name: string; ports?: Array<{name?: string; containerPort: number}>}>}
  status?: {phase?: string; conditions?: Array<{type: string; status: string}>}
}

/** The Service port `target` asks for: by name, else by number, else the first one. */
export function servicePortOf(service: Service, target: OpenTarget): ServicePort {
  const ports = service.spec?.ports ?? []
  const port = ports.find((p) => p.name === target.servicePort.name) ?? ports.find((p) => p.port === target.servicePort.port) ?? ports[0]
  if (!port) throw new IchorError(`Service ${target.namespace}/${target.service} has no ports`)
  return port
}

/** The Service's selector as a label selector; a Service without one has no pods to forward to. */
export function selectorOf(service: Service, target: OpenTarget): string {
  const selector = Object.entries(service.spec?.selector ?? {})
  if (selector.length === 0) throw new IchorError(`Service ${target.namespace}/${target.service} has no selector, so no pod to forward to`)
  return selector.map(([k, v]) => `${k}=${v}`).join(',')
}

const ready = (p: Pod): boolean => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false

/** A running, ready pod that is not going away (the first by name, so the choice is stable); undefined when none. */
export function readyPod(pods: Pod[]): Pod | undefined {
  return pods
    .filter((p) => p.status?.phase === 'Running' && !p.metadata.deletionTimestamp && ready(p))
    .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))[0]
}

/** The pod's port the Service port goes to: a number, a container port's name, or the Service port itself. */
export function podPortOf(port: ServicePort, pod: Pod, target: OpenTarget): number {
  const t = port.targetPort
  if (t === undefined) return port.port
  if (typeof t === 'number') return t
  if (/^\d+$/.test(t)) return Number(t)
  for (const c of pod.spec?.containers ?? []) {
    const named = c.ports?.find((p) => p.name === t)
    if (named) return named.containerPort
  }
  throw new IchorError(
    `Service ${target.namespace}/${target.service} port ${port.name ?? port.port} targets the port named "${t}", which no container of pod ${pod.metadata.name} declares`,
  )
}

/** Why no pod is there yet, naming what was seen. */
export function noReadyPod(pods: Pod[], target: OpenTarget, selector: string): IchorError {
  const seen = pods
    .map((p) => `${p.metadata.name} (${p.status?.phase ?? 'no phase'}${p.status?.phase === 'Running' && !ready(p) ? ', not ready' : ''})`)
    .join(', ')
  return new IchorError(
    `no running and ready pod behind Service ${target.namespace}/${target.service} (selector ${selector})${seen ? `; found ${seen}` : ''}`,
    {hint: `kubectl -n ${target.namespace} get pods -l ${selector} shows them; --timeout waits longer`},
  )
}
