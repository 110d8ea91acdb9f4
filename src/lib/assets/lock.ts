// The pinned upstream artifacts: assets/lock.json names each by URL, size and SHA-256.
import {readFileSync} from 'node:fs'
import {dirname, join, resolve} from 'node:path'
import {fileURLToPath} from 'node:url'

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
}

/** The package root (the folder holding package.json), from dist/lib/assets or src/lib/assets. */
export const PACKAGE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..')

/** Where fetched artifacts live: ICHOR_ASSETS_DIR, else the package's own assets/ folder. */
export function assetsDir(): string {
  return process.env.ICHOR_ASSETS_DIR ?? join(PACKAGE_ROOT, 'assets')
}

let cached: Record<AssetId, PinnedAsset> | undefined

export function pinnedAssets(): Record<AssetId, PinnedAsset> {
  if (!cached) {
    const raw = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'assets', 'lock.json'), 'utf8')) as Record<string, Omit<PinnedAsset, 'id'>>
    cached = Object.fromEntries(ASSET_IDS.map((id) => {
      const entry = raw[id]
      if (!entry) throw new Error(`assets/lock.json has no entry "${id}"`)
      return [id, {...entry, id}]
    })) as Record<AssetId, PinnedAsset>
  }
  return cached
}
