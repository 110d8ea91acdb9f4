// What `ichor upgrade plan` prints: where the cluster is, where it goes, and each hop with its
// command, why it comes where it does, and the source of the rule.
import {describeFinding, type RemovedApiFinding} from '../cilium/removed-apis.js'
import {minorKeyOf} from '../compatibility/queries.js'
import type {UpgradePlanReport} from './read.js'

/** What the hop's Cilium minor finds among the live objects, under the hop that crosses it. */
function findingLines(r: UpgradePlanReport, to: string): string[] {
  const minor = minorKeyOf(to)
  const of = (fs: RemovedApiFinding[]) => fs.filter((f) => f.minor === minor)
  const refusals = of(r.removedApis.refusals)
  const warnings = of(r.removedApis.warnings)
  return [
    ...(refusals.length ? [`   first change or delete (ichor cni upgrade refuses them, or --skip-removed-api-check):`] : []),
    ...refusals.map((f) => `     - ${describeFinding(f)}`),
    ...(warnings.length ? [`   Cilium ${minor}'s upgrade notes also warn of:`] : []),
    ...warnings.map((f) => `     - ${describeFinding(f)}`),
  ]
}

export function formatUpgradePlan(r: UpgradePlanReport): string {
  const c = r.current
  const mixed = new Set(c.talos.nodes.map((n) => n.version)).size > 1
  const talos = mixed ? `Talos ${c.talos.lowest} (lowest; ${c.talos.nodes.map((n) => `${n.node} ${n.version}`).join(', ')})` : `Talos ${c.talos.lowest}`
  const target =
    r.targetKind === 'latest'
      ? `the newest combination compatibility data revision ${r.compatibility.revision} allows`
      : `this ichor's tested default set; --to-latest plans to the newest the compatibility data allows`
  const lines = [
    `Current: ${talos}, Kubernetes ${c.kubernetes.lowest}, Cilium ${c.cilium}`,
    `Target:  Talos ${r.target.talos}, Kubernetes ${r.target.kubernetes}, Cilium ${r.target.cilium} (${target})`,
  ]
  if (r.hops.length === 0 && !r.blocked) lines.push('', 'Nothing to upgrade: the cluster runs the target combination (or newer).')
  r.hops.forEach((h, i) => {
    lines.push('', `${i + 1}. ${h.command}`, `   ${h.from} -> ${h.to}: ${h.why}`, `   source: ${h.source}`)
    if (h.component === 'cilium' && minorKeyOf(h.from) !== minorKeyOf(h.to)) lines.push(...findingLines(r, h.to))
  })
  if (r.blocked) lines.push('', `Stops here: ${r.blocked}`)
  const stack = c.stack.filter((s) => s.installed !== s.pinned)
  if (stack.length > 0) lines.push('', ...stack.map((s) => `Stack: ${s.component} ${s.installed ?? '(not recorded)'} installed, this ichor pins ${s.pinned}`))
  lines.push('', `Compatibility data: revision ${r.compatibility.revision} (${r.compatibility.origin}). Nothing was changed.`)
  return lines.join('\n')
}
