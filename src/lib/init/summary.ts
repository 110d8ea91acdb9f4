// What `ichor init` returns (its --json result), and what the operator reads at the end of it.
import type {InitInputs} from './inputs.js'
import type {PromotionMode} from '../state/installation-types.js'
import type {RunResult} from '../tasks/types.js'

export interface InitResult extends RunResult {
  /** The Kokumi admin password, present only on the first successful run (shown once; `ichor stack password kokumi` later). */
  kokumiAdminPassword?: string
  kubeconfig: string
  bundles: {component: string; repository: string; tag: string; digest: string}[]
  /** The state folder's controlplane.yaml and whether it still carries the Cilium inline manifest (after the hand-over it does not). */
  controlPlaneConfig: {path: string; inlineManifest: boolean}
  /** Where the cluster differs from its IchorInstallation, each with the command that restores it; said on every run. */
  drift: {subject: string; message: string; restore: string}[]
  /** How Kokumi promotes new bundles; with Manual, init approved the first install itself (promote-first-install). */
  promotion: PromotionMode
}

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

/**
 * A live dry run's result on stdout (its probing went to stderr): the steps a real run would
 * run, each with why, and how many already hold.
 */
export function renderLiveDryRun(result: RunResult): string {
  const would = result.tasks.filter((t) => t.status === 'would-run')
  const n = result.tasks.length - would.length
  const held = `${n} already ${n === 1 ? 'holds' : 'hold'}`
  if (would.length === 0) return `Dry run: nothing would change (every step holds).`
  return [
    `Dry run: nothing was changed. A real run would run ${would.length} of ${result.tasks.length} steps (${held}):`,
    ...would.map((t, i) => `  ${String(i + 1).padStart(2)}. ${t.title}${t.detail ? ` (${t.detail})` : ''}`),
  ].join('\n')
}
