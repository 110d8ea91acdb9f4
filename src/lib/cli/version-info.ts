// What `ichor version` reports: the CLI's own version and every version it pins.
import {pinnedAssets} from '../assets/lock.js'
import {DEFAULT_KUBERNETES_VERSION, DEFAULT_TALOS_VERSION} from '../talos/versions.js'

export interface VersionInfo {
  ichor: string
  node: string
  platform: string
  pinned: {cilium: string; argocd: string; kokumi: string; talos: string; kubernetes: string}
}

export function versionInfo(cli: {version: string; platform: string; arch: string}): VersionInfo {
  const assets = pinnedAssets()
  return {
    ichor: cli.version,
    node: process.version,
    platform: `${cli.platform}-${cli.arch}`,
    pinned: {
      cilium: assets.cilium.version,
      argocd: assets.argocd.version,
      kokumi: assets.kokumi.version,
      talos: DEFAULT_TALOS_VERSION,
      kubernetes: DEFAULT_KUBERNETES_VERSION,
    },
  }
}

export function formatVersionInfo(v: VersionInfo): string {
  const rows: Array<[string, string]> = [
    ['Cilium chart', v.pinned.cilium],
    ['Argo CD chart', v.pinned.argocd],
    ['Kokumi', v.pinned.kokumi],
    ['Talos', v.pinned.talos],
    ['Kubernetes', `${v.pinned.kubernetes} (default)`],
  ]
  const width = Math.max(...rows.map(([name]) => name.length))
  return [`ichor ${v.ichor} (node ${v.node}, ${v.platform})`, 'Pinned:', ...rows.map(([name, value]) => `  ${name.padEnd(width)}  ${value}`)].join('\n')
}
