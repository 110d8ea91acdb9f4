// The flags `ichor cni kube-proxy replace|restore` share.
import {Flags} from '@oclif/core'
import {assetFlags} from './base.js'
import {kubeFlags, statePassphraseFlags, talosAccessFlags, timeoutFlag, lockFlags} from './flags.js'

export const kubeProxySwitchFlags = {
  ...kubeFlags,
  ...talosAccessFlags,
  ...statePassphraseFlags,
  'dry-run': Flags.boolean({description: 'probe every step and show the plan; change nothing'}),
  yes: Flags.boolean({char: 'y', description: 'do not ask for confirmation (required when stdin is not a terminal)'}),
  timeout: timeoutFlag(900),
  ...lockFlags,
  'cilium-chart': assetFlags['cilium-chart'],
  mirror: assetFlags.mirror,
}
