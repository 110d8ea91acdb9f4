// The Cilium side of the kube-proxy switch (ADR-0099 decision 9): the new mode goes through
// the values engine exactly as `cni values set` does (kubeProxyReplacement, k8sServiceHost and
// k8sServicePort are owned keys derived from the mode), then cilium-config is checked for the
// value the agents read. The mode is recorded in the IchorInstallation first, as the switch's
// intent, so a run stopped half-way is visible to `cni status` with the command that finishes it.
import {CILIUM_RELEASE} from '../constants.js'
import {IchorError, ValidationError} from '../errors/errors.js'
import {readConfigMapKey} from '../kube/reads.js'
import type {Kube} from '../kube/client.js'
import {waitFor} from '../kube/wait.js'
import type {Session} from '../session/session.js'
import {readInstallation, writeInstallationSpec} from '../state/installation.js'
import {holds, missing} from '../tasks/probe.js'
import type {Task} from '../tasks/types.js'
import {type ChangeSources, chartOfRelease, readLiveFacts, validatedChange} from './change.js'
import {readCniContext, type CniContext} from './context.js'
import type {KubeProxyMode} from '../state/installation-types.js'
import type {CiliumValuesChange} from './tasks.js'
import {validateCiliumValues} from './validate.js'

const CILIUM_CONFIG = {namespace: CILIUM_RELEASE.namespace, name: 'cilium-config', key: 'kube-proxy-replacement'} as const

/** The value Cilium's chart writes into cilium-config for a mode (templates/cilium-configmap.yaml). */
function kubeProxyReplacementValue(mode: KubeProxyMode): string {
  return String(mode === 'replaced')
}

/** The stored user layer under the target mode, validated with the live cluster's facts; invalid is exit 2. */
export async function prepareKubeProxySwitch(kube: Kube, target: KubeProxyMode, sources: ChangeSources): Promise<CiliumValuesChange & {context: CniContext}> {
  const ctx = await readCniContext(kube)
  const chart = await chartOfRelease(kube, ctx, sources)
  const {facts, talos, notes} = await readLiveFacts(kube, ctx, sources)
  // upgradeCompatibility stays the minor first installed, as `cni values set` keeps it: without it
  // the chart at hand (after `cni upgrade`, a later minor) would give its own minor.
  const report = await validateCiliumValues({
    chartPath: chart.path,
    user: ctx.user,
    facts: {...facts, kubeProxy: target, tunnel: ctx.modes.tunnel, upgradeCompatibility: ctx.modes.upgradeCompatibility},
    laterFacts: talos,
  })
  if (!report.valid) throw new ValidationError(`the stored Cilium values do not allow kube-proxy mode "${target}", nothing was changed`, report.issues)
  return validatedChange(ctx, ctx.user, chart, notes, report)
}

/** The switch's intent: spec.cni.kubeProxy, written before anything else changes. */
export function recordKubeProxyModeTask(p: {session: Session; target: KubeProxyMode}): Task {
  return {
    id: 'record-mode',
    title: `Record kube-proxy mode "${p.target}" in the IchorInstallation`,
    async probe() {
      const cr = await readInstallation(await p.session.kube())
      if (!cr) return missing('no IchorInstallation')
      return cr.spec.cni.kubeProxy === p.target ? holds(`spec.cni.kubeProxy is ${p.target}`) : missing(`spec.cni.kubeProxy is ${cr.spec.cni.kubeProxy}`)
    },
    async run() {
      const kube = await p.session.kube()
      const cr = await readInstallation(kube)
      if (!cr) throw new IchorError('the IchorInstallation is gone')
      // Over the version just read: a change landing in between is a conflict (exit 3), not overwritten.
      await writeInstallationSpec(kube, {...cr.spec, cni: {...cr.spec.cni, kubeProxy: p.target}}, {readAt: cr})
    },
  }
}

/** The agents read their mode from cilium-config: the key must say the new one before the Talos side changes. */
export function verifyCiliumConfigTask(p: {session: Session; target: KubeProxyMode; timeoutMs: number}): Task {
  const want = kubeProxyReplacementValue(p.target)
  const {namespace, name, key} = CILIUM_CONFIG
  const read = async () => readConfigMapKey(await p.session.kube(), namespace, name, key)
  return {
    id: 'verify-cilium-config',
    title: `Verify ${namespace}/${name} has ${key}=${want}`,
    mutating: false,
    async probe() {
      const got = await read()
      return got === want ? holds(`${key}=${got}`) : missing(`${key}=${got ?? '(absent)'}`)
    },
    async run(progress) {
      await waitFor(
        `${namespace}/${name} ${key}=${want}`,
        async () => {
          const got = await read()
          return {done: got === want, state: `${key}=${got ?? '(absent)'}`}
        },
        {timeoutMs: Math.min(p.timeoutMs, 60_000), onProgress: progress},
      )
    },
  }
}
