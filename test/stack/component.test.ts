import {readFileSync} from 'node:fs'
import {beforeAll, describe, expect, it} from 'vitest'
import {ARGOCD_DEFAULT_VALUES} from '../../src/lib/stack/argocd.js'
import {renderComponent, type RenderedComponent} from '../../src/lib/stack/component.js'
import {parseObjects, serializeObjects} from '../../src/lib/stack/objects.js'
import type {KubeObject} from '../../src/lib/kube/objects.js'
import {UPSTREAM} from '../support/upstream.js'

const kokumiGenerated = {adminPassword: 'kokumi-admin-generated-Xy7Qp2', signingKey: 'kokumi-signing-key-generated-5d8f0a1c2b3e4f60718293a4'}
const redisPassword = 'argocd-redis-generated-Pq81Zt06'
const registryUrl = 'oci://kokumi-registry.kokumi.svc.cluster.local:5000'

const renderKokumi = () =>
  renderComponent('kokumi', {manifestPath: UPSTREAM.kokumiManifest, defaultStorageClass: false, generated: kokumiGenerated, userValues: {}, bcryptCost: 4})
const renderArgo = () =>
  renderComponent('argocd', {chartPath: UPSTREAM.argocdChart, values: ARGOCD_DEFAULT_VALUES, redisPassword, kubeVersion: '1.34.0', registryUrl})

type Selector = {matchLabels?: Record<string, string>; matchExpressions?: Array<{key: string; operator: string; values?: string[]}>}
interface Pod {
  namespace: string
  workload: string
  labels: Record<string, string>
  containers: any[]
}

function pods(objects: KubeObject[]): Pod[] {
  return objects
    .filter((o) => ['Deployment', 'StatefulSet', 'DaemonSet'].includes(o.kind))
    .map((o) => {
      const t = (o.spec as any).template
      return {namespace: o.metadata.namespace!, workload: o.metadata.name, labels: t.metadata.labels ?? {}, containers: t.spec.containers}
    })
}

/** Cilium's selector semantics for pod labels; io.kubernetes.pod.namespace is the pod's namespace, else the policy's. */
function matches(sel: Selector, pod: Pod, policyNamespace: string): boolean {
  const labels: Record<string, string> = {...pod.labels, 'io.kubernetes.pod.namespace': pod.namespace}
  const wantNs = sel.matchLabels?.['io.kubernetes.pod.namespace'] ?? policyNamespace
  if (pod.namespace !== wantNs) return false
  for (const [k, v] of Object.entries(sel.matchLabels ?? {})) if (labels[k] !== v) return false
  for (const e of sel.matchExpressions ?? []) {
    const has = e.key in labels
    if (e.operator === 'In' && !(has && e.values!.includes(labels[e.key]!))) return false
    if (e.operator === 'NotIn' && has && e.values!.includes(labels[e.key]!)) return false
    if (e.operator === 'Exists' && !has) return false
    if (e.operator === 'DoesNotExist' && has) return false
  }
  return true
}

describe('renderComponent with the real Kokumi manifest and Argo CD chart', () => {
  let kokumi: RenderedComponent
  let argocd: RenderedComponent
  beforeAll(async () => {
    kokumi = await renderKokumi()
    argocd = await renderArgo()
  })

  it('reports namespace and version', () => {
    expect([kokumi.component, kokumi.namespace, kokumi.version]).toEqual(['kokumi', 'kokumi', '0.14.0'])
    expect([argocd.component, argocd.namespace, argocd.version]).toEqual(['argocd', 'argocd', '10.1.1'])
  })

  it('puts every Secret in secrets, none in objects or in the manifest', () => {
    expect(kokumi.secrets.map((s) => s.metadata.name)).toEqual(['kokumi-server-auth'])
    expect(argocd.secrets.map((s) => s.metadata.name)).toEqual(['argocd-redis', 'argocd-secret', 'ichor-kokumi-registry'])
    for (const c of [kokumi, argocd]) {
      expect(c.objects.filter((o) => o.kind === 'Secret')).toEqual([])
      expect(parseObjects(c.manifest).filter((o) => o.kind === 'Secret')).toEqual([])
      expect(c.manifest).not.toMatch(/^kind: Secret$/m)
    }
  })

  it('leaks no generated value into a manifest (password, its bcrypt hash, signing key, redis password)', () => {
    const hash = (kokumi.secrets[0]!.stringData as Record<string, string>)['password-hash']!
    for (const c of [kokumi, argocd]) {
      for (const value of [kokumiGenerated.adminPassword, kokumiGenerated.signingKey, hash, redisPassword]) {
        expect(c.manifest.includes(value), `${c.component} manifest holds a generated value`).toBe(false)
      }
    }
    expect((argocd.secrets[0]!.stringData as Record<string, string>).auth).toBe(redisPassword)
  })

  it('appends the policies to the manifest; the objects alone (applied first, policies last) hold none', () => {
    for (const c of [kokumi, argocd]) {
      expect(c.manifest).toBe(serializeObjects([...c.objects, ...c.policies]))
      expect(c.objects.some((o) => o.kind === 'CiliumNetworkPolicy')).toBe(false)
      expect(parseObjects(c.manifest).filter((o) => o.kind === 'CiliumNetworkPolicy')).toHaveLength(c.policies.length)
    }
    expect(argocd.objects.some((o) => o.kind === 'AppProject' && o.metadata.name === 'default')).toBe(true)
  })

  it('renders the same bytes twice (a second helm run included)', async () => {
    expect((await renderKokumi()).manifest).toBe(kokumi.manifest)
    expect((await renderArgo()).manifest).toBe(argocd.manifest)
  })

  it('every policy selector selects a real pod of the rendered components', () => {
    const all = [...pods(kokumi.objects), ...pods(argocd.objects)]
    for (const c of [kokumi, argocd]) {
      for (const p of c.policies) {
        const spec = p.spec as any
        const selectors: Selector[] = [spec.endpointSelector]
        for (const r of [...(spec.ingress ?? []), ...(spec.egress ?? [])]) selectors.push(...(r.fromEndpoints ?? []), ...(r.toEndpoints ?? []))
        for (const s of selectors) {
          if (s.matchLabels?.['io.kubernetes.pod.namespace'] === 'kube-system') continue // kube-dns is not ours
          expect(
            all.some((pod) => matches(s, pod, c.namespace)),
            `${c.component}/${p.metadata.name}: ${JSON.stringify(s)} selects no pod`,
          ).toBe(true)
        }
      }
    }
  })

  it('admits every kubelet probe of every pod from the host entity', () => {
    for (const c of [kokumi, argocd]) {
      for (const pod of pods(c.objects)) {
        for (const container of pod.containers) {
          const named = Object.fromEntries((container.ports ?? []).map((p: any) => [p.name, p.containerPort]))
          for (const probe of [container.livenessProbe, container.readinessProbe, container.startupProbe]) {
            const port = probe?.httpGet?.port ?? probe?.tcpSocket?.port
            if (port === undefined) continue // exec probes need no network
            const number = String(typeof port === 'string' ? named[port] : port)
            const allowed = c.policies.some((p) => {
              const spec = p.spec as any
              return (
                matches(spec.endpointSelector, pod, c.namespace) &&
                (spec.ingress ?? []).some(
                  (r: any) =>
                    (r.fromEntities ?? []).includes('host') &&
                    r.toPorts.some((tp: any) => tp.ports.some((x: any) => x.port === number && x.protocol === 'TCP')),
                )
              )
            })
            expect(allowed, `${pod.workload}/${container.name} probe on ${number}`).toBe(true)
          }
        }
      }
    }
  })

  it('the Kokumi bundle keeps no NodePort and no PVC', () => {
    expect(kokumi.manifest).not.toMatch(/NodePort|nodePort|PersistentVolumeClaim/)
    expect(readFileSync(UPSTREAM.kokumiManifest, 'utf8')).toMatch(/NodePort/)
  })
})
