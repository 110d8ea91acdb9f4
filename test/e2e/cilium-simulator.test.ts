// The Cilium operator simulator across a Cilium upgrade, on a bare real control plane
// (kube-apiserver + etcd, nothing else). The real cilium-operator registers the CRDs of its own
// version every time it starts (github.com/cilium/cilium pkg/k8s/apis/cilium.io/client/register.go,
// CreateCustomResourceDefinitions), so a chart upgrade, which rolls the operator to the new image,
// updates every CRD whose schema-version label is older than the new operator's and never
// downgrades one (pkg/k8s/apis/crdhelpers/register.go, CreateUpdateCRD and its needs-update check).
import {ApiextensionsV1Api, AppsV1Api, CoreV1Api, CustomObjectsApi, type KubeConfig, type V1Deployment} from '@kubernetes/client-node'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {startControlPlane, type ControlPlane} from '../harness/apiserver.js'
import {
  ciliumCrd,
  ciliumCrdNamesFor,
  ciliumModuleFor,
  pinnedCiliumVersions,
  startCiliumOperatorSimulator,
  type CiliumOperatorSimulator,
} from '../harness/cilium-simulator.js'
import {loadKubeConfig, waitUntil} from '../harness/kube.js'

const SCHEMA_VERSION_LABEL = 'io.cilium.k8s.crd.schema.version'
// CustomResourceDefinitionSchemaVersion in pkg/k8s/apis/cilium.io/register.go of each tag.
const SCHEMA_1_18_0 = '1.31.11'
const SCHEMA_1_19_6 = '1.32.7'
const SCHEMA_1_20_0 = '1.33.11'
const CNP = 'ciliumnetworkpolicies.cilium.io'
const CCNP = 'ciliumclusterwidenetworkpolicies.cilium.io'
// The operator image as the chart renders it (operator.image with useDigest; the digest is not checked).
const operatorImage = (version: string) => `quay.io/cilium/operator-generic:v${version}@sha256:${'0'.repeat(64)}`

let cp: ControlPlane
let kc: KubeConfig
let operator: CiliumOperatorSimulator

function operatorDeployment(version: string): V1Deployment {
  return {
    metadata: {name: 'cilium-operator', namespace: 'kube-system', labels: {'app.kubernetes.io/name': 'cilium-operator'}},
    spec: {
      selector: {matchLabels: {'io.cilium/app': 'operator'}},
      template: {metadata: {labels: {'io.cilium/app': 'operator'}}, spec: {containers: [{name: 'cilium-operator', image: operatorImage(version)}]}},
    },
  }
}

async function setOperatorVersion(version: string): Promise<void> {
  const apps = kc.makeApiClient(AppsV1Api)
  const live = await apps.readNamespacedDeployment({namespace: 'kube-system', name: 'cilium-operator'})
  live.spec!.template.spec!.containers[0]!.image = operatorImage(version)
  await apps.replaceNamespacedDeployment({namespace: 'kube-system', name: 'cilium-operator', body: live})
}

async function schemaVersion(name: string): Promise<string | undefined> {
  const crd = await kc.makeApiClient(ApiextensionsV1Api).readCustomResourceDefinition({name})
  return crd.metadata?.labels?.[SCHEMA_VERSION_LABEL]
}

/** A CiliumNetworkPolicy allowing VRRP out: the protocol enum has VRRP from Cilium 1.19 on (crds/v2/ciliumnetworkpolicies.yaml). */
const vrrpPolicy = (name: string) => ({
  apiVersion: 'cilium.io/v2',
  kind: 'CiliumNetworkPolicy',
  metadata: {name, namespace: 'default'},
  spec: {endpointSelector: {}, egress: [{toEntities: ['cluster'], toPorts: [{ports: [{port: '0', protocol: 'VRRP'}]}]}]},
})

beforeAll(async () => {
  cp = await startControlPlane()
  kc = loadKubeConfig(cp.kubeconfigPath)
  operator = startCiliumOperatorSimulator({kubeconfigPath: cp.kubeconfigPath, intervalMs: 50})
})

afterAll(async () => {
  await operator?.stop()
  await cp?.stop()
})

describe('Cilium operator simulator across an upgrade', () => {
  it("simulator: an operator rolled from 1.18.0 to 1.19.6 updates Cilium's CRDs to 1.19.6's (schema-version label and schema), and a roll back to 1.18.0 never downgrades them", async () => {
    const custom = kc.makeApiClient(CustomObjectsApi)
    await kc.makeApiClient(AppsV1Api).createNamespacedDeployment({namespace: 'kube-system', body: operatorDeployment('1.18.0')})
    await operator.installed
    await waitUntil('the 1.18.0 CRDs', async () => (await schemaVersion(CNP)) === SCHEMA_1_18_0 && (await schemaVersion(CCNP)) === SCHEMA_1_18_0)
    // 1.18.0's schema has no VRRP in the port protocol enum.
    await expect(
      custom.createNamespacedCustomObject({
        group: 'cilium.io',
        version: 'v2',
        plural: 'ciliumnetworkpolicies',
        namespace: 'default',
        body: vrrpPolicy('vrrp-118'),
      }),
    ).rejects.toThrow(/protocol: Unsupported value: \\+"VRRP/)

    // `cni upgrade` to 1.19.6: the operator Deployment's image changes, a new operator starts.
    await setOperatorVersion('1.19.6')
    await waitUntil('the 1.19.6 CRDs', async () => (await schemaVersion(CNP)) === SCHEMA_1_19_6 && (await schemaVersion(CCNP)) === SCHEMA_1_19_6, {
      timeoutMs: 60_000,
    })
    await waitUntil(
      'the 1.19.6 CiliumNetworkPolicy schema served',
      async () => {
        await custom.createNamespacedCustomObject({
          group: 'cilium.io',
          version: 'v2',
          plural: 'ciliumnetworkpolicies',
          namespace: 'default',
          body: vrrpPolicy('vrrp-119'),
        })
        return true
      },
      {timeoutMs: 60_000},
    )

    // Back to 1.18.0 (a rollback): the 1.18.0 operator finds newer labels and leaves the CRDs alone.
    await setOperatorVersion('1.18.0')
    expect(await operator.synced()).toMatchObject({version: '1.18.0', module: '1.18.0', actions: {[CNP]: 'unchanged', [CCNP]: 'unchanged'}})
    expect(await schemaVersion(CNP)).toBe(SCHEMA_1_19_6)
    expect(await schemaVersion(CCNP)).toBe(SCHEMA_1_19_6)
  })

  it('simulator: the operator registers the CRDs its cilium-config enables, on the next rollout only; 1.20.0 updates them again', async () => {
    const ext = kc.makeApiClient(ApiextensionsV1Api)
    const ciliumCrds = async () =>
      (await ext.listCustomResourceDefinition()).items
        .filter((c) => c.spec.group === 'cilium.io')
        .map((c) => c.metadata!.name!)
        .sort()
    // What the first test's operators registered: the chart's defaults (no cilium-config yet).
    await operator.synced()
    expect(await ciliumCrds()).toEqual(ciliumCrdNamesFor('1.19.6').sort())
    expect(await ciliumCrds()).toEqual(
      expect.arrayContaining(['ciliumidentities.cilium.io', 'ciliumendpoints.cilium.io', 'ciliumnodes.cilium.io', 'ciliumcidrgroups.cilium.io']),
    )
    expect(await ciliumCrds()).not.toContain('ciliumenvoyconfigs.cilium.io')

    // A cilium-config change alone restarts no operator (operator.rollOutPods is false by default):
    // the envoy CRDs stay absent until the operator's pod template changes.
    await kc
      .makeApiClient(CoreV1Api)
      .createNamespacedConfigMap({namespace: 'kube-system', body: {metadata: {name: 'cilium-config'}, data: {'enable-envoy-config': 'true'}}})
    await new Promise((r) => setTimeout(r, 500))
    expect(await ciliumCrds()).not.toContain('ciliumenvoyconfigs.cilium.io')
    await setOperatorVersion('1.20.0')
    const start = await operator.synced()
    expect(start).toMatchObject({version: '1.20.0', module: '1.20.0'})
    expect(await ciliumCrds()).toEqual(expect.arrayContaining(['ciliumenvoyconfigs.cilium.io', 'ciliumclusterwideenvoyconfigs.cilium.io']))
    expect(start.actions['ciliumenvoyconfigs.cilium.io']).toBe('created')
    expect(start.actions['ciliumnetworkpolicies.cilium.io']).toBe('updated')
    expect(await schemaVersion(CNP)).toBe(SCHEMA_1_20_0)
    expect(await schemaVersion('ciliumenvoyconfigs.cilium.io')).toBe(SCHEMA_1_20_0)
  })

  it('simulator: an operator whose Go module is not served (1.18.12) registers the nearest older pinned one (1.18.0), and says so', () => {
    expect(pinnedCiliumVersions()).toEqual(['1.18.0', '1.19.6', '1.20.0'])
    expect(ciliumModuleFor('1.18.12')).toMatchObject({module: '1.18.0', note: expect.stringMatching(/1\.18\.12.*not pinned.*1\.18\.0/)})
    expect(ciliumModuleFor('1.19.6')).toEqual({module: '1.19.6'})
    expect(() => ciliumModuleFor('1.17.9')).toThrow(/no Cilium module pinned at or below 1\.17\.9/)
  })

  it("simulator: the CRD set per version follows pkg/k8s/synced/crd.go, and every CRD it names is one of that module's pregenerated ones", () => {
    const everything = {
      'enable-cilium-endpoint-slice': 'true',
      'enable-egress-gateway': 'true',
      'enable-local-redirect-policy': 'true',
      'enable-envoy-config': 'true',
      'enable-bgp-control-plane': 'true',
      'enable-datapath-plugins': 'true',
      'enable-gateway-api': 'true',
    }
    for (const v of pinnedCiliumVersions()) {
      for (const name of ciliumCrdNamesFor(v, everything))
        expect(ciliumCrd(v, name).metadata.labels?.['io.cilium.k8s.crd.schema.version']).toMatch(/^1\.\d+\.\d+$/)
    }
    // BGPv1's v2alpha1 CiliumBGPPeeringPolicy: registered by 1.18 only; CiliumDatapathPlugin: 1.20 only.
    expect(ciliumCrdNamesFor('1.18.0', everything)).toContain('ciliumbgppeeringpolicies.cilium.io')
    expect(ciliumCrdNamesFor('1.19.6', everything)).not.toContain('ciliumbgppeeringpolicies.cilium.io')
    expect(ciliumCrdNamesFor('1.19.6', everything)).not.toContain('ciliumdatapathplugins.cilium.io')
    expect(ciliumCrdNamesFor('1.20.0', everything)).toContain('ciliumdatapathplugins.cilium.io')
    // Without a kvstore, disable-endpoint-crd is turned back off while policies are enforced.
    expect(ciliumCrdNamesFor('1.19.6', {'disable-endpoint-crd': 'true'})).toContain('ciliumendpoints.cilium.io')
    expect(ciliumCrdNamesFor('1.19.6', {'enable-cilium-network-policy': 'false', 'enable-cilium-clusterwide-network-policy': 'false'})).not.toContain(
      'ciliumcidrgroups.cilium.io',
    )
  })
})
