// Flags shared by the commands that take Cilium values.
import {Flags} from '@oclif/core'
import {KUBE_PROXY_MODES, TUNNEL_PROTOCOLS} from '../state/installation-types.js'

export const ciliumModeFlags = {
  'kube-proxy': Flags.string({
    description: 'kube-proxy mode: replaced (Cilium replaces kube-proxy) or kube-proxy',
    options: [...KUBE_PROXY_MODES],
    default: 'replaced',
  }),
  tunnel: Flags.string({description: 'tunnel protocol', options: [...TUNNEL_PROTOCOLS], default: 'vxlan'}),
}

/**
 * init's form: no defaults, so a rerun that omits them keeps what the cluster stores
 * (checkInitInputs applies replaced and vxlan on a new cluster).
 */
export const initCiliumModeFlags = {
  'kube-proxy': Flags.string({
    description: 'kube-proxy mode: replaced (Cilium replaces kube-proxy) or kube-proxy (default: replaced; on a rerun, what the cluster stores)',
    options: [...KUBE_PROXY_MODES],
  }),
  tunnel: Flags.string({description: 'tunnel protocol (default: vxlan; on a rerun, what the cluster stores)', options: [...TUNNEL_PROTOCOLS]}),
}
