// What the operator reads at the end of `ichor init`.
import type {InitInputs} from './inputs.js'
import type {InitResult} from '../plans/init.js'

export function renderInitSummary(inputs: InitInputs, result: InitResult): string {
  const lines = [
    '',
    result.changed
      ? `Cluster "${inputs.clusterName}" is ready.`
      : result.drift.length > 0
        ? `Cluster "${inputs.clusterName}": nothing changed, but it drifted (below).`
        : `Cluster "${inputs.clusterName}" was already converged: nothing changed.`,
    `  kubeconfig:  ${result.kubeconfig}   (export KUBECONFIG=${result.kubeconfig})`,
    `  Cilium:      Helm release kube-system/cilium`,
    ...result.bundles.map((b) => `  ${b.component.padEnd(11)}  ${b.repository}:${b.tag} (${b.digest.slice(0, 19)})`),
    result.controlPlaneConfig.inlineManifest
      ? `  Talos:       ${result.controlPlaneConfig.path} still carries the Cilium inline manifest: do not apply it (rerun \`ichor init\` to finish the hand-over)`
      : `  Talos:       Cilium inline manifest removed from the control planes and from ${result.controlPlaneConfig.path} (safe to apply to add a control plane)`,
    ...(result.promotion === 'Manual'
      ? [
          '  Promotion:   Manual. ichor approved the first install itself (nothing was served before, so nothing to protect); every later bundle waits for `ichor stack promote argocd|kokumi`',
        ]
      : []),
    '  Argo CD UI:  kubectl -n argocd port-forward svc/argocd-server 8080:80',
    '  Kokumi UI:   kubectl -n kokumi port-forward svc/kokumi-server 8081:80',
  ]
  for (const d of result.drift) lines.push('', `  Drift: ${d.message}; restore the stored values with \`${d.restore}\``)
  if (result.kokumiAdminPassword) {
    lines.push('', `  Kokumi admin password (shown once; ichor stack password kokumi prints it again): ${result.kokumiAdminPassword}`)
  }
  return lines.join('\n')
}
