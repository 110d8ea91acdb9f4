// The flags `ichor cni kube-proxy replace|restore` share.
import {Flags} from '@oclif/core'
import {assetFlags} from './base.js'
import {kubeFlags, statePassphraseFlags, talosAccessFlags, timeoutFlag, lockFlags, yesFlag} from './flags.js'

export const kubeProxySwitchFlags = {
  ...kubeFlags,
  ...talosAccessFlags,
  ...statePassphraseFlags,
  'dry-run': Flags.boolean({description: 'probe every step and show the plan; change nothing'}),
  ...yesFlag,
  timeout: timeoutFlag(900),
  ...lockFlags,
  'cilium-chart': assetFlags['cilium-chart'],
  mirror: assetFlags.mirror,
}
