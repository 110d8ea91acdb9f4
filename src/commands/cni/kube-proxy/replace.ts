import {KubeProxySwitchCommand} from '../../../lib/cli/kube-proxy-flags.js'

export default class CniKubeProxyReplace extends KubeProxySwitchCommand {
  static override summary =
    "Let Cilium replace kube-proxy: Cilium's kubeProxyReplacement on and verified first, then kube-proxy off in the Talos machine configs and its DaemonSet removed."
  static override examples = [
    '<%= config.bin %> cni kube-proxy replace --kubeconfig ./kubeconfig --dry-run',
    '<%= config.bin %> cni kube-proxy replace --kubeconfig ./kubeconfig --talosconfig ./talosconfig --yes',
  ]
  protected readonly target = 'replaced'
}
