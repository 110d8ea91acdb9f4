// The pinned upstream artifacts: assets/lock.json names each by URL, size and SHA-256.
import {dirname, isAbsolute, join, resolve} from 'node:path'
import {fileURLToPath} from 'node:url'
import {readPackagedAsset} from './packaged.js'
import {homeDir} from '../fs/home.js'

export type AssetId = 'cilium' | 'argocd' | 'kokumi'
export const ASSET_IDS: readonly AssetId[] = ['cilium', 'argocd', 'kokumi']

export interface PinnedAsset {
  id: AssetId
  description: string
  name: string
  version: string
  /** Path under the assets directory where `ichor assets fetch` stores it. */
  file: string
  url: string
  size: number
  sha256: string
  /** What this build's tests ran: the versions (the pin only when listed) and how. */
  tested?: {versions: string[]; how: string}
}

/** The package root (the folder holding package.json), from dist/lib/assets or src/lib/assets. */
export const PACKAGE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..')

/**
 * Where `ichor assets fetch` stores artifacts and where commands look for them: the
 * --assets-dir flag, else ICHOR_ASSETS_DIR, else $XDG_CACHE_HOME/ichor/assets. Never the
 * installed package: a global install may be read-only and an upgrade replaces it.
 */
export function assetsDir(flag?: string): string {
  if (flag) return resolve(flag)
  if (process.env.ICHOR_ASSETS_DIR) return resolve(process.env.ICHOR_ASSETS_DIR)
  return join(cacheHome(), 'ichor', 'assets')
}

/** $XDG_CACHE_HOME, else ~/.cache (the XDG spec ignores a relative value). */
export function cacheHome(): string {
  const xdg = process.env.XDG_CACHE_HOME
  return xdg && isAbsolute(xdg) ? xdg : join(homeDir(), '.cache')
}

let cached: Record<AssetId, PinnedAsset> | undefined

export function pinnedAssets(): Record<AssetId, PinnedAsset> {
  if (!cached) {
    const raw = JSON.parse(readPackagedAsset('lock.json').toString('utf8')) as Record<string, Omit<PinnedAsset, 'id'>>
    cached = Object.fromEntries(ASSET_IDS.map((id) => {
      const entry = raw[id]
      if (!entry) throw new Error(`assets/lock.json has no entry "${id}"`)
      return [id, {...entry, id}]
    })) as Record<AssetId, PinnedAsset>
  }
  return cached
}
