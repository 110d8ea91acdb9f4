import {KubeProxySwitchCommand} from '../../../lib/cli/kube-proxy-flags.js'

export default class CniKubeProxyRestore extends KubeProxySwitchCommand {
  static override summary =
    "Bring kube-proxy back: kube-proxy on in the Talos machine configs and its DaemonSet ready first, then Cilium's kubeProxyReplacement off."
  static override examples = [
    '<%= config.bin %> cni kube-proxy restore --kubeconfig ./kubeconfig --dry-run',
    '<%= config.bin %> cni kube-proxy restore --kubeconfig ./kubeconfig --talosconfig ./talosconfig --yes',
  ]
  protected readonly target = 'kube-proxy'
}
