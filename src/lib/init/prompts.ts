// Interactive completion of missing `ichor init` flags, only on a terminal. Without one,
// a missing flag is an error that names it (checkInitInputs), never a prompt that hangs.
// Every answer is checked by the same validators as the flags as it is typed, and asked
// again when wrong; Ctrl-C at a prompt ends the run with "aborted: nothing was changed", 130.
import {checkAssets} from '../doctor/assets.js'
import {checkHelm, checkTalosctl} from '../doctor/binaries.js'
import {IchorError} from '../errors/errors.js'
import {DEFAULT_TALOS_VERSION, parseTalosVersion, requireSupportedTalosVersion} from '../talos/versions.js'
import {checkEndpoint, clusterNameProblem, splitNodeList, type InitFlags} from './inputs.js'
import {nodeProblem} from '../talos/node-address.js'

/** A node list answer: every entry an IP or host name, none given twice (also not in `taken`). */
export function nodeListProblem(answer: string, opts: {required: boolean; taken?: readonly string[]}): string | undefined {
  const nodes = splitNodeList(answer)
  if (opts.required && nodes.length === 0) return 'at least one node address is required'
  for (const [i, node] of nodes.entries()) {
    const problem = nodeProblem(node)
    if (problem) return problem
    if (nodes.indexOf(node) !== i || opts.taken?.includes(node)) return `"${node}" is given twice`
  }
  return undefined
}

/**
 * What `ichor doctor` checks on this machine (talosctl for the Talos version targeted, helm,
 * the artifacts), before the first question: nobody answers prompts and types a passphrase
 * only to learn helm is missing. A failed check is its doctor line and fix; warnings pass.
 */
export async function checkInitPrerequisites(o: {
  talosVersion?: string
  sources: {ciliumChart?: string; argocdChart?: string; kokumiManifest?: string; mirror?: string; assetsDir?: string}
}): Promise<void> {
  const target = requireSupportedTalosVersion(parseTalosVersion(o.talosVersion ?? DEFAULT_TALOS_VERSION))
  const s = o.sources
  const checks = [
    ...(await Promise.all([checkTalosctl(target), checkHelm()])),
    ...checkAssets({cilium: s.ciliumChart, argocd: s.argocdChart, kokumi: s.kokumiManifest, mirror: s.mirror, assetsDir: s.assetsDir}),
  ]
  const failed = checks.filter((c) => c.status === 'fail')
  if (failed.length === 0) return
  throw new IchorError(`ichor init cannot run on this machine, nothing was asked or changed:\n${failed.map((c) => `- ${c.id}: ${c.detail}`).join('\n')}`, {
    hint: [...failed.map((c) => c.fix).filter(Boolean), '`ichor doctor` checks all of it'].join('\n'),
  })
}

export async function promptMissingInitFlags(flags: InitFlags): Promise<InitFlags> {
  const {input} = await import('@inquirer/prompts')
  const out = {...flags, controlPlanes: splitNodeList(flags.controlPlanes), workers: splitNodeList(flags.workers)}
  out.clusterName ??= (await input({message: 'Cluster name', default: 'homelab', validate: (v) => clusterNameProblem(v.trim()) ?? true})).trim()
  if (out.controlPlanes.length === 0) {
    const answer = await input({message: 'Control-plane node addresses (comma-separated)', validate: (v) => nodeListProblem(v, {required: true}) ?? true})
    out.controlPlanes = splitNodeList(answer)
  }
  out.endpoint ??= (
    await input({
      message: 'Kubernetes API endpoint',
      default: `https://${out.controlPlanes[0]}:6443`,
      validate: (v) => {
        const check = checkEndpoint(v.trim())
        return 'problem' in check ? check.problem : true
      },
    })
  ).trim()
  if (out.workers.length === 0) {
    const answer = await input({
      message: 'Worker node addresses (comma-separated, empty for none)',
      default: '',
      validate: (v) => nodeListProblem(v, {required: false, taken: out.controlPlanes}) ?? true,
    })
    out.workers = splitNodeList(answer)
  }
  return out
}
