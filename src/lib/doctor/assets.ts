// The artifacts `ichor init` and `ichor stack sync` would use, found exactly as they find
// them (flag, fetched folder, embedded, mirror), and their digests against assets/lock.json.
import {describeAsset, OVERRIDE_FLAG, resolveAsset, type AssetSources} from '../assets/resolve.js'
import {ASSET_IDS, type AssetId} from '../assets/lock.js'
import {fail, hintOf, messageOf, ok, warn, type DoctorCheck} from './types.js'

export type AssetOverrides = Partial<Record<AssetId, string>> & Pick<AssetSources, 'mirror' | 'assetsDir'>

export function checkAssets(sources: AssetOverrides): DoctorCheck[] {
  return ASSET_IDS.map((id) => checkAsset(id, sources))
}

function checkAsset(id: AssetId, sources: AssetOverrides): DoctorCheck {
  const check = `asset:${id}`
  try {
    const asset = resolveAsset(id, {override: sources[id], mirror: sources.mirror, assetsDir: sources.assetsDir})
    if (asset.matchesPin) return ok(check, describeAsset(asset))
    // A fetched file was verified when it was fetched: a different one now was changed since.
    if (asset.origin === 'assets')
      return fail(check, `${describeAsset(asset)}: changed since it was fetched`, `run \`ichor assets fetch\` again (it replaces a file that does not match)`)
    return warn(check, describeAsset(asset), `run \`ichor assets fetch\` for the pinned ${asset.pinned.version}, or pass ${OVERRIDE_FLAG[id]} FILE of it`)
  } catch (error) {
    return fail(check, messageOf(error), hintOf(error) ?? 'run `ichor assets fetch`')
  }
}
