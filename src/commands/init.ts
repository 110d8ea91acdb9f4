import {Flags} from '@oclif/core'
import {assetFlags, IchorCommand} from '../lib/cli/base.js'
import {ciliumModeFlags} from '../lib/cli/values-flags.js'
import {readValuesFile} from '../lib/values/input.js'
import {checkInitInputs, type InitFlags} from '../lib/init/inputs.js'
import {renderInit} from '../lib/init/render.js'
import {writeInitDryRun} from '../lib/init/dry-run.js'
import {IchorError} from '../lib/errors/errors.js'
import {generateStackSecrets} from '../lib/stack/prepare.js'
import {localState} from '../lib/state/local.js'
import {runInit} from '../lib/init/run.js'
import {renderInitSummary} from '../lib/init/summary.js'
import {canPrompt, confirm, promptMissingInitFlags} from '../lib/init/prompts.js'
import {outputModeFor} from '../lib/tasks/engine.js'
import type {PromotionMode} from '../lib/stack/orders.js'

export default class Init extends IchorCommand {
  static override summary = 'Turn fresh Talos nodes into a cluster with Cilium, Kokumi and Argo CD.'
  static override description = `Every step is probed first and skipped when it already holds, so running the same command again after a crash converges.
With --dry-run --output DIR nothing is contacted: everything is validated and rendered into DIR and the plan is printed.`
  static override examples = [
    '<%= config.bin %> init --cluster-name homelab --endpoint https://192.0.2.10:6443 --control-plane 192.0.2.10 --worker 192.0.2.11',
    '<%= config.bin %> init --dry-run --output ./out --cluster-name homelab --endpoint https://192.0.2.10:6443 --control-plane 192.0.2.10 --mirror ./mirror',
  ]
  static override flags = {
    'cluster-name': Flags.string({description: 'cluster name (DNS-1123 label)', helpValue: 'NAME'}),
    endpoint: Flags.string({description: 'Kubernetes API endpoint, e.g. https://192.0.2.10:6443', helpValue: 'URL'}),
    'control-plane': Flags.string({description: 'control-plane node address (repeat for more)', helpValue: 'IP', multiple: true, default: []}),
    worker: Flags.string({description: 'worker node address (repeat for more)', helpValue: 'IP', multiple: true, default: []}),
    'talos-version': Flags.string({description: 'Talos version the configs target (default: the version ichor pins)', helpValue: 'vX.Y.Z'}),
    'kubernetes-version': Flags.string({description: 'Kubernetes version (default: the Talos default)', helpValue: 'X.Y.Z'}),
    ...ciliumModeFlags,
    'cilium-values': Flags.string({description: 'YAML file with the user layer of Cilium values', helpValue: 'FILE'}),
    'argocd-values': Flags.string({description: 'YAML file with the user layer of Argo CD chart values', helpValue: 'FILE'}),
    'kokumi-values': Flags.string({description: 'YAML file with Kokumi values (replicas and memory limits only)', helpValue: 'FILE'}),
    promotion: Flags.string({description: 'how Kokumi promotes a new bundle', options: ['Automatic', 'Manual'], default: 'Automatic'}),
    yes: Flags.boolean({char: 'y', description: 'do not ask for confirmation'}),
    'dry-run': Flags.boolean({description: 'change nothing; with --output render everything offline, otherwise probe a live cluster'}),
    'state-dir': Flags.string({description: 'local state directory (Talos secrets, configs, kubeconfig) before the cluster holds them; default: $XDG_STATE_HOME/ichor/<cluster>', helpValue: 'DIR'}),
    kubeconfig: Flags.string({description: 'kubeconfig of an existing cluster, to continue it from a machine without the local state', helpValue: 'FILE'}),
    'registry-endpoint': Flags.string({description: "reach Kokumi's registry at this URL instead of a port-forward (e.g. http://127.0.0.1:5000)", helpValue: 'URL'}),
    'break-lock': Flags.boolean({description: 'delete the ichor-system Lease left by a command that is no longer running, then take it'}),
    timeout: Flags.integer({description: 'seconds to wait for each readiness step', default: 900, min: 1}),
    output: Flags.string({char: 'o', description: 'with --dry-run: directory to write the rendered configs, manifests and plan into', helpValue: 'DIR'}),
    ...assetFlags,
  }

  async run() {
    const {flags} = await this.parse(Init)
    if (flags.output && !flags['dry-run']) throw new IchorError('--output is only used with --dry-run', {exitCode: 2})
    let initFlags: InitFlags = {
      clusterName: flags['cluster-name'],
      endpoint: flags.endpoint,
      controlPlanes: flags['control-plane'],
      workers: flags.worker,
      talosVersion: flags['talos-version'],
      kubernetesVersion: flags['kubernetes-version'],
      kubeProxy: flags['kube-proxy'],
      tunnel: flags.tunnel,
    }
    if (!flags['dry-run'] && !this.jsonEnabled() && canPrompt()) initFlags = await promptMissingInitFlags(initFlags)
    const inputs = checkInitInputs(initFlags, {requireNodes: !flags['dry-run']})
    const userCiliumValues = flags['cilium-values'] ? readValuesFile(flags['cilium-values'], '--cilium-values') : {}
    const argocdValues = flags['argocd-values'] ? readValuesFile(flags['argocd-values'], '--argocd-values') : {}
    const kokumiValues = flags['kokumi-values'] ? readValuesFile(flags['kokumi-values'], '--kokumi-values') : {}
    const generated = generateStackSecrets()
    const rendering = renderInit(inputs, {
      sources: {
        cilium: {override: flags['cilium-chart'], mirror: flags.mirror},
        argocd: {override: flags['argocd-chart'], mirror: flags.mirror},
        kokumi: {override: flags['kokumi-manifest'], mirror: flags.mirror},
      },
      userCiliumValues,
      argocdValues,
      kokumiValues,
      promotion: flags.promotion as PromotionMode,
      generated,
      onAsset: (line) => this.note(line),
    })
    if (flags['dry-run'] && flags.output) {
      const render = await rendering
      const out = writeInitDryRun(flags.output, inputs, render)
      if (!this.jsonEnabled()) {
        this.log(`Dry run: nothing was contacted. Wrote ${out.files.length} files into ${out.dir}:`)
        for (const f of out.files) this.log(`  ${f}`)
        this.log('\nA real run would execute:')
        out.plan.forEach((s, i) => this.log(`  ${String(i + 1).padStart(2)}. ${s.title}`))
      }
      const bundles = Object.values(render.stack.components).map((c) => ({component: c.component, repository: c.bundle.repository, tag: c.bundle.tag, manifestDigest: c.bundle.artifact.manifestDigest}))
      return {dryRun: true, output: out.dir, files: out.files, plan: out.plan, bundles, assets: Object.values(render.assets).map(({id, path, version, sha256, matchesPin}) => ({id, path, version, sha256, matchesPin}))}
    }
    const state = localState(inputs.clusterName, flags['state-dir'])
    if (!flags['dry-run'] && !flags.yes && !this.jsonEnabled() && canPrompt()) {
      await rendering // a confirmation is asked only for inputs that render
      const nodes = [...inputs.controlPlanes, ...inputs.workers].join(', ')
      if (!(await confirm(`Configure ${nodes} as cluster "${inputs.clusterName}" (${inputs.endpoint})?`))) throw new IchorError('aborted: nothing was changed', {exitCode: 1})
    }
    const result = await runInit({
      inputs, render: rendering, state, generated,
      userValues: {cilium: userCiliumValues, argocd: argocdValues, kokumi: kokumiValues},
      registryEndpoint: flags['registry-endpoint'],
      breakLock: flags['break-lock'],
      kubeconfig: flags.kubeconfig,
      timeoutMs: flags.timeout * 1000,
      output: outputModeFor({json: this.jsonEnabled()}),
      dryRun: flags['dry-run'],
      bcryptCost: process.env.ICHOR_TEST_BCRYPT_COST ? Number(process.env.ICHOR_TEST_BCRYPT_COST) : undefined,
    })
    if (!this.jsonEnabled()) {
      if (flags['dry-run']) this.log(result.changed ? '\nDry run: the steps marked "would run" are what a real run changes.' : '\nDry run: nothing would change.')
      else this.log(renderInitSummary(inputs, result))
    }
    return result
  }
}
