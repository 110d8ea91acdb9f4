import {Flags} from '@oclif/core'
import {IchorCommand, installFlags} from '../lib/cli/base.js'
import {kubeFlags, statePassphraseFlags, yesFlag} from '../lib/cli/flags.js'
import {initCiliumModeFlags} from '../lib/cli/values-flags.js'
import {initCiliumValuesFlags, initValuesInputFrom} from '../lib/cli/values-args.js'
import {init} from '../lib/plans/init-plan.js'
import {installSources} from '../lib/cli/bind.js'
import {renderInitSummary, renderLiveDryRun} from '../lib/init/summary.js'
import type {PromotionMode} from '../lib/state/installation-types.js'

export default class Init extends IchorCommand {
  static override summary = 'Turn fresh Talos nodes into a cluster with Cilium, Kokumi and Argo CD.'
  static override description = `Every step is probed first and skipped when it already holds, so running the same command again after a crash converges.
With --dry-run --output-dir DIR nothing is contacted: everything is validated and rendered into DIR and the plan is printed.`
  static override examples = [
    '<%= config.bin %> init --cluster-name homelab --endpoint https://192.0.2.10:6443 --control-plane 192.0.2.10 --worker 192.0.2.11',
    '$ ICHOR_STATE_PASSPHRASE_FILE=~/.config/ichor/homelab.pass <%= config.bin %> init --yes --cluster-name homelab --endpoint https://192.0.2.10:6443 --control-plane 192.0.2.10',
    '<%= config.bin %> init --dry-run --output-dir ./out --cluster-name homelab --endpoint https://192.0.2.10:6443 --control-plane 192.0.2.10 --mirror ./mirror',
  ]
  static override flags = {
    'cluster-name': Flags.string({description: 'cluster name (DNS-1123 label)', helpValue: 'NAME'}),
    endpoint: Flags.string({description: 'Kubernetes API endpoint, e.g. https://192.0.2.10:6443', helpValue: 'URL'}),
    'control-plane': Flags.string({description: 'control-plane node address (repeat for more)', helpValue: 'IP', multiple: true}),
    worker: Flags.string({description: 'worker node address (repeat for more)', helpValue: 'IP', multiple: true}),
    'talos-version': Flags.string({description: 'Talos version the configs target (default: the version ichor pins)', helpValue: 'vX.Y.Z'}),
    'kubernetes-version': Flags.string({description: 'Kubernetes version (default: the Talos default)', helpValue: 'X.Y.Z'}),
    ...initCiliumModeFlags,
    'install-disk': Flags.string({
      description: "disk Talos is installed onto, erased (default: Talos's /dev/sda; on a rerun, what the cluster stores)",
      helpValue: 'PATH',
    }),
    'install-image': Flags.string({
      description: 'Talos installer image, e.g. an Image Factory installer whose schematic adds system extensions',
      helpValue: 'IMAGE',
    }),
    'config-patch': Flags.string({
      description: 'Talos config patch for every node, as talosctl gen config takes it (repeatable)',
      helpValue: '@FILE|YAML',
      multiple: true,
    }),
    'config-patch-control-plane': Flags.string({description: 'Talos config patch for control planes (repeatable)', helpValue: '@FILE|YAML', multiple: true}),
    'config-patch-worker': Flags.string({description: 'Talos config patch for workers (repeatable)', helpValue: '@FILE|YAML', multiple: true}),
    'node-patch': Flags.string({description: 'Talos config patch for one node, applied last (repeatable)', helpValue: 'ADDRESS=@FILE|YAML', multiple: true}),
    ...initCiliumValuesFlags,
    'argocd-values': Flags.string({description: 'YAML file with the user layer of Argo CD chart values', helpValue: 'FILE'}),
    'kokumi-values': Flags.string({description: 'YAML file with Kokumi values (replicas and memory limits only)', helpValue: 'FILE'}),
    promotion: Flags.string({
      description: 'how Kokumi promotes a new bundle (default: Automatic; on a rerun, what the cluster stores)',
      options: ['Automatic', 'Manual'],
    }),
    ...yesFlag,
    'allow-reboot': Flags.boolean({
      description: 'on a rerun with a changed machine config: reboot the nodes Talos must reboot to take it (one at a time) without asking',
    }),
    'dry-run': Flags.boolean({description: 'change nothing; with --output-dir render everything offline, otherwise probe a live cluster'}),
    'output-dir': Flags.string({description: 'with --dry-run: directory to write the rendered configs, manifests and plan into', helpValue: 'DIR'}),
    'state-dir': Flags.string({
      description: 'local state directory (Talos secrets, configs, kubeconfig) before the cluster holds them; default: $XDG_STATE_HOME/ichor/<cluster>',
      helpValue: 'DIR',
    }),
    ...statePassphraseFlags,
    ...kubeFlags,
    kubeconfig: Flags.string({
      description:
        "kubeconfig of an existing cluster, to continue it from a machine without the local state (default: the state directory's, never KUBECONFIG: init creates the cluster)",
      helpValue: 'FILE',
    }),
    ...installFlags,
  }

  async run() {
    const {flags: f} = await this.parse(Init)
    const json = this.jsonEnabled()
    const outcome = await init({
      ...this.planOptions(f),
      flags: {
        clusterName: f['cluster-name'],
        endpoint: f.endpoint,
        controlPlanes: f['control-plane'] ?? [],
        workers: f.worker ?? [],
        talosVersion: f['talos-version'],
        kubernetesVersion: f['kubernetes-version'],
        kubeProxy: f['kube-proxy'],
        tunnel: f.tunnel,
        machineConfig: {
          installDisk: f['install-disk'],
          installImage: f['install-image'],
          configPatch: f['config-patch'],
          configPatchControlPlane: f['config-patch-control-plane'],
          configPatchWorker: f['config-patch-worker'],
          nodePatch: f['node-patch'],
        },
      },
      values: {cilium: initValuesInputFrom(f), argocd: f['argocd-values'], kokumi: f['kokumi-values']},
      sources: installSources(f),
      promotion: f.promotion as PromotionMode | undefined,
      allowUnpinned: f['allow-unpinned'],
      outputDir: f['output-dir'],
      stateDir: f['state-dir'],
      statePassphraseFile: f['state-passphrase-file'],
      registryEndpoint: f['registry-endpoint'],
      allowReboot: f['allow-reboot'],
    })
    if (!json)
      this.log(
        outcome.kind === 'offline'
          ? renderOfflineDryRun(outcome.result)
          : f['dry-run']
            ? renderLiveDryRun(outcome.result)
            : renderInitSummary(outcome.inputs, outcome.result),
      )
    return outcome.result
  }
}

function renderOfflineDryRun(r: {output: string; files: string[]; redacted: string[]; plan: {title: string}[]}): string {
  const redacted = r.redacted.length > 0 ? ['', `Left out ${r.redacted.length} Secret value(s) a real run generates or reads (listed in redacted.txt).`] : []
  return [
    `Dry run: nothing was contacted. Wrote ${r.files.length} files into ${r.output}:`,
    ...r.files.map((f) => `  ${f}`),
    ...redacted,
    '',
    'A real run would execute:',
    ...r.plan.map((s, i) => `  ${String(i + 1).padStart(2)}. ${s.title}`),
  ].join('\n')
}
