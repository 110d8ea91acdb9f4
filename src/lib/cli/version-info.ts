// What `ichor version` reports: the CLI's own version and every version it pins.
import {pinnedAssets} from '../assets/lock.js'
import {embeddedAssets} from '../assets/packaged.js'
import {DEFAULT_TALOS_VERSION, defaultKubernetesVersion} from '../talos/versions.js'

export interface VersionInfo {
  ichor: string
  node: string
  platform: string
  pinned: {cilium: string; argocd: string; kokumi: string; talos: string; kubernetes: string}
  /** In the single binary: what it embeds, and whether each is the pinned artifact. */
  embedded?: {id: string; version: string; sha256: string; matchesPin: boolean}[]
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
      kubernetes: defaultKubernetesVersion(),
    },
    embedded: embeddedAssets()?.artifacts.map(({id, version, sha256, matchesPin}) => ({id, version, sha256, matchesPin})),
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
  const embedded = (v.embedded ?? []).map(
    (a) => `  ${a.id.padEnd(width)}  ${a.version} sha256 ${a.sha256.slice(0, 12)}${a.matchesPin ? '' : '  NOT the pinned artifact'}`,
  )
  return [
    `ichor ${v.ichor} (node ${v.node}, ${v.platform})`,
    'Pinned:',
    ...rows.map(([name, value]) => `  ${name.padEnd(width)}  ${value}`),
    ...(embedded.length > 0 ? ['Embedded in this binary:', ...embedded] : []),
  ].join('\n')
}
