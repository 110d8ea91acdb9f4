// The IchorInstallation a cluster holds after `ichor init`, for plan tests on planFixture.
import {INSTALLATION} from '../../src/lib/constants.js'
import type {KubeObject} from '../../src/lib/kube/objects.js'
import {type PromotionMode, STACK_COMPONENTS, type StackComponent} from '../../src/lib/state/installation-types.js'

/** One control plane, kube-proxy replaced, no user values; the status records the bundles ichor pushed (tag, digest). */
export function ichorInstallation(o: {promotion?: PromotionMode; pushed?: (c: StackComponent) => {tag: string; digest: string}} = {}): KubeObject {
  return {
    apiVersion: INSTALLATION.apiVersion,
    kind: INSTALLATION.kind,
    metadata: {name: INSTALLATION.name},
    spec: {
      talos: {
        clusterName: 'homelab',
        endpoint: 'https://192.0.2.10:6443',
        talosVersion: 'v1.11.5',
        kubernetesVersion: '1.34.1',
        controlPlanes: ['192.0.2.10'],
        workers: [],
      },
      cni: {kubeProxy: 'replaced', tunnel: 'vxlan', cilium: {values: {}}},
      stack: {promotion: o.promotion ?? 'Automatic', argocd: {values: {}}, kokumi: {values: {}}},
    },
    ...(o.pushed
      ? {
          status: {
            stack: Object.fromEntries(
              STACK_COMPONENTS.map((c) => [
                c,
                {publishedTag: o.pushed!(c).tag, digest: o.pushed!(c).digest, orderReady: true, applicationSync: 'Synced', applicationHealth: 'Healthy'},
              ]),
            ),
          },
        }
      : {}),
  } as KubeObject
}
